package ledger

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"pisess/writers/durable"
)

// The objects of a tree's .pisess/ that every run uses have a fixed type:
// .pisess itself a real directory, its lock and journal regular files. Any
// other type (a directory, a FIFO, a symlink: pisess follows none) stops
// every run over the tree, with this error; fsck --repair moves the object
// aside (MendPisess) and starts afresh (issue 32 §3: no command could mend
// them).

// WrongTypeError is an object of a tree's .pisess/ that is not of its type.
type WrongTypeError struct {
	Path string // the object
	Is   string // what it is ("a directory", "a FIFO", "a symlink to X")
	Want string // what it must be ("a directory", "a regular file")
	Role string // what pisess keeps there
}

func (e *WrongTypeError) Error() string {
	return fmt.Sprintf("%s is %s, not %s: pisess keeps %s there and follows no symlink; "+
		"pisess fsck --repair moves it aside (by hand: %s) and starts afresh", e.Path, e.Is, e.Want, e.Role, e.Hand())
}

// Hand is the command that moves the object aside by hand.
func (e *WrongTypeError) Hand() string {
	return "mv -- " + ShellQuote(e.Path) + " " + ShellQuote(e.Path+".broken")
}

// ShellQuote quotes s for a POSIX shell when it holds anything but the
// characters paths usually have.
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+:@,=") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// pisessObject is one object of .pisess/ with a fixed type.
type pisessObject struct {
	rel  string // under the tree
	dir  bool   // a directory (else a regular file)
	role string
}

var pisessObjects = []pisessObject{
	{rel: PisessDir, dir: true, role: "its journal, lock and quarantine"},
	{rel: filepath.Join(PisessDir, "lock"), role: "the tree lock"},
	{rel: filepath.Join(PisessDir, JournalName), role: "the tree journal"},
}

// wrongType returns the error for the object o of tree when it exists
// and is not of its type.
func wrongType(tree string, o pisessObject) error {
	path := filepath.Join(tree, o.rel)
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("tree %s: %w", tree, err)
	case o.dir && fi.Mode().IsDir(), !o.dir && fi.Mode().IsRegular():
		return nil
	}
	want := "a regular file"
	if o.dir {
		want = "a directory"
	}
	return &WrongTypeError{Path: path, Is: describeType(path, fi), Want: want, Role: o.role}
}

// describeType says what the entry at path (lstat fi) is.
func describeType(path string, fi os.FileInfo) string {
	m := fi.Mode()
	switch {
	case m&fs.ModeSymlink != 0:
		target, _ := os.Readlink(path)
		return "a symlink (to " + target + ")"
	case m.IsDir():
		return "a directory"
	case m.IsRegular():
		return "a regular file"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return fmt.Sprintf("a special file (%v)", m.Type())
}

// CheckPisessDir refuses a tree whose .pisess is not a real directory: a
// symlink there would carry the journal, the lock and the quarantine out
// of the tree (pisess never follows one), and anything else is not
// pisess's. The error (a *WrongTypeError) says what to do.
func CheckPisessDir(tree string) error { return wrongType(tree, pisessObjects[0]) }

// CheckPisessObjects is CheckPisessDir for every object of .pisess/ with a
// fixed type: .pisess itself, the lock and the journal.
func CheckPisessObjects(tree string) error {
	for _, o := range pisessObjects {
		if err := wrongType(tree, o); err != nil {
			return err
		}
	}
	return nil
}

// Mended is one object of .pisess/ that MendPisess found of the wrong
// type: where it went, or why it stays.
type Mended struct {
	*WrongTypeError
	// To is where the object is now ("" when it was not moved).
	To string
	// Err says why it was not moved: Hand is then the command to run.
	Err error
}

// MendPisess moves every object of tree's .pisess/ that is of the wrong
// type aside (fsck --repair, before it takes the tree lock, which such an
// object keeps it from taking) into the quarantine of run correlationID:
// the lock, the journal, or .pisess itself (through <tree>/.pisess.broken.<id>,
// where it stays if the new .pisess/ cannot be made). Each
// is renamed (a symlink itself, never its target), never deleted; the
// caller records each move in the new journal once it holds the lock.
// Nothing is left half-done: a move that fails stops the mending, and is
// reported with the command that does it by hand.
func MendPisess(ops durable.Ops, tree, correlationID string) []Mended {
	var out []Mended
	for i, o := range pisessObjects {
		err := wrongType(tree, o)
		var wt *WrongTypeError
		if !errors.As(err, &wt) {
			continue
		}
		m := Mended{WrongTypeError: wt}
		if i == 0 {
			m.To, m.Err = replacePisessDir(ops, tree, correlationID, wt.Path)
		} else {
			m.To, m.Err = moveToQuarantine(ops, tree, correlationID, wt.Path, filepath.Base(o.rel))
		}
		if m.Err != nil {
			m.To = ""
			return append(out, m)
		}
		out = append(out, m)
	}
	return out
}

// replacePisessDir moves the object at <tree>/.pisess aside, makes a new
// .pisess/ and moves the object into its quarantine; it returns where the
// object is (beside the tree, <tree>/.pisess.broken.<id>, when only the
// first move could be made).
func replacePisessDir(ops durable.Ops, tree, correlationID, path string) (string, error) {
	aside := filepath.Join(tree, PisessDir+".broken."+correlationID)
	if err := ops.RenameNoReplace(path, aside); err != nil {
		return "", fmt.Errorf("move %s aside: %w", path, err)
	}
	uid, gid, err := ops.Owner(tree)
	if err == nil {
		err = ops.MkdirPrivate(path)
	}
	if err == nil {
		err = ops.ChownIfRoot(path, uid, gid)
	}
	if err != nil {
		return aside, nil // a run makes .pisess/ when it finds none
	}
	if dst, err := moveToQuarantine(ops, tree, correlationID, aside, PisessDir); err == nil {
		return dst, nil
	}
	return aside, nil
}

// moveToQuarantine renames path (the entry itself) to the quarantine of
// run correlationID, as <name>.wrong-type.
func moveToQuarantine(ops durable.Ops, tree, correlationID, path, name string) (string, error) {
	uid, gid, err := ops.Owner(tree)
	if err != nil {
		return "", err
	}
	q := &Quarantiner{ops: ops, tree: tree, correlationID: correlationID, uid: uid, gid: gid}
	dst, err := q.target(filepath.Join(tree, name), "wrong-type")
	if err != nil {
		return "", err
	}
	if err := q.mkdirs(filepath.Dir(dst)); err != nil {
		return "", err
	}
	if err := ops.RenameNoReplace(path, dst); err != nil {
		return "", fmt.Errorf("move %s aside: %w", path, err)
	}
	return dst, nil
}
