package discover

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"pisess/readers"
	"pisess/writers/durable"
	"pisess/writers/wire"
)

// Classes of the refusals only discovery can decide (a symlinked session
// file is readers.ClassSymlink); the readers report every other class when
// the session is opened.
const (
	// ClassSymlinkAncestor: a directory above the session is a symlink.
	ClassSymlinkAncestor readers.Class = "symlink_ancestor"
	// ClassSidecarConflict: foo.sqlite and foo.jsonl both claim foo.v2.
	ClassSidecarConflict readers.Class = "sidecar_conflict"
)

// Refusal reasons, worded once so that reports and tests agree.
const (
	ReasonSymlink         = "session file is a symlink; pi locks and migrates its target, pisess follows no symlink"
	ReasonSymlinkAncestor = "pi opens sidecars with no symlink in any path component"
)

// Extensions of session files (FORMAT.md §1, §10).
const (
	ExtJSONL  = ".jsonl"
	ExtSQLite = ".sqlite"
)

// Sibling name parts (FORMAT.md §1).
const (
	SidecarSuffix = ".v2"
	stagingInfix  = ".v2.staging."
	backupInfix   = ".v2.backup."
	// PisessDir is the tree's own directory: journal, lock, quarantine.
	PisessDir = ".pisess"
)

// Tree is one session tree: the directory whose .pisess/ holds the journal,
// the tree lock and the quarantine of the sessions below it.
type Tree struct {
	// Root is the tree directory, absolute and clean.
	Root string
	// SymlinkAncestor is the first symlinked component of Root's path
	// (Root itself included), "" when there is none. Every session of such
	// a tree is refused: pi could never open its sidecar.
	SymlinkAncestor string
	// Sessions are sorted by Path.
	Sessions []Session
	// Leftovers are staging, backup and sidecar directories whose session
	// file no longer exists, sorted by Path.
	Leftovers []Leftover
	// Skipped are the entries discovery did not take as sessions and did
	// not ignore silently, with the reason, sorted by Path.
	Skipped []Skipped
}

// Session is one session file and what lies beside it.
type Session struct {
	Path string // absolute path of the session file
	Tree string // the tree's Root
	Rel  string // Path relative to Tree
	// Format is the source format by extension and header: jsonl_v3 for
	// every JSONL session (Version tells which header version it has),
	// sqlite_v1 for SQLite.
	Format  readers.SourceFormat
	Version int // the header's version; 0 when unknown or absent
	// HeaderID is the header's session id when the walk read the header
	// (a file the caller's Headers did not know as it is now) and it read
	// without error; "" otherwise.
	HeaderID string
	Size     int64 // the file's size (of the link itself for a symlink)
	// Key is the file's lstat metadata when it was listed (zero when the
	// system gave none).
	Key FileKey
	// Sidecar is the path of <stem>.v2 when something by that name exists
	// (a directory, or anything else, which verify then reports).
	Sidecar          string
	SidecarIsSymlink bool
	// Staging and Backups are the <stem>.v2.staging.* and <stem>.v2.backup.*
	// siblings, sorted.
	Staging []string
	Backups []string
	// Lock is the session lock file <path>.lock (it may not exist yet).
	Lock string
	// Refusal is set when pisess must not migrate the session; nil when
	// discovery found no reason (the reader may still refuse it).
	Refusal *readers.RefusedError
	// ReadError is set when discovery could not read the file's header (an
	// I/O error or a resource limit: readers.RefusedError.Transient): a
	// failure of this run, never a refusal, and Version is then unknown
	// (0). The reader meets the error again when it opens the session, or
	// reads it if the cause has passed.
	ReadError *readers.RefusedError
}

// SidecarPath returns <dir>/<stem>.v2 for a session file path: the file
// name without its last extension, plus ".v2" (FORMAT.md §1).
func SidecarPath(sessionPath string) string {
	dir, name := filepath.Split(sessionPath)
	return filepath.Join(dir, stem(name)+SidecarSuffix)
}

// SessionOfSidecar maps <stem>.v2 to its session file (<stem>.jsonl, else
// <stem>.sqlite); ok is false when path is not a sidecar's name or neither
// file exists.
func SessionOfSidecar(path string) (string, bool) {
	stem, ok := strings.CutSuffix(filepath.Clean(path), SidecarSuffix)
	if !ok {
		return "", false
	}
	for _, ext := range []string{ExtJSONL, ExtSQLite} {
		if _, err := os.Lstat(stem + ext); err == nil {
			return stem + ext, true
		}
	}
	return "", false
}

// LockPath returns the session lock file, <session path>.lock.
func LockPath(sessionPath string) string { return sessionPath + ".lock" }

// LeftoverKind says what a leftover directory is.
type LeftoverKind string

const (
	LeftoverStaging LeftoverKind = "staging"
	LeftoverBackup  LeftoverKind = "backup"
	LeftoverSidecar LeftoverKind = "sidecar"
)

// Leftover is a staging, backup or sidecar directory whose session file no
// longer exists.
type Leftover struct {
	Path      string
	Kind      LeftoverKind
	Stem      string // the stem of the session it belonged to
	IsSymlink bool
}

// SkipKind says why an entry was skipped.
type SkipKind string

const (
	// SkipNotSession: a .jsonl whose first line is not a session header, or
	// a .sqlite that is not a pi session database.
	SkipNotSession SkipKind = "not_a_session"
	// SkipSymlinkDir: a symlinked directory, not entered.
	SkipSymlinkDir SkipKind = "symlinked_directory"
	// SkipSpecial: a session-named entry that is not a regular file.
	SkipSpecial SkipKind = "special_file"
	// SkipNestedTree: a directory below the root holding its own .pisess/;
	// its sessions belong to the tree being walked.
	SkipNestedTree SkipKind = "nested_tree"
	// SkipUnreadable: a directory that could not be listed.
	SkipUnreadable SkipKind = "unreadable"
)

// Skipped is an entry discovery reports but does not take as a session.
type Skipped struct {
	Path   string   `json:"path"`
	Kind   SkipKind `json:"kind"`
	Reason string   `json:"reason"`
}

// DefaultRoots returns the default session tree: $PI_SESSIONS_DIR, else
// $PI_CODING_AGENT_DIR/sessions, else ~/.pi/agent/sessions (FORMAT.md §1).
// An empty variable counts as unset.
func DefaultRoots() ([]string, error) {
	if d := os.Getenv("PI_SESSIONS_DIR"); d != "" {
		return []string{d}, nil
	}
	if d := os.Getenv("PI_CODING_AGENT_DIR"); d != "" {
		return []string{filepath.Join(d, "sessions")}, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return nil, fmt.Errorf("default session tree: %w", err)
	}
	return []string{filepath.Join(home, ".pi", "agent", "sessions")}, nil
}

// Walk lists the sessions under roots, each a session file or a directory
// tree. The tree of a session under a directory root is that root (the
// nearest one, when roots nest); the tree of a file root is the nearest
// directory above it holding .pisess/, else the parent of its directory
// when that directory has pi's cwd shape "--…--", else its directory.
// Trees are returned sorted by Root, each session once.
//
// A root that does not exist or cannot be listed is an error; a directory
// below a root that cannot be listed is reported in Skipped.
func Walk(roots []string) ([]Tree, error) { return WalkWith(roots, Options{}) }

// WalkWith is [Walk] with options.
func WalkWith(roots []string, opt Options) ([]Tree, error) {
	return WalkContext(context.Background(), roots, opt)
}

// RootsOrDefault returns paths, or the default tree ([DefaultRoots]) when
// there are none: the trees of a command line.
func RootsOrDefault(paths []string) ([]string, error) {
	if len(paths) > 0 {
		return paths, nil
	}
	return DefaultRoots()
}

// WalkPaths is [WalkContext] over paths, the default tree
// ([DefaultRoots]) when there are none, each of which must exist: the
// walk of a run over the paths of its command line.
func WalkPaths(ctx context.Context, paths []string, opt Options) ([]Tree, error) {
	paths, err := RootsOrDefault(paths)
	if err != nil {
		return nil, err
	}
	for _, p := range paths {
		if _, err := os.Lstat(p); err != nil {
			return nil, fmt.Errorf("session tree %s: %w", p, err)
		}
	}
	trees, err := WalkContext(ctx, paths, opt)
	if err != nil {
		return nil, fmt.Errorf("discover sessions: %w", err)
	}
	return trees, nil
}

// WalkContext is [WalkWith] that stops when ctx is done: between
// directories and between session files whose headers it reads, so that
// an interrupt stops the walk of a tree of thousands of sessions at once.
// The error then wraps ctx.Err().
func WalkContext(ctx context.Context, roots []string, opt Options) ([]Tree, error) {
	type root struct {
		abs  string
		info fs.FileInfo
	}
	var rs []root
	dirRoots := map[string]bool{}
	for _, r := range roots {
		abs, err := filepath.Abs(r)
		if err != nil {
			return nil, fmt.Errorf("walk %s: %w", r, err)
		}
		fi, err := os.Lstat(abs)
		if err != nil {
			return nil, fmt.Errorf("walk: %w", err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			// Only to tell a directory from a file: the tree is then
			// listed but every session in it is refused.
			if st, err := os.Stat(abs); err == nil && st.IsDir() {
				fi = st
				dirRoots[abs] = true
			}
		} else if fi.IsDir() {
			dirRoots[abs] = true
		}
		rs = append(rs, root{abs, fi})
	}

	w := walker{ctx: ctx, trees: map[string]*Tree{}, dirRoots: dirRoots, seen: map[string]bool{},
		headersOf: opt.Headers, headers: map[string]Headers{}}
	// treeOf maps each directory root to its tree's root: one tree, one
	// journal, whichever directory inside it a run was given (issue 12).
	treeOf := map[string]string{}
	for _, r := range rs {
		if dirRoots[r.abs] {
			treeOf[r.abs] = w.treeRootOf(r.abs, r.info)
		}
	}
	walked := map[string]bool{}
	for _, r := range rs {
		if !dirRoots[r.abs] || walked[r.abs] {
			continue
		}
		walked[r.abs] = true
		t, err := w.tree(treeOf[r.abs])
		if err != nil {
			return nil, err
		}
		ancestor := t.SymlinkAncestor
		if ancestor == "" && r.abs != t.Root {
			// The directories between the tree's root and the walked
			// directory are part of every session's path too.
			if r.info.Mode()&fs.ModeSymlink != 0 || isSymlink(r.abs) {
				ancestor = r.abs
			} else if link, ok, err := durable.OS.HasSymlinkAncestor(r.abs); err != nil {
				return nil, fmt.Errorf("walk %s: %w", r.abs, err)
			} else if ok {
				ancestor = link
			}
		}
		if err := w.walkDir(t, r.abs, true, ancestor); err != nil {
			return nil, err
		}
	}
	for _, r := range rs {
		if dirRoots[r.abs] {
			continue
		}
		treeDir := treeOf[w.enclosingRoot(r.abs)]
		if treeDir == "" {
			treeDir = TreeRoot(r.abs)
		}
		t, err := w.tree(treeDir)
		if err != nil {
			return nil, err
		}
		if err := w.addFile(t, r.abs); err != nil {
			return nil, err
		}
	}

	if err := w.addPending(); err != nil {
		return nil, err
	}
	out := make([]Tree, 0, len(w.trees))
	for _, t := range w.trees {
		sort.Slice(t.Sessions, func(i, j int) bool { return t.Sessions[i].Path < t.Sessions[j].Path })
		sort.Slice(t.Leftovers, func(i, j int) bool { return t.Leftovers[i].Path < t.Leftovers[j].Path })
		sort.Slice(t.Skipped, func(i, j int) bool { return t.Skipped[i].Path < t.Skipped[j].Path })
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Root < out[j].Root })
	return out, nil
}

// TreeOfFile returns the tree of a session file given alone; it is
// [TreeRoot] (kept for its callers).
func TreeOfFile(path string) string { return TreeRoot(path) }

// TreeRoots resolves paths (none: the default tree, [DefaultRoots]) to
// their distinct tree roots ([TreeRoot]), sorted; each path must exist.
func TreeRoots(paths []string) ([]string, error) {
	paths, err := RootsOrDefault(paths)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, fmt.Errorf("tree %s: %w", p, err)
		}
		if _, err := os.Lstat(abs); err != nil {
			return nil, fmt.Errorf("session tree %s: %w", p, err)
		}
		root := TreeRoot(abs)
		if !seen[root] {
			seen[root] = true
			out = append(out, root)
		}
	}
	sort.Strings(out)
	return out, nil
}

// TreeRoot returns the root of the session tree that path (a session file
// or a directory, absolute and clean) belongs to, the directory whose
// .pisess/ holds its journal, lock and quarantine: the nearest directory
// at or above it that holds .pisess/; else the default session tree
// ([DefaultRoots]) when path is that tree or lies under it; else, for a
// directory named like pi's cwd directories ("--…--") or a file in one,
// the directory above that; else the directory itself (the file's
// directory). So a run on any path inside a tree uses that tree's one
// journal and one lock, and two runs on overlapping paths exclude each
// other (issue 12).
func TreeRoot(path string) string {
	fi, err := os.Lstat(path)
	isDir := err == nil && fi.IsDir()
	dir := path
	if !isDir {
		dir = filepath.Dir(path)
	}
	if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		// Never looked into: a symlinked directory given as a root is its
		// own tree, and every session in it is refused.
		if st, err := os.Stat(path); err == nil && st.IsDir() {
			return path
		}
	}
	for d := dir; ; {
		if hasPisessDir(d) {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	if roots, err := DefaultRoots(); err == nil {
		for _, r := range roots {
			if abs, err := filepath.Abs(r); err == nil && (dir == abs || strings.HasPrefix(dir, abs+string(filepath.Separator))) {
				return abs
			}
		}
	}
	if isCwdDir(filepath.Base(dir)) {
		return filepath.Dir(dir)
	}
	return dir
}

// isCwdDir reports whether a directory name has the shape of pi's
// per-cwd directories, "--<cwd with / as ->--".
func isCwdDir(base string) bool {
	return len(base) >= 4 && strings.HasPrefix(base, "--") && strings.HasSuffix(base, "--")
}

// treeRootOf is the tree root of directory root abs: [TreeRoot], unless
// that is no tree of its own (no .pisess/ there) and a directory root above
// abs was given in the same run: then that root's tree, so that one run
// never splits a tree in two.
func (w *walker) treeRootOf(abs string, fi fs.FileInfo) string {
	if fi.Mode()&fs.ModeSymlink != 0 {
		return abs
	}
	t := TreeRoot(abs)
	if hasPisessDir(t) {
		return t
	}
	top := ""
	for d := filepath.Dir(abs); ; {
		if w.dirRoots[d] {
			top = d
		}
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	if top == "" {
		return t
	}
	if up := TreeRoot(top); len(up) < len(t) {
		return up
	}
	return t
}

func hasPisessDir(dir string) bool {
	fi, err := os.Lstat(filepath.Join(dir, PisessDir))
	return err == nil && fi.IsDir()
}

type walker struct {
	ctx       context.Context // the walk stops when it is done
	trees     map[string]*Tree
	dirRoots  map[string]bool
	seen      map[string]bool // session paths already listed
	headersOf func(root string) Headers
	headers   map[string]Headers // by tree root, nil when none
	// pending are the session files listed, taken (their headers read)
	// once every directory is listed: a header cache loaded meanwhile is
	// ready by then.
	pending []pendingCandidate
}

// pendingCandidate is a session file of listing l, in tree t.
type pendingCandidate struct {
	t        *Tree
	l        *listing
	st       string
	c        candidate
	ancestor string
}

// sniffers is how many session files have their headers read at once,
// listers how many directories are listed at once (issue 14: a steady
// refresh of 2,000 sessions in 40 project directories spent ~50 ms
// listing them one by one, most of it system calls and page faults).
const (
	sniffers = 2
	listers  = 2
)

// stopped returns the walk's error once its context is done.
func (w *walker) stopped() error {
	if err := w.ctx.Err(); err != nil {
		return fmt.Errorf("walk: %w", err)
	}
	return nil
}

// addPending adds the pending candidates, their headers read on sniffers
// goroutines, in the order they were listed.
func (w *walker) addPending() error {
	todo := make([]int, 0, len(w.pending))
	queued := make(map[string]bool, len(w.pending))
	perTree := map[*Tree]int{}
	for _, p := range w.pending {
		perTree[p.t]++
	}
	for t, n := range perTree {
		t.Sessions = slices.Grow(t.Sessions, n) // a Session is large: grown, they would be copied over and over
	}
	for i, p := range w.pending {
		if !p.c.symlink && !queued[p.c.path] && !w.seen[p.c.path] {
			queued[p.c.path] = true
			todo = append(todo, i)
		}
	}
	headers := make([]sniffed, len(w.pending))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(sniffers, len(todo)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := int(next.Add(1) - 1); k < len(todo) && w.ctx.Err() == nil; k = int(next.Add(1) - 1) {
				p := w.pending[todo[k]]
				headers[todo[k]] = w.sniff(p.t, p.c, p.st)
			}
		}()
	}
	wg.Wait()
	if err := w.stopped(); err != nil {
		return err
	}
	for i, p := range w.pending {
		h := headers[i]
		if !p.c.symlink && !queued[p.c.path] {
			// A second listing of a file already taken: as the first.
			continue
		}
		delete(queued, p.c.path)
		w.addCandidate(p.t, p.l, p.st, p.c, p.ancestor, h)
	}
	w.pending = nil
	return nil
}

// headersFor returns tree t's header cache, asking for it once (when the
// tree is first met, so that it loads while the tree is listed).
func (w *walker) headersFor(t *Tree) Headers {
	if w.headersOf == nil || t.SymlinkAncestor != "" {
		return nil
	}
	h, asked := w.headers[t.Root]
	if !asked {
		h = w.headersOf(t.Root)
		w.headers[t.Root] = h
	}
	return h
}

// sniff is the package's sniff, unless the tree's header cache knows the
// file as it is now. Safe on several goroutines once every tree's cache
// was asked for (headersFor, from tree).
func (w *walker) sniff(t *Tree, c candidate, st string) sniffed {
	if h := w.headers[t.Root]; h != nil && t.SymlinkAncestor == "" && c.key != (FileKey{}) {
		if rel, err := filepath.Rel(t.Root, c.path); err == nil {
			if v, ok := h.Header(rel, c.key); ok {
				return sniffed{ok: true, version: v}
			}
		}
	}
	return sniff(c.path, formatOf(c.path))
}

// tree returns the Tree for dir, creating it (and checking its ancestors
// for symlinks) on first use.
func (w *walker) tree(dir string) (*Tree, error) {
	if t := w.trees[dir]; t != nil {
		return t, nil
	}
	t := &Tree{Root: dir}
	if fi, err := os.Lstat(dir); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		t.SymlinkAncestor = dir
	} else if link, ok, err := durable.OS.HasSymlinkAncestor(dir); err != nil {
		return nil, fmt.Errorf("walk %s: %w", dir, err)
	} else if ok {
		t.SymlinkAncestor = link
	}
	w.trees[dir] = t
	w.headersFor(t)
	return t, nil
}

// enclosingRoot returns the nearest directory root that contains path, or
// "".
func (w *walker) enclosingRoot(path string) string {
	for d := filepath.Dir(path); ; {
		if w.dirRoots[d] {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			return ""
		}
		d = parent
	}
}

// walkDir lists dir (a directory of tree t) and everything below it that
// is not another root's; ancestor is the symlinked directory above dir
// ("" when there is none).
func (w *walker) walkDir(t *Tree, dir string, isRoot bool, ancestor string) error {
	l, err := listDir(dir)
	return w.walkListed(t, dir, isRoot, ancestor, l, err)
}

// walkListed is walkDir with dir's listing (or its error) at hand. The
// subdirectories (a tree's project directories) are listed listers at a
// time, then walked in order: the walk's result is the sequential one's.
func (w *walker) walkListed(t *Tree, dir string, isRoot bool, ancestor string, l *listing, err error) error {
	if err := w.stopped(); err != nil {
		return err
	}
	if err != nil {
		if isRoot {
			return fmt.Errorf("walk: %w", err)
		}
		t.Skipped = append(t.Skipped, Skipped{Path: dir, Kind: SkipUnreadable, Reason: err.Error()})
		return nil
	}
	if l.hasPisess && !isRoot {
		t.Skipped = append(t.Skipped, Skipped{Path: dir, Kind: SkipNestedTree,
			Reason: "holds its own .pisess/; its sessions are listed under " + t.Root})
	}
	t.Skipped = append(t.Skipped, l.skipped...)
	for _, st := range l.stems() {
		for _, cand := range l.candidates[st] {
			w.pending = append(w.pending, pendingCandidate{t, l, st, cand, ancestor})
		}
	}
	t.Leftovers = append(t.Leftovers, l.leftovers()...)
	var subs []string
	for _, sub := range l.subdirs {
		if !w.dirRoots[sub] { // else walked as a tree of its own
			subs = append(subs, sub)
		}
	}
	lists := make([]*listing, len(subs))
	errs := make([]error, len(subs))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(listers, len(subs)) {
		wg.Go(func() {
			for k := int(next.Add(1) - 1); k < len(subs) && w.ctx.Err() == nil; k = int(next.Add(1) - 1) {
				lists[k], errs[k] = listDir(subs[k])
			}
		})
	}
	wg.Wait()
	for k, sub := range subs {
		if err := w.walkListed(t, sub, false, ancestor, lists[k], errs[k]); err != nil {
			return err
		}
	}
	return nil
}

// addFile adds the session file path, given as a root, to tree t.
func (w *walker) addFile(t *Tree, path string) error {
	l, err := listDir(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("walk: %w", err)
	}
	name := filepath.Base(path)
	ext := filepath.Ext(name)
	if ext != ExtJSONL && ext != ExtSQLite {
		return fmt.Errorf("walk %s: not a session file (want %s or %s)", path, ExtJSONL, ExtSQLite)
	}
	for _, s := range l.skipped {
		if s.Path == path {
			t.Skipped = append(t.Skipped, s)
			return nil
		}
	}
	// The directories between the tree and the file were not walked:
	// check them too.
	link, ok, err := durable.OS.HasSymlinkAncestor(path)
	if err != nil {
		return fmt.Errorf("walk %s: %w", path, err)
	}
	if !ok {
		link = t.SymlinkAncestor
	}
	st := stem(name)
	for _, cand := range l.candidates[st] {
		if cand.path == path {
			w.pending = append(w.pending, pendingCandidate{t, l, st, cand, link})
		}
	}
	return nil
}

// addCandidate adds one session file of listing l to tree t; ancestor is
// the symlinked directory above it, "" when there is none.
func (w *walker) addCandidate(t *Tree, l *listing, st string, c candidate, ancestor string, h sniffed) {
	if w.seen[c.path] {
		return
	}
	s := Session{
		Path:    c.path,
		Tree:    t.Root,
		Format:  formatOf(c.path),
		Size:    c.size,
		Key:     c.key,
		Lock:    LockPath(c.path),
		Staging: l.staging[st],
		Backups: l.backups[st],
	}
	if rel, err := filepath.Rel(t.Root, c.path); err == nil {
		s.Rel = rel
	}
	if sc, ok := l.sidecars[st]; ok {
		s.Sidecar, s.SidecarIsSymlink = sc.path, sc.symlink
	}
	if c.symlink {
		// Never sniffed: that would read through the link.
		s.Refusal = &readers.RefusedError{Path: c.path, Class: readers.ClassSymlink, Reason: ReasonSymlink}
	} else {
		if !h.ok {
			t.Skipped = append(t.Skipped, Skipped{Path: c.path, Kind: SkipNotSession, Reason: h.reason})
			return
		}
		s.Version, s.HeaderID, s.ReadError = h.version, h.id, h.readErr
		switch {
		case ancestor != "":
			s.Refusal = &readers.RefusedError{Path: c.path, Class: ClassSymlinkAncestor,
				Reason: ReasonSymlinkAncestor + " (" + ancestor + " is a symlink)"}
		case s.Format == readers.FormatSQLitev1:
			if twin, ok := jsonlTwin(l, st); ok {
				s.Refusal = &readers.RefusedError{Path: c.path, Class: ClassSidecarConflict,
					Reason: fmt.Sprintf("both %s and %s would claim %s", filepath.Base(c.path),
						filepath.Base(twin), st+SidecarSuffix)}
			}
		}
		if s.Refusal == nil {
			s.Refusal = badSessionID(s)
		}
	}
	w.seen[c.path] = true
	t.Sessions = append(t.Sessions, s)
}

// badSessionID refuses a version-3 session whose header id is not a UUID:
// the reference refuses to write its manifest (FORMAT.md §5), whatever
// reads it, so every command says so from the header alone (migrate found
// it only after a first pass over the session, fsck never: issue 34). A
// legacy header keeps its own refusal (upgrade it first).
func badSessionID(s Session) *readers.RefusedError {
	if s.HeaderID == "" || s.Version != 3 || wire.ValidUUID(s.HeaderID) {
		return nil
	}
	line := int64(1) // the header
	if s.Format == readers.FormatSQLitev1 {
		line = 0
	}
	return &readers.RefusedError{Path: s.Path, Line: line, Class: readers.ClassBadSessionID,
		Reason: fmt.Sprintf("session id %q is not a UUID: the reference's manifest requires one (pi allows custom ids); the session stays on its JSONL", s.HeaderID)}
}

// jsonlTwin returns the .jsonl session of the same stem, if there is one:
// a symlinked one counts (pi would follow it; pisess refuses it, and both
// are better left for a person to sort out), a .jsonl that is not a session
// does not.
func jsonlTwin(l *listing, st string) (string, bool) {
	for _, c := range l.candidates[st] {
		if formatOf(c.path) != readers.FormatJSONLv3 {
			continue
		}
		if c.symlink {
			return c.path, true
		}
		if sniff(c.path, readers.FormatJSONLv3).ok {
			return c.path, true
		}
	}
	return "", false
}

func formatOf(path string) readers.SourceFormat {
	if filepath.Ext(path) == ExtSQLite {
		return readers.FormatSQLitev1
	}
	return readers.FormatJSONLv3
}

// stem is a file name without its last extension.
func stem(name string) string {
	if ext := filepath.Ext(name); ext != "" && ext != name {
		return name[:len(name)-len(ext)]
	}
	return name
}

type candidate struct {
	path    string
	size    int64
	key     FileKey
	symlink bool
}

type sibling struct {
	path    string
	symlink bool
}

// listing is one directory's entries, grouped by the stem they concern.
type listing struct {
	candidates map[string][]candidate // session files (.jsonl before .sqlite)
	sidecars   map[string]sibling
	staging    map[string][]string
	backups    map[string][]string
	subdirs    []string
	skipped    []Skipped
	hasPisess  bool
}

func (l *listing) stems() []string {
	out := make([]string, 0, len(l.candidates))
	for s := range l.candidates {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// leftovers are the sibling directories of stems without a session file.
func (l *listing) leftovers() []Leftover {
	var out []Leftover
	for st, paths := range l.staging {
		if len(l.candidates[st]) == 0 {
			for _, p := range paths {
				out = append(out, Leftover{Path: p, Kind: LeftoverStaging, Stem: st, IsSymlink: isSymlink(p)})
			}
		}
	}
	for st, paths := range l.backups {
		if len(l.candidates[st]) == 0 {
			for _, p := range paths {
				out = append(out, Leftover{Path: p, Kind: LeftoverBackup, Stem: st, IsSymlink: isSymlink(p)})
			}
		}
	}
	for st, sc := range l.sidecars {
		if len(l.candidates[st]) == 0 {
			out = append(out, Leftover{Path: sc.path, Kind: LeftoverSidecar, Stem: st, IsSymlink: sc.symlink})
		}
	}
	return out
}

func isSymlink(path string) bool {
	fi, err := os.Lstat(path)
	return err == nil && fi.Mode()&fs.ModeSymlink != 0
}

// ignoredSuffixes are files that belong to a session but are not one:
// lock files and SQLite's side files.
var ignoredSuffixes = []string{".lock", "-wal", "-shm", "-journal"}

// listDir reads dir (without following symlinks in its entries) and sorts
// its entries into a listing.
func listDir(dir string) (*listing, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	l := &listing{
		candidates: map[string][]candidate{},
		sidecars:   map[string]sibling{},
		staging:    map[string][]string{},
		backups:    map[string][]string{},
	}
	for _, e := range entries {
		name := e.Name()
		path := filepath.Join(dir, name)
		// The entry's type comes with the listing; only a session file
		// (its size and key) and a special file (its kind) need an lstat.
		typ := e.Type()
		link := typ&fs.ModeSymlink != 0
		switch {
		case name == PisessDir:
			if typ.IsDir() {
				l.hasPisess = true
			}
			continue
		case strings.HasSuffix(name, SidecarSuffix) && len(name) > len(SidecarSuffix):
			st := strings.TrimSuffix(name, SidecarSuffix)
			l.sidecars[st] = sibling{path: path, symlink: link}
			continue
		case strings.Contains(name, stagingInfix):
			st := name[:strings.LastIndex(name, stagingInfix)]
			l.staging[st] = append(l.staging[st], path)
			continue
		case strings.Contains(name, backupInfix):
			st := name[:strings.LastIndex(name, backupInfix)]
			l.backups[st] = append(l.backups[st], path)
			continue
		}
		if hasIgnoredSuffix(name) && !typ.IsDir() {
			continue
		}
		ext := filepath.Ext(name)
		isSession := (ext == ExtJSONL || ext == ExtSQLite) && ext != name
		switch {
		case typ.IsDir():
			l.subdirs = append(l.subdirs, path)
		case link && !isSession:
			// Only to report it: a symlinked directory is not entered.
			if st, err := os.Stat(path); err == nil && st.IsDir() {
				l.skipped = append(l.skipped, Skipped{Path: path, Kind: SkipSymlinkDir,
					Reason: "symlinked directory not entered: pisess follows no symlink"})
			}
		case isSession:
			fi, err := e.Info()
			if errors.Is(err, fs.ErrNotExist) {
				continue // gone since the listing
			}
			if err != nil {
				l.skipped = append(l.skipped, Skipped{Path: path, Kind: SkipUnreadable, Reason: err.Error()})
				continue
			}
			mode := fi.Mode()
			key, _ := FileKeyOf(fi)
			c := candidate{path: path, size: fi.Size(), key: key, symlink: mode&fs.ModeSymlink != 0}
			switch {
			case c.symlink || mode.IsRegular():
				l.candidates[stem(name)] = append(l.candidates[stem(name)], c)
			case mode.IsDir():
				l.subdirs = append(l.subdirs, path) // became one since the listing
			default:
				l.skipped = append(l.skipped, Skipped{Path: path, Kind: SkipSpecial,
					Reason: "not a regular file (" + mode.Type().String() + ")"})
			}
		}
	}
	for st := range l.candidates {
		c := l.candidates[st]
		// .jsonl first, so that its sqlite twin is the one refused.
		sort.Slice(c, func(i, j int) bool { return filepath.Ext(c[i].path) < filepath.Ext(c[j].path) })
	}
	for _, m := range []map[string][]string{l.staging, l.backups} {
		for st := range m {
			sort.Strings(m[st])
		}
	}
	return l, nil
}

func hasIgnoredSuffix(name string) bool {
	for _, s := range ignoredSuffixes {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}
