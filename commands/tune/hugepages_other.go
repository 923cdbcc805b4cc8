//go:build !linux

package tune

// adviseHugePages does nothing where madvise(MADV_HUGEPAGE) does not exist.
func adviseHugePages(args []string) {}
