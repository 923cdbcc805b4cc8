package verify

import (
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"pisess/writers/durable"
	"pisess/writers/store"
	"pisess/writers/wire"
)

func TestFingerprint(t *testing.T) {
	s := newSession(t, "accept/tricky")
	fp, err := Fingerprint(s.path)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(s.path)
	sum := sha256.Sum256(data)
	var st syscall.Stat_t
	syscall.Stat(s.path, &st)
	fs := durable.StatOfSys(&st)
	want := wire.FileIdentity{Device: fs.Dev, Inode: fs.Ino, ChangeTimeSeconds: fs.Ctime.Sec, ChangeTimeNanoseconds: fs.Ctime.Nsec}
	if fp.ByteLength != uint64(len(data)) || fp.SHA256 != hex.EncodeToString(sum[:]) || fp.FileIdentity == nil || *fp.FileIdentity != want {
		t.Fatalf("fingerprint %+v identity %+v, want %+v", fp, fp.FileIdentity, want)
	}
	link := s.path + ".link.jsonl"
	os.Symlink(s.path, link)
	if _, err := Fingerprint(link); err == nil {
		t.Fatal("fingerprinted through a symlink")
	}
	if _, err := Fingerprint(s.path + ".missing"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing: %v", err)
	}
}

func TestFingerprintSourceChangedWhileHashing(t *testing.T) {
	s := newSession(t, "accept/rollover") // several 64 KiB chunks
	f, err := openSource(s.path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, err = fingerprintOpen(f, func() { appendLine(t, s.path, "{}\n") })
	if !errors.Is(err, ErrSourceChanged) {
		t.Fatalf("err = %v, want ErrSourceChanged", err)
	}
	// Same size, new bytes: the change time moves.
	g, _ := openSource(s.path)
	defer g.Close()
	_, err = fingerprintOpen(g, func() {
		time.Sleep(10 * time.Millisecond)
		w, _ := os.OpenFile(s.path, os.O_WRONLY, 0)
		w.WriteAt([]byte("X"), 5)
		w.Close()
	})
	if !errors.Is(err, ErrSourceChanged) {
		t.Fatalf("same-size rewrite: err = %v", err)
	}
}

// A real writer appending while Fingerprint hashes.
func TestFingerprintWithConcurrentAppender(t *testing.T) {
	s := newSession(t, "accept/tricky")
	big := strings.Repeat(`{"type":"label","id":"x","timestamp":"t","label":"padding padding padding"}`+"\n", 1<<15)
	appendLine(t, s.path, big) // ~2.5 MiB: many chunks to hash
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		w, _ := os.OpenFile(s.path, os.O_APPEND|os.O_WRONLY, 0)
		defer w.Close()
		for {
			select {
			case <-stop:
				return
			default:
				w.WriteString("{}\n")
			}
		}
	}()
	var err error
	for i := 0; i < 50 && !errors.Is(err, ErrSourceChanged); i++ {
		_, err = Fingerprint(s.path)
	}
	close(stop)
	wg.Wait()
	if !errors.Is(err, ErrSourceChanged) {
		t.Fatalf("50 fingerprints of a file being appended to, none saw the change: %v", err)
	}
}

func TestFreshness(t *testing.T) {
	type want struct {
		fresh, full, invalid, rehashed bool
	}
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, s session)
		want  want
	}{
		{"no source-state", func(t *testing.T, s session) {
			os.Remove(store.SourceStatePath(s.sidecar))
		}, want{full: true}},
		{"clean, same identity", func(t *testing.T, s session) {}, want{fresh: true}},
		{"dirty", func(t *testing.T, s session) {
			writeState(t, s.sidecar, wire.SourceState{State: wire.SourceDirty})
		}, want{}},
		{"clean without fingerprint", func(t *testing.T, s session) {
			writeState(t, s.sidecar, wire.SourceState{State: wire.SourceClean})
		}, want{full: true}},
		{"identity changed, same bytes: rehash, fresh", func(t *testing.T, s session) {
			time.Sleep(10 * time.Millisecond)
			os.Chmod(s.path, 0o640) // moves the change time only
		}, want{fresh: true, rehashed: true}},
		{"copied elsewhere and back: new inode, same bytes", func(t *testing.T, s session) {
			b, _ := os.ReadFile(s.path)
			os.Remove(s.path)
			os.WriteFile(s.path, b, 0o600)
		}, want{fresh: true, rehashed: true}},
		{"no identity recorded, same bytes", func(t *testing.T, s session) {
			fp, _ := Fingerprint(s.path)
			fp.FileIdentity = nil
			writeState(t, s.sidecar, wire.SourceState{State: wire.SourceClean, SourceFingerprint: &fp})
		}, want{fresh: true, rehashed: true}},
		{"appended source", func(t *testing.T, s session) {
			appendLine(t, s.path, "{}\n")
		}, want{}}, // another length: stale without reading the source
		{"same size, other bytes", func(t *testing.T, s session) {
			b, _ := os.ReadFile(s.path)
			b[10] ^= 1
			time.Sleep(10 * time.Millisecond)
			os.WriteFile(s.path, b, 0o600)
		}, want{rehashed: true}},
		{"missing source", func(t *testing.T, s session) {
			os.Remove(s.path)
		}, want{}},
		{"upper-case sha256 with another identity: never equal", func(t *testing.T, s session) {
			fp, _ := Fingerprint(s.path)
			fp.SHA256 = strings.ToUpper(fp.SHA256)
			fp.FileIdentity.Inode++
			// Written as is: pisess's own writer refuses such a digest.
			os.WriteFile(store.SourceStatePath(s.sidecar), wire.AppendSourceState(nil, wire.SourceState{State: wire.SourceClean, SourceFingerprint: &fp}), 0o600)
		}, want{rehashed: true}},
		{"symlinked state", func(t *testing.T, s session) {
			p := store.SourceStatePath(s.sidecar)
			os.Rename(p, p+".real")
			os.Symlink(p+".real", p)
		}, want{invalid: true}},
		{"over 4096 bytes", func(t *testing.T, s session) {
			os.WriteFile(store.SourceStatePath(s.sidecar), []byte(`{"schema":"pi.session_store_v2.source_state.v1","state":"dirty","x":"`+strings.Repeat("a", 4096)+`"}`), 0o600)
		}, want{invalid: true}},
		{"bad JSON", func(t *testing.T, s session) {
			os.WriteFile(store.SourceStatePath(s.sidecar), []byte(`{"schema":`), 0o600)
		}, want{invalid: true}},
		{"wrong schema", func(t *testing.T, s session) {
			os.WriteFile(store.SourceStatePath(s.sidecar), []byte(`{"schema":"x","state":"clean"}`), 0o600)
		}, want{invalid: true}},
		{"bad sha256", func(t *testing.T, s session) {
			os.WriteFile(store.SourceStatePath(s.sidecar), []byte(`{"schema":"pi.session_store_v2.source_state.v1","state":"clean","sourceFingerprint":{"byteLength":1,"sha256":"xyz"}}`), 0o600)
		}, want{invalid: true}},
		{"empty file (a write cut after its truncation)", func(t *testing.T, s session) {
			os.WriteFile(store.SourceStatePath(s.sidecar), nil, 0o600)
		}, want{invalid: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSession(t, "accept/tricky")
			migrate(t, s)
			tc.setup(t, s)
			fr, err := Freshness(s.path, s.sidecar)
			if err != nil {
				t.Fatal(err)
			}
			got := want{fr.Fresh, fr.NeedsFullVerify, fr.Invalid, fr.Rehashed}
			if got != tc.want || fr.Reason == "" {
				t.Fatalf("freshness %+v, want %+v", fr, tc.want)
			}
		})
	}
}

// TestFreshnessCountsTheWAL (issue 34 §3): a SQLite session whose writer
// keeps its connection open with automatic checkpoints off commits into
// <db>-wal only; the database file keeps its fingerprint. A -wal written
// after the sidecar's source state makes the sidecar stale; one written
// well before it (the build read it) does not; no -wal changes nothing.
func TestFreshnessCountsTheWAL(t *testing.T) {
	s := sqliteSession(t, "accept/tricky") // closed: its WAL checkpointed and gone
	if err := os.MkdirAll(s.sidecar, 0o700); err != nil {
		t.Fatal(err)
	}
	markClean(t, s)
	if fr, err := Freshness(s.path, s.sidecar); err != nil || !fr.Fresh {
		t.Fatalf("no -wal: %+v %v, want fresh", fr, err)
	}

	before, err := os.Stat(s.path)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", s.path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for _, q := range []string{"PRAGMA wal_autocheckpoint = 0",
		`INSERT INTO pi_session_entries(seq, json) VALUES(12, '{"type":"label","id":"wal00001","parentId":null,"timestamp":"2026-01-05T10:00:01.000Z","targetId":"wal00001","label":"x"}')`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	after, err := os.Stat(s.path)
	if err != nil {
		t.Fatal(err)
	}
	if after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) {
		t.Fatalf("the database file changed: the commit did not stay in the -wal")
	}
	fr, err := Freshness(s.path, s.sidecar)
	if err != nil || fr.Fresh || !strings.Contains(fr.Reason, "-wal") {
		t.Errorf("a commit in the -wal after the build: %+v %v, want stale, saying why", fr, err)
	}

	// The same -wal, the source state written well after it (the build
	// read the commits it holds): fresh.
	later := time.Now().Add(walRacyWindow + time.Second)
	if err := os.Chtimes(store.SourceStatePath(s.sidecar), later, later); err != nil {
		t.Fatal(err)
	}
	if fr, err := Freshness(s.path, s.sidecar); err != nil || !fr.Fresh {
		t.Errorf("a -wal older than the build: %+v %v, want fresh", fr, err)
	}
}
