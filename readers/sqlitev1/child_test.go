package sqlitev1

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The tests build databases the way the reference does, in a separate
// process that stays open while the reader runs: TestMain re-executes the
// test binary as that writer when childModeEnv is set.
const (
	childModeEnv = "PISESS_SQLITEV1_CHILD"
	childDBEnv   = "PISESS_SQLITEV1_DB"
	childSrcEnv  = "PISESS_SQLITEV1_SRC"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(childModeEnv); mode != "" {
		if err := runChild(mode, os.Getenv(childDBEnv), os.Getenv(childSrcEnv)); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// referenceSchema is session_sqlite.rs INIT_SQL.
var referenceSchema = []string{
	"PRAGMA journal_mode = WAL",
	"PRAGMA synchronous = NORMAL",
	"PRAGMA foreign_keys = ON",
	"CREATE TABLE IF NOT EXISTS pi_session_header (id TEXT PRIMARY KEY, json TEXT NOT NULL)",
	"CREATE TABLE IF NOT EXISTS pi_session_entries (seq INTEGER PRIMARY KEY, json TEXT NOT NULL)",
	"CREATE TABLE IF NOT EXISTS pi_session_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
}

// runChild writes the JSONL session src into the database db, then, by
// mode, holds it open (printing "ready" once the state is in place) until
// its stdin closes:
//
//	live         WAL, nothing checkpointed, a second connection in a read transaction
//	excl-wal     WAL with locking_mode=EXCLUSIVE: readers are locked out
//	excl-delete  rollback journal, BEGIN EXCLUSIVE held: readers are locked out
//	begin-wal    WAL, BEGIN EXCLUSIVE with one uncommitted entry: readers see the committed state
//	hot-journal  rollback journal, an uncommitted transaction large enough to spill into the
//	             database file: killed, it leaves a hot journal that a reader must roll back
func runChild(mode, db, src string) error {
	ctx := context.Background()
	d, err := sql.Open("sqlite", db)
	if err != nil {
		return err
	}
	d.SetMaxOpenConns(2)
	c, err := d.Conn(ctx)
	if err != nil {
		return err
	}
	schema := referenceSchema
	if mode == "excl-delete" || mode == "hot-journal" {
		schema = append([]string{"PRAGMA journal_mode = DELETE"}, schema[1:]...)
	}
	exec := func(q string, args ...any) {
		if err == nil {
			_, err = c.ExecContext(ctx, q, args...)
		}
	}
	exec("PRAGMA wal_autocheckpoint = 0") // keep every commit in the -wal
	for _, q := range schema {
		exec(q)
	}
	header, entries, rerr := splitSession(src)
	if rerr != nil {
		return rerr
	}
	exec("INSERT INTO pi_session_header(id, json) VALUES(?, ?)", headerID(header), header)
	for i, e := range entries {
		exec("INSERT INTO pi_session_entries(seq, json) VALUES(?, ?)", i+1, e) // one commit each
	}
	exec("INSERT INTO pi_session_meta(key, value) VALUES('message_count', ?), ('name', '')", fmt.Sprint(len(entries)))
	switch mode {
	case "live":
		r, cerr := d.Conn(ctx)
		if cerr != nil {
			return cerr
		}
		if _, cerr := r.ExecContext(ctx, "BEGIN"); cerr != nil {
			return cerr
		}
		var n int
		if cerr := r.QueryRowContext(ctx, "SELECT count(*) FROM pi_session_entries").Scan(&n); cerr != nil {
			return cerr
		}
	case "excl-wal":
		exec("PRAGMA locking_mode = EXCLUSIVE")
		exec("INSERT INTO pi_session_meta(key, value) VALUES('x', 'y')")
	case "excl-delete":
		exec("BEGIN EXCLUSIVE")
	case "hot-journal":
		exec("PRAGMA cache_size = 8")
		exec("BEGIN")
		exec("UPDATE pi_session_entries SET json = 'overwritten'")
		big := strings.Repeat("x", 8000)
		for i := range 400 { // evicts the updated pages into the database file
			exec("INSERT INTO pi_session_entries(seq, json) VALUES(?, ?)", len(entries)+1+i, big)
		}
	case "begin-wal":
		exec("BEGIN EXCLUSIVE")
		exec("INSERT INTO pi_session_entries(seq, json) VALUES(?, 'uncommitted')", len(entries)+1)
	default:
		return fmt.Errorf("unknown mode %q", mode)
	}
	if err != nil {
		return err
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	return nil
}

// child is a running writer process.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// startChild starts a writer child and waits until its state is in place.
func startChild(tb testing.TB, mode, db, src string) *child {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childModeEnv+"="+mode, childDBEnv+"="+db, childSrcEnv+"="+src)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	c := &child{cmd: cmd, stdin: stdin}
	tb.Cleanup(func() { c.stop() })
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		ready <- line
	}()
	select {
	case line := <-ready:
		if strings.TrimSpace(line) != "ready" {
			tb.Fatalf("child %s did not get ready: %q", mode, line)
		}
	case <-time.After(time.Minute):
		tb.Fatalf("child %s: no ready after a minute", mode)
	}
	return c
}

// kill SIGKILLs the child, as a crash would.
func (c *child) kill(tb testing.TB) {
	tb.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		tb.Fatal(err)
	}
	c.cmd.Wait()
}

// stop lets the child finish (closing its stdin) and waits for it.
func (c *child) stop() {
	if c.cmd.ProcessState != nil {
		return
	}
	c.stdin.Close()
	done := make(chan struct{})
	go func() { c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		c.cmd.Process.Kill()
		<-done
	}
}
