package ledger

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestFineCtimeProbe: the probe answers for this machine's file system
// (Linux 6.13 and later give fine change times to ext4 and tmpfs; the
// test only requires an answer and no file left), and removes a probe a
// killed run left.
func TestFineCtimeProbe(t *testing.T) {
	dir := t.TempDir()
	left := filepath.Join(dir, ctimeProbe+"123")
	if err := os.WriteFile(left, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	dev, fine := FineCtime(dir)
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	if fine && dev != uint64(st.Dev) {
		t.Fatalf("fine change times on device %d, the directory is on %d", dev, st.Dev)
	}
	t.Logf("fine change times: %v", fine)
	if names, _ := os.ReadDir(dir); len(names) != 0 {
		t.Fatalf("the probe left %v", names)
	}
}
