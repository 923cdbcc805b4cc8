package discover

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// Account is one entry of the system's user database.
type Account struct {
	Name string
	UID  uint32
	Home string
}

// UserDefaultRoot is the default session tree of an account whose home
// directory is home: where pi keeps sessions when no variable moves them
// (FORMAT.md §1). Another user's environment is not ours to read, so a
// PI_CODING_AGENT_DIR set in their shell is not seen.
func UserDefaultRoot(home string) string {
	return filepath.Join(home, ".pi", "agent", "sessions")
}

// Accounts lists the system's user database, in its order: every account
// `getent passwd` lists (each NSS source that allows listing: files,
// systemd-userdb, LDAP with enumeration on), else the accounts of
// /etc/passwd when getent is missing; on macOS, Directory Services
// (dscacheutil). Home directories are the database's, never guessed.
func Accounts(ctx context.Context) ([]Account, error) {
	return listAccounts(ctx)
}

// fromGetent runs `getent passwd`, falling back to reading passwdFile when
// there is no getent.
func fromGetent(ctx context.Context, passwdFile string) ([]Account, error) {
	out, err := exec.CommandContext(ctx, "getent", "passwd").Output()
	if err != nil {
		if _, lookErr := exec.LookPath("getent"); lookErr != nil {
			f, err := os.Open(passwdFile)
			if err != nil {
				return nil, fmt.Errorf("user database: %w", err)
			}
			defer f.Close()
			return ParsePasswd(f)
		}
		return nil, fmt.Errorf("user database: getent passwd: %w", err)
	}
	return ParsePasswd(bytes.NewReader(out))
}

// ParsePasswd reads passwd(5) lines (name:password:uid:gid:gecos:home:shell).
// Comments, NIS "+"/"-" lines and malformed lines are skipped: they name
// no account with a home of its own.
func ParsePasswd(r io.Reader) ([]Account, error) {
	var out []Account
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' || line[0] == '+' || line[0] == '-' {
			continue
		}
		f := strings.Split(line, ":")
		if len(f) < 7 || f[0] == "" {
			continue
		}
		uid, err := strconv.ParseUint(f[2], 10, 32)
		if err != nil || !filepath.IsAbs(f[5]) {
			continue
		}
		out = append(out, Account{Name: f[0], UID: uint32(uid), Home: f[5]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("user database: %w", err)
	}
	return out, nil
}

// ParseDscacheutil reads `dscacheutil -q user` (macOS): blocks of
// "key: value" lines separated by blank lines.
func ParseDscacheutil(r io.Reader) ([]Account, error) {
	var out []Account
	var cur map[string]string
	flush := func() {
		if cur == nil {
			return
		}
		uid, err := strconv.ParseUint(cur["uid"], 10, 32)
		if err == nil && cur["name"] != "" && filepath.IsAbs(cur["dir"]) {
			out = append(out, Account{Name: cur["name"], UID: uint32(uid), Home: cur["dir"]})
		}
		cur = nil
	}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			flush()
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		if cur == nil {
			cur = map[string]string{}
		}
		cur[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	flush()
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("user database: %w", err)
	}
	return out, nil
}
