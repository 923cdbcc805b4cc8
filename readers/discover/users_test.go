package discover

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// TestAccountsReal: the user database lists an account made with useradd,
// with its uid and home, and forgets it after userdel (as root).
func TestAccountsReal(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make an account")
	}
	name := "pstd" + strconv.Itoa(os.Getpid()%1000000)
	home := filepath.Join(t.TempDir(), "home", name)
	if out, err := exec.Command("useradd", "-M", "-d", home, "-s", "/usr/sbin/nologin", "-U", name).CombinedOutput(); err != nil {
		t.Fatalf("useradd: %v: %s", err, out)
	}
	defer exec.Command("userdel", name).Run()
	find := func() *Account {
		all, err := Accounts(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range all {
			if a.Name == name {
				return &a
			}
		}
		return nil
	}
	a := find()
	out, _ := exec.Command("id", "-u", name).Output()
	if a == nil || a.Home != home || strconv.Itoa(int(a.UID)) != strings.TrimSpace(string(out)) {
		t.Fatalf("account %s: %+v (id -u: %s)", name, a, out)
	}
	if got := UserDefaultRoot(a.Home); got != filepath.Join(home, ".pi", "agent", "sessions") {
		t.Errorf("UserDefaultRoot = %s", got)
	}
	if err := exec.Command("userdel", name).Run(); err != nil {
		t.Fatal(err)
	}
	if a := find(); a != nil {
		t.Errorf("still listed after userdel: %+v", a)
	}
}

// TestAccountsWithoutGetent: with no getent on the PATH, /etc/passwd (here
// a file of that format) is read.
func TestAccountsWithoutGetent(t *testing.T) {
	passwd := filepath.Join(t.TempDir(), "passwd")
	data := "root:x:0:0:root:/root:/bin/bash\n# a comment\n+nisuser::::::\nalice:x:1001:1001:Alice,,,:/home/alice:/bin/sh\nbroken:x:notanumber:1:::\nrel:x:7:7::relative/home:/bin/sh\n"
	if err := os.WriteFile(passwd, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", t.TempDir())
	got, err := fromGetent(context.Background(), passwd)
	if err != nil {
		t.Fatal(err)
	}
	want := []Account{{Name: "root", UID: 0, Home: "/root"}, {Name: "alice", UID: 1001, Home: "/home/alice"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if _, err := fromGetent(context.Background(), filepath.Join(t.TempDir(), "none")); err == nil {
		t.Errorf("a missing database is not an error")
	}
}

// TestParseDscacheutil: macOS's Directory Services listing.
func TestParseDscacheutil(t *testing.T) {
	out := "name: _spotlight\npassword: *\nuid: 89\ngid: 89\ndir: /var/empty\nshell: /usr/bin/false\ngecos: Spotlight\n\nname: alice\npassword: ********\nuid: 501\ngid: 20\ndir: /Users/alice\nshell: /bin/zsh\ngecos: Alice\n\n"
	got, err := ParseDscacheutil(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	want := []Account{{Name: "_spotlight", UID: 89, Home: "/var/empty"}, {Name: "alice", UID: 501, Home: "/Users/alice"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}
