package durable

import (
	"bufio"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// flockOwner returns the pid of the process holding the exclusive flock
// of f's file, as /proc/locks lists it (0 when it cannot tell): a tree
// lock's holder that has not recorded itself yet (it records itself only
// once it changes the tree) is still named to the run it keeps out.
func flockOwner(f *os.File) int {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return 0
	}
	want := strconv.FormatUint(uint64(unix.Major(st.Dev)), 16) + ":" + strconv.FormatUint(uint64(unix.Minor(st.Dev)), 16) +
		":" + strconv.FormatUint(st.Ino, 10)
	pl, err := os.Open("/proc/locks")
	if err != nil {
		return 0
	}
	defer pl.Close()
	sc := bufio.NewScanner(pl)
	for sc.Scan() {
		// "1: FLOCK  ADVISORY  WRITE 893 fe:00:9978402 0 EOF"
		fs := strings.Fields(sc.Text())
		if len(fs) < 6 || fs[1] != "FLOCK" || fs[3] != "WRITE" || !sameDevIno(fs[5], want) {
			continue
		}
		if pid, err := strconv.Atoi(fs[4]); err == nil && pid > 0 {
			return pid
		}
	}
	return 0
}

// sameDevIno compares /proc/locks' "major:minor:inode" (hex device
// numbers, zero-padded) with want (unpadded).
func sameDevIno(got, want string) bool {
	g, w := strings.Split(got, ":"), strings.Split(want, ":")
	if len(g) != 3 || len(w) != 3 {
		return false
	}
	for i := range 2 {
		a, err1 := strconv.ParseUint(g[i], 16, 32)
		b, err2 := strconv.ParseUint(w[i], 16, 32)
		if err1 != nil || err2 != nil || a != b {
			return false
		}
	}
	return g[2] == w[2]
}
