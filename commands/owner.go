package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"pisess/commands/engine"
	"pisess/readers/discover"
)

// Root over a user's tree: everything in a tree — journal, notes, names —
// is written by its owner, so a root run that acted on it with root's
// rights would let the owner reach anything on the system through a
// forged record or a planted link. Confinement checks (ledger, durable)
// refuse what they can see; the kernel is the second line: when root runs
// a command over trees that another user owns, the command runs again in a
// child process with that user's uid, gid and supplementary groups, so it
// can touch nothing the owner could not, and what it creates is the
// owner's without any chown.
//
// Root never does such a tree's work itself, whatever the owner does
// meanwhile: it opens each tree root once, one component at a time
// without following links it does not control (owner_walk.go), takes the
// owner from what it opened, and hands that open directory to the child,
// which checks that the path it works on is that very directory. Whatever
// keeps this from happening — the path missing or changing between
// looks, a link, a root tree in a directory another user may change, a
// child that cannot start — is an error for that tree (exit 8, the tree
// named), never a run in root's process. Only trees that are root's, on a
// path only root can change, are handled in root's process.
const (
	// envOwnerChild marks the child (its value is the uid it runs as):
	// it never forks again.
	envOwnerChild = "PISESS_AS_TREE_OWNER"
	// envLogFD is the descriptor of the --log-file the parent opened
	// (the owner may not be allowed to open a log file root can).
	envLogFD = "PISESS_LOG_FD"
	// envTreeFDs lists the descriptors of the tree roots the parent
	// opened for the child, comma-separated.
	envTreeFDs = "PISESS_TREE_FDS"
)

// treeCommands are the commands that act on session trees, and how each
// names them.
var treeCommands = map[string]func(*cli.Context) []string{
	"migrate": argPaths,
	"upgrade": argPaths,
	"fsck":    argPaths,
	"status":  argPaths,
	"verify":  argPaths,
	"prune":   argPaths,
	"runs":    argPaths,
	"rollback": func(c *cli.Context) []string {
		if c.Uint64("to-checkpoint") > 0 {
			return c.Args().Slice()
		}
		return c.StringSlice("tree")
	},
}

func argPaths(c *cli.Context) []string { return c.Args().Slice() }

// pathRequired are the commands that never take the default tree: given
// no PATH, they refuse to run (usage).
var pathRequired = map[string]bool{"verify": true, "upgrade": true}

// allUsersCommands take --all-users: those that act on whole trees.
// rollback does not (a correlation id belongs to one run).
var allUsersCommands = map[string]bool{
	"migrate": true, "upgrade": true, "fsck": true, "status": true, "verify": true, "prune": true, "runs": true,
}

const allUsersUsage = "as root: every account's default tree (<home>/.pi/agent/sessions of each account getent passwd lists; " +
	"trees that do not exist are skipped). As for PATHs of several owners, each tree is run by a child as its owner, one tree after another, " +
	"and the run prints one report and exits with the most urgent status of its trees"

// addAllUsersFlags gives the commands of allUsersCommands --all-users.
func addAllUsersFlags(app *cli.App) {
	for _, c := range app.Commands {
		if allUsersCommands[c.Name] {
			c.Flags = append(c.Flags, &cli.BoolFlag{Name: "all-users", Usage: allUsersUsage})
		}
	}
}

// userAccounts lists the user database for --all-users (a variable so
// that a test can keep a run to the accounts it made).
var userAccounts = discover.Accounts

// treeError is a tree that could not be handed to its owner: the run does
// nothing in it (exit 8).
type treeError struct {
	tree string
	err  error
	hint string
}

func (e *treeError) Error() string {
	return "tree " + e.tree + ": " + e.err.Error() + e.hint
}

func (e *treeError) Unwrap() error { return e.err }

// asTreeOwner decides where a tree command runs when pisess runs as
// root: ran is false when it runs here (not root, or the trees are root's
// on a path only root can change); else it ran in children (or failed:
// err).
func (r *run) asTreeOwner(c *cli.Context) (ran bool, err error) {
	if os.Getenv(envOwnerChild) != "" {
		return r.checkHandedTrees(c)
	}
	allUsers := c.Bool("all-users")
	if os.Geteuid() != 0 {
		if allUsers {
			return true, engine.Usagef("--all-users is for root, which runs over every account's tree as its owner; as uid %d, run pisess %s without it (with no PATH: your default tree)", os.Geteuid(), c.Command.Name)
		}
		return false, nil
	}
	if !allUsers && pathRequired[c.Command.Name] && len(treeCommands[c.Command.Name](c)) == 0 {
		return false, nil // no tree: the command's own usage error follows
	}
	paths, named, err := treePaths(c, allUsers)
	if err != nil {
		return true, err
	}
	units := openTrees(paths, allUsers)
	if !named {
		for _, u := range units {
			if u.err != nil && isMissing(u.err) {
				u.err.hint = " (as root, --all-users runs over every account's tree)"
			}
		}
	}
	owners := map[uint32]bool{}
	for _, u := range units {
		if u.h != nil {
			owners[u.h.uid] = true
		}
	}
	if allUsers || len(owners) > 1 {
		if c.Command.Name == "rollback" {
			closeUnits(units)
			return true, engine.Usagef("the trees given belong to different users: as root, roll back once per owner, so that each run acts with that owner's rights only")
		}
		return true, r.runTrees(c, units, allUsers)
	}
	defer closeUnits(units)
	for _, u := range units {
		if u.err != nil {
			return true, u.err
		}
	}
	first := units[0].h
	if first.uid == 0 {
		return false, nil // root's own trees, on paths only root can change
	}
	var files []*os.File
	for _, u := range units {
		files = append(files, u.h.f)
	}
	code, err := r.runAsOwner(c.Context, ownerRun{uid: first.uid, gid: first.gid, trees: files, args: r.args, stdout: r.stdout})
	if err == nil {
		r.childExit = code
	}
	return true, err
}

// treePaths are the paths a root run works on: those given, else every
// account's default tree (--all-users), else the default tree. named is
// false for the default tree.
func treePaths(c *cli.Context, allUsers bool) (paths []string, named bool, err error) {
	given := treeCommands[c.Command.Name](c)
	if !allUsers {
		if len(given) > 0 {
			return given, true, nil
		}
		paths, err := discover.DefaultRoots()
		return paths, false, err
	}
	if len(given) > 0 {
		return nil, false, engine.Usagef("--all-users takes no PATH: it runs over every account's default tree")
	}
	accounts, err := userAccounts(c.Context)
	if err != nil {
		return nil, false, err
	}
	seen := map[string]bool{}
	for _, a := range accounts {
		p := discover.UserDefaultRoot(a.Home)
		if !seen[p] {
			seen[p] = true
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	return paths, true, nil
}

// treeHandle is a tree root opened for its owner.
type treeHandle struct {
	f        *os.File
	id       fileID
	uid, gid uint32
}

// treeUnit is one tree of a run: the paths given in it, and either its
// open root or why it could not be opened.
type treeUnit struct {
	root  string
	paths []string
	h     *treeHandle
	err   *treeError
}

// openTrees opens the tree of every path, in the order given, each tree
// once. With skipMissing (--all-users), a tree that does not exist is
// left out.
func openTrees(paths []string, skipMissing bool) []*treeUnit {
	var units []*treeUnit
	byID := map[fileID]*treeUnit{}
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			units = append(units, &treeUnit{root: p, paths: []string{p}, err: &treeError{tree: p, err: err}})
			continue
		}
		root, h, terr := openTree(abs)
		if terr != nil {
			if !(skipMissing && isMissing(terr)) {
				units = append(units, &treeUnit{root: root, paths: []string{abs}, err: terr})
			}
			continue
		}
		if u := byID[h.id]; u != nil {
			h.f.Close()
			u.paths = append(u.paths, abs)
			continue
		}
		u := &treeUnit{root: root, paths: []string{abs}, h: h}
		byID[h.id] = u
		units = append(units, u)
	}
	return units
}

// openTree opens the tree abs lies in (abs itself, or the tree of a
// session file, as discover.TreeRoot finds it), walking to abs beneath it,
// and checks that the tree found is the same after the walk.
func openTree(abs string) (string, *treeHandle, *treeError) {
	if _, err := os.Lstat(abs); err != nil {
		// Named by itself, not by the directory TreeRoot would take it
		// for.
		return abs, nil, &treeError{tree: abs, err: err}
	}
	root := discover.TreeRoot(abs)
	fail := func(err error) (string, *treeHandle, *treeError) { return root, nil, &treeError{tree: root, err: err} }
	rel, err := filepath.Rel(root, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return fail(fmt.Errorf("%s does not lie in it", abs))
	}
	w, err := walkPath(root)
	if err != nil {
		return fail(err)
	}
	if w.f == nil {
		return fail(&fs.PathError{Op: "open", Path: root, Err: syscall.ENOTDIR})
	}
	ok := false
	defer func() {
		if !ok {
			w.f.Close()
		}
	}()
	rootOnly := w.rootOnly
	if rel != "." {
		below, err := walkFrom(w.f, root, rel)
		if err != nil {
			return fail(err)
		}
		if below.f != nil {
			below.f.Close()
		}
		rootOnly = rootOnly && below.rootOnly
	}
	if again := discover.TreeRoot(abs); again != root {
		return fail(fmt.Errorf("%w (its tree was %s, then %s)", errChanged, root, again))
	}
	if w.st.Uid == 0 && !rootOnly {
		return fail(errors.New("it is root's, but lies where another user can replace it: root does not work on it in its own process (move it where only root can change it, or run pisess as that user)"))
	}
	ok = true
	return root, &treeHandle{f: w.f, id: idOf(&w.st), uid: w.st.Uid, gid: w.st.Gid}, nil
}

// isMissing reports whether err says the tree does not exist.
func isMissing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

func closeUnits(units []*treeUnit) {
	for _, u := range units {
		if u.h != nil {
			u.h.f.Close()
		}
	}
}

// checkHandedTrees is the child's side: it renames itself for ps, and
// checks that every tree it is to work on is a directory the parent
// opened for it, of the uid it runs as. ran is true when it may not run.
func (r *run) checkHandedTrees(c *cli.Context) (ran bool, err error) {
	nameProcess(filepath.Base(os.Args[0]))
	handed := map[fileID]bool{}
	for _, s := range strings.Split(os.Getenv(envTreeFDs), ",") {
		if s == "" {
			continue
		}
		fd, err := strconv.Atoi(s)
		var st unix.Stat_t
		if err == nil && fd > 2 {
			err = unix.Fstat(fd, &st)
		} else if err == nil {
			err = syscall.EBADF
		}
		if err != nil {
			return true, fmt.Errorf("%s=%s: %w", envTreeFDs, os.Getenv(envTreeFDs), err)
		}
		unix.CloseOnExec(fd)
		if !isDirStat(&st) || st.Uid != uint32(os.Getuid()) {
			return true, fmt.Errorf("%s: descriptor %d is not a directory of uid %d", envTreeFDs, fd, os.Getuid())
		}
		handed[idOf(&st)] = true
	}
	if len(handed) == 0 {
		return true, fmt.Errorf("%s is set but no tree was opened for this run (the variable is pisess's own: unset it)", envOwnerChild)
	}
	paths, err := discover.RootsOrDefault(treeCommands[c.Command.Name](c))
	if err != nil {
		return true, err
	}
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return true, err
		}
		root := discover.TreeRoot(abs)
		w, err := walkPath(root)
		if err != nil {
			return true, &treeError{tree: root, err: err}
		}
		if w.f != nil {
			w.f.Close()
		}
		if !handed[idOf(&w.st)] {
			return true, &treeError{tree: root, err: fmt.Errorf("%w: it is not the directory root opened for this run", errChanged)}
		}
	}
	return false, nil
}

// ownerRun is one child run as a tree's owner.
type ownerRun struct {
	uid, gid uint32
	trees    []*os.File // the tree roots opened for it
	args     []string   // its command line, the program name first
	stdout   io.Writer
}

// ExitBrokenPipe is what Main returns when the child it ran as a tree's
// owner died of SIGPIPE (its reader went away): Exit then ends pisess the
// same way, as a command run by the owner directly would end.
const ExitBrokenPipe = 128 + int(syscall.SIGPIPE)

// Exit ends the process with code, as Main returned it: by SIGPIPE for
// ExitBrokenPipe, so that a shell sees the quiet 141 of any command whose
// reader left.
func Exit(code int) {
	if code == ExitBrokenPipe {
		dieOfSignal(syscall.SIGPIPE)
	}
	os.Exit(code)
}

// runAsOwner runs a pisess command line in a child as uid (as root, no
// switch, when uid is 0), with the user's primary group and
// supplementary groups when the account is known, else with the tree's
// group only, handing it the open tree roots. It returns the child's exit
// status, ExitBrokenPipe when it died of SIGPIPE; an error when it could
// not run or died of another signal. An interrupt of this run is passed
// on as SIGTERM.
func (r *run) runAsOwner(ctx context.Context, o ownerRun) (int, error) {
	fail := func(err error) (int, error) { return 0, fmt.Errorf("run as the tree's owner (uid %d): %w", o.uid, err) }
	exe, err := selfExe()
	if err != nil {
		return fail(err)
	}
	var cred *syscall.Credential
	if o.uid != 0 {
		cred = &syscall.Credential{Uid: o.uid, Gid: o.gid, Groups: []uint32{}}
		if u, err := user.LookupId(strconv.FormatUint(uint64(o.uid), 10)); err == nil {
			if g, err := strconv.ParseUint(u.Gid, 10, 32); err == nil {
				cred.Gid = uint32(g)
			}
			if ids, err := u.GroupIds(); err == nil {
				for _, id := range ids {
					if g, err := strconv.ParseUint(id, 10, 32); err == nil {
						cred.Groups = append(cred.Groups, uint32(g))
					}
				}
			}
		}
	}
	cmd := exec.CommandContext(ctx, exe, o.args[1:]...)
	cmd.Args[0] = o.args[0]
	cmd.Stdout, cmd.Stderr = o.stdout, r.stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", envOwnerChild, o.uid))
	if f, ok := r.logCloser.(*os.File); ok {
		cmd.ExtraFiles = []*os.File{f}
		cmd.Env = append(cmd.Env, envLogFD+"=3")
	}
	var fds []string
	for _, f := range o.trees {
		cmd.ExtraFiles = append(cmd.ExtraFiles, f)
		fds = append(fds, strconv.Itoa(2+len(cmd.ExtraFiles)))
	}
	cmd.Env = append(cmd.Env, envTreeFDs+"="+strings.Join(fds, ","))
	// The child's metrics come back through a pipe added after the
	// descriptors above, whose numbers it was told.
	collect := r.childMetrics(cmd, int(o.uid))
	cmd.SysProcAttr = ownerAttr(cred)
	ev := r.log.Debug().Uint32("uid", o.uid)
	if cred != nil {
		ev = ev.Uint32("gid", cred.Gid)
	}
	ev.Msg("running as the owner of the tree")
	// The parent death signal is sent when the thread that started the
	// child ends: keep it until the child has.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	err = cmd.Run()
	collect()
	if cmd.ProcessState == nil {
		return fail(err)
	}
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case !ok:
		return cmd.ProcessState.ExitCode(), nil
	case ws.Signaled() && ws.Signal() == syscall.SIGPIPE:
		return ExitBrokenPipe, nil
	case ws.Signaled():
		return fail(fmt.Errorf("killed by signal %d (%v)", int(ws.Signal()), ws.Signal()))
	}
	return ws.ExitStatus(), nil
}

// userName is the account name of uid, "" when it has none.
func userName(uid uint32) string {
	if u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil {
		return u.Username
	}
	return ""
}
