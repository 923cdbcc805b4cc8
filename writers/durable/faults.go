package durable

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// FaultOp names the primitive a [FaultRule] breaks.
type FaultOp string

// The primitives a fault can be injected into.
const (
	FaultOpen   FaultOp = "open"
	FaultWrite  FaultOp = "write"
	FaultSync   FaultOp = "sync"
	FaultRename FaultOp = "rename"
	// FaultWriteback: the write succeeds, and its writeback fails later,
	// as the kernel reports it (errseq): to a syncfs through a descriptor
	// opened by these Ops before the write, never to one opened after
	// (the case where another observer saw the error first).
	FaultWriteback FaultOp = "writeback"
)

// FaultRule makes one primitive fail on matching paths, for tests.
type FaultRule struct {
	Op FaultOp
	// Pattern is a filepath.Match pattern. Without a '/' it is matched
	// against the base name ("*.tmp", "tmp"), with one against the whole
	// path. For a rename, either side matching is enough.
	Pattern string
	// Err is returned, e.g. syscall.ENOSPC, syscall.EIO, syscall.EACCES.
	Err error
	// Skip lets this many matching calls succeed before the rule fires;
	// from then on every matching call fails, as a dead disk would.
	Skip int
}

// FaultyOps returns [OS] with the rules applied. A failing write first
// writes half of its buffer, as a filling disk does, so that callers are
// tested against a torn write rather than a clean refusal.
func FaultyOps(rules ...FaultRule) Ops {
	f := &faults{rules: rules, seen: make([]int, len(rules))}
	o := OS
	o.OpenFile = func(path string, flag int, perm os.FileMode) (*os.File, error) {
		if err := f.check(FaultOpen, path); err != nil {
			return nil, &os.PathError{Op: "open", Path: path, Err: err}
		}
		file, err := OS.OpenFile(path, flag, perm)
		if err == nil {
			f.opened(file)
		}
		return file, err
	}
	o.Write = func(file *os.File, b []byte) (int, error) {
		if err := f.check(FaultWrite, file.Name()); err != nil {
			n, _ := OS.Write(file, b[:len(b)/2])
			return n, &os.PathError{Op: "write", Path: file.Name(), Err: err}
		}
		if err := f.check(FaultWriteback, file.Name()); err != nil {
			f.writebackFailed(err)
		}
		return OS.Write(file, b)
	}
	o.Sync = func(file *os.File) error {
		if err := f.check(FaultSync, file.Name()); err != nil {
			return &os.PathError{Op: "sync", Path: file.Name(), Err: err}
		}
		return OS.Sync(file)
	}
	o.SyncFS = func(file *os.File) error {
		// A seal flushes what the per-file fsyncs would have: a sync rule
		// on the sealed directory fires here.
		if err := f.check(FaultSync, file.Name()); err != nil {
			return &os.PathError{Op: "syncfs", Path: file.Name(), Err: err}
		}
		if err := f.writebackError(file); err != nil {
			return &os.PathError{Op: "syncfs", Path: file.Name(), Err: err}
		}
		return OS.SyncFS(file)
	}
	o.RenameAt = func(oldpath, newpath string, noReplace bool) error {
		if err := f.check(FaultRename, oldpath, newpath); err != nil {
			return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
		}
		return OS.RenameAt(oldpath, newpath, noReplace)
	}
	return o
}

type faults struct {
	mu    sync.Mutex
	rules []FaultRule
	seen  []int
	// The file system's error sequence, for FaultWriteback: clock orders
	// the opens and the failed writebacks; since is each open file's
	// place in it (what its next syncfs reports from).
	clock  uint64
	failed []failedWriteback
	since  map[*os.File]uint64
}

type failedWriteback struct {
	at  uint64
	err error
}

// opened records when file was opened.
func (f *faults) opened(file *os.File) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.since == nil {
		f.since = map[*os.File]uint64{}
	}
	f.clock++
	f.since[file] = f.clock
}

// writebackFailed records a writeback that will fail with err.
func (f *faults) writebackFailed(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.clock++
	f.failed = append(f.failed, failedWriteback{at: f.clock, err: err})
}

// writebackError returns the first writeback error recorded since file
// was opened (one opened elsewhere: now) and not yet reported to it, and
// moves file past it, as syncfs(2) does.
func (f *faults) writebackError(file *os.File) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	since, ok := f.since[file]
	if !ok {
		return nil
	}
	for _, w := range f.failed {
		if w.at > since {
			f.since[file] = f.clock
			return w.err
		}
	}
	return nil
}

func (f *faults) check(op FaultOp, paths ...string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, r := range f.rules {
		if r.Op != op || !anyMatch(r.Pattern, paths) {
			continue
		}
		f.seen[i]++
		if f.seen[i] > r.Skip {
			return r.Err
		}
	}
	return nil
}

func anyMatch(pattern string, paths []string) bool {
	for _, p := range paths {
		subject := filepath.Base(p)
		if strings.Contains(pattern, "/") {
			subject = filepath.Clean(p)
		}
		if ok, _ := filepath.Match(pattern, subject); ok {
			return true
		}
	}
	return false
}
