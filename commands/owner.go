package commands

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/urfave/cli/v2"

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
const (
	// envOwnerChild marks the child (its value is the uid it runs as):
	// it never forks again.
	envOwnerChild = "PISESS_AS_TREE_OWNER"
	// envLogFD is the descriptor of the --log-file the parent opened
	// (the owner may not be allowed to open a log file root can).
	envLogFD = "PISESS_LOG_FD"
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

// asTreeOwner runs the command in a child as the owner of its trees when
// pisess runs as root and they belong to someone else. ran is false when
// the command should run here: not root, already the child, the trees are
// root's, or a path does not exist (the command then reports it).
func (r *run) asTreeOwner(c *cli.Context) (ran bool, err error) {
	if os.Geteuid() != 0 || os.Getenv(envOwnerChild) != "" {
		return false, nil
	}
	paths := treeCommands[c.Command.Name](c)
	if len(paths) == 0 {
		if paths, err = discover.DefaultRoots(); err != nil {
			return false, nil
		}
	}
	owner := -1
	var ownerGid int
	for _, p := range paths {
		uid, gid, ok := treeOwner(p)
		if !ok {
			return false, nil
		}
		switch {
		case owner == -1:
			owner, ownerGid = uid, gid
		case owner != uid:
			return true, engine.Usagef("the paths given belong to different users (uid %d and %d): as root, run pisess once per owner, so that each run acts with that owner's rights only", owner, uid)
		}
	}
	if owner <= 0 {
		return false, nil
	}
	return true, r.runAsOwner(owner, ownerGid)
}

// treeOwner returns the owner of the tree a path lies in: the directory
// itself, or the tree of a session file.
func treeOwner(p string) (uid, gid int, ok bool) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return 0, 0, false
	}
	fi, err := os.Lstat(abs)
	if err != nil {
		return 0, 0, false
	}
	root := abs
	if fi.Mode().IsRegular() {
		root = discover.TreeOfFile(abs)
		if fi, err = os.Lstat(root); err != nil {
			return 0, 0, false
		}
	} else if fi.Mode()&fs.ModeSymlink != 0 {
		// The command refuses a symlinked tree itself; its owner says
		// nothing about what it points to.
		return 0, 0, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int(st.Uid), int(st.Gid), true
}

// runAsOwner runs this very command line again as uid, with the user's
// primary group and supplementary groups when the account is known, else
// with the tree's group only. Its output is the command's output; its exit
// status is the command's.
func (r *run) runAsOwner(uid, treeGid int) error {
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(treeGid), Groups: []uint32{}}
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		if g, err := strconv.Atoi(u.Gid); err == nil {
			cred.Gid = uint32(g)
		}
		if ids, err := u.GroupIds(); err == nil {
			for _, id := range ids {
				if g, err := strconv.Atoi(id); err == nil {
					cred.Groups = append(cred.Groups, uint32(g))
				}
			}
		}
	}
	exe, err := selfExe()
	if err != nil {
		return fmt.Errorf("run as the tree's owner (uid %d): %w", uid, err)
	}
	cmd := exec.Command(exe, r.args[1:]...)
	cmd.Args[0] = r.args[0]
	cmd.Stdout, cmd.Stderr = r.stdout, r.stderr
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", envOwnerChild, uid))
	if f, ok := r.logCloser.(*os.File); ok {
		cmd.ExtraFiles = []*os.File{f}
		cmd.Env = append(cmd.Env, envLogFD+"=3")
	}
	cmd.SysProcAttr = ownerProcAttr(cred)
	r.log.Debug().Int("uid", uid).Uint32("gid", cred.Gid).Msg("running as the owner of the tree")
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit) && exit.ExitCode() >= 0:
		r.childExit = exit.ExitCode()
		return nil
	case err != nil:
		return fmt.Errorf("run as the tree's owner (uid %d): %w", uid, err)
	}
	r.childExit = 0
	return nil
}
