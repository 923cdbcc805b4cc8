package commands

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"pisess/commands/metrics"
	"pisess/fixtures"
	"pisess/readers/discover"
	"pisess/verify"
)

// The shipped jobs run as root over every account's tree (--all-users):
// these tests make real accounts (useradd), run the installed binary from
// the shipped cron file and units as printed, and remove the accounts
// afterwards. So that a run sees these accounts only (and never the trees
// of the machine's other users, or of other tests' accounts), it runs in
// a mount namespace whose /etc/passwd holds root and them.

// account is a user made for a test.
type account struct {
	name     string
	uid, gid int
	home     string
}

// tree is the account's default pi session tree.
func (a account) tree() string { return filepath.Join(a.home, ".pi", "agent", "sessions") }

// accountSeq numbers the accounts this test process makes.
var accountSeq int

// newAccounts makes n accounts with homes in /home (0700, as many
// distributions make them) and removes them when the test ends.
func newAccounts(t *testing.T, n int) []account {
	t.Helper()
	needRoot(t)
	if _, err := exec.LookPath("useradd"); err != nil {
		t.Fatalf("useradd: %v (Debian: package passwd)", err)
	}
	var out []account
	for i := 0; i < n; i++ {
		accountSeq++
		name := fmt.Sprintf("pst%d-%d", os.Getpid()%1000000, accountSeq)
		if b, err := exec.Command("useradd", "--create-home", "--user-group", "--shell", "/usr/sbin/nologin", name).CombinedOutput(); err != nil {
			t.Fatalf("useradd %s: %v\n%s", name, err, b)
		}
		t.Cleanup(func() {
			if b, err := exec.Command("userdel", "--remove", name).CombinedOutput(); err != nil {
				t.Errorf("userdel %s: %v\n%s", name, err, b)
			}
		})
		u, err := user.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		a := account{name: name, home: u.HomeDir}
		a.uid, _ = strconv.Atoi(u.Uid)
		a.gid, _ = strconv.Atoi(u.Gid)
		if err := os.Chmod(a.home, 0o700); err != nil {
			t.Fatal(err)
		}
		out = append(out, a)
	}
	return out
}

// passwdOf writes an /etc/passwd that holds root and the accounts.
func passwdOf(t *testing.T, accounts []account) string {
	t.Helper()
	b, err := os.ReadFile("/etc/passwd")
	if err != nil {
		t.Fatal(err)
	}
	keep := map[string]bool{"root": true}
	for _, a := range accounts {
		keep[a.name] = true
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if name, _, ok := strings.Cut(l, ":"); ok && keep[name] {
			lines = append(lines, l)
		}
	}
	if len(lines) != len(accounts)+1 {
		t.Fatalf("/etc/passwd does not hold the accounts: %q", lines)
	}
	p := filepath.Join(t.TempDir(), "passwd")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// giveTree writes the sessions into the account's default tree, all the
// account's.
func giveTree(t *testing.T, a account, sessions map[string][]byte) {
	t.Helper()
	for rel, b := range sessions {
		p := filepath.Join(a.tree(), rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := filepath.WalkDir(filepath.Join(a.home, ".pi"), func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, a.uid, a.gid)
	}); err != nil {
		t.Fatal(err)
	}
}

// ownedBy checks that everything in the tree belongs to its owner.
func ownedBy(t *testing.T, a account) {
	t.Helper()
	n := 0
	if err := filepath.WalkDir(a.tree(), func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != a.uid || int(st.Gid) != a.gid {
			t.Errorf("%s belongs to %d:%d, not to %s (%d:%d)", p, st.Uid, st.Gid, a.name, a.uid, a.gid)
		}
		if strings.HasSuffix(p, ".v2") {
			n++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Errorf("%s has no sidecar", a.tree())
	}
}

// sandbox is how a shipped job is run: in a mount namespace whose
// /etc/passwd is passwd, and, for a systemd unit, inside what its
// directives make of the system (unitSandbox).
type sandbox struct {
	passwd string
	// strict: / read-only but rw (ProtectSystem=strict, ReadWritePaths=).
	strict bool
	rw     []string
	// hideProc: /proc with hidepid=invisible,subset=pid (ProtectProc=,
	// ProcSubset=); noNet: a network namespace of its own
	// (PrivateNetwork=).
	hideProc, noNet bool
	// caps is setpriv's --bounding-set (CapabilityBoundingSet=), nnp
	// no_new_privs (NoNewPrivileges=).
	caps string
	nnp  bool
}

const sandboxScript = `set -e
mount --make-rprivate /
mount --bind "$SB_PASSWD" /etc/passwd
if [ -n "$SB_STRICT" ]; then
	for p in $SB_RW; do mount --bind "$p" "$p"; done
	mount -o remount,bind,ro /
fi
if [ -n "$SB_HIDEPROC" ]; then mount -o remount,hidepid=invisible,subset=pid /proc; fi
unset SB_PASSWD SB_STRICT SB_RW SB_HIDEPROC
exec "$@"
`

// run runs argv with exactly env in the sandbox, as root.
func (s sandbox) run(t *testing.T, env []string, dir string, argv ...string) result {
	t.Helper()
	uns := []string{"--mount", "--pid", "--fork", "--mount-proc"}
	if s.noNet {
		uns = append(uns, "--net")
	}
	inner := []string{"env", "-i"}
	inner = append(inner, env...)
	inner = append(inner, argv...)
	if s.caps != "" || s.nnp {
		priv := []string{"setpriv"}
		if s.nnp {
			priv = append(priv, "--no-new-privs")
		}
		if s.caps != "" {
			priv = append(priv, "--bounding-set", s.caps, "--inh-caps", "-all")
		}
		inner = append(append(priv, "--"), inner...)
	}
	args := append(append(uns, "sh", "-c", sandboxScript, "sandbox"), inner...)
	cmd := exec.Command("unshare", args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "SB_PASSWD=" + s.passwd, "SB_RW=" + strings.Join(s.rw, " ")}
	if s.strict {
		cmd.Env = append(cmd.Env, "SB_STRICT=1")
	}
	if s.hideProc {
		cmd.Env = append(cmd.Env, "SB_HIDEPROC=1")
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("unshare: %v", err)
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
}

// textfileDir stands for node_exporter's textfile directory in the
// shipped lines.
const textfileDir = "/var/lib/prometheus/node-exporter"

// fleet is three accounts — a tree of new sessions and a refused one, a
// tree a killed run left broken (staging leftovers of a run killed at a
// failpoint, the tree lock of a dead process, and a session with a line
// that is not JSON), and no tree at all — and pisess installed into a
// DESTDIR with PREFIX=/usr.
type fleet struct {
	accounts []account
	passwd   string
	dest     string // DESTDIR
	metrics  string // stands for textfileDir
	logDir   string // stands for /var/log/pisess
}

func newFleet(t *testing.T) fleet {
	t.Helper()
	f := fleet{accounts: newAccounts(t, 3), dest: t.TempDir(), metrics: t.TempDir(), logDir: t.TempDir()}
	f.passwd = passwdOf(t, f.accounts)
	makeTarget(t, "install", "DESTDIR="+f.dest, "PREFIX=/usr")
	example, err := os.ReadFile(exampleSession)
	if err != nil {
		t.Fatal(err)
	}
	refused, err := os.ReadFile(refusedSession)
	if err != nil {
		t.Fatal(err)
	}
	a, b := f.accounts[0], f.accounts[1]
	giveTree(t, a, map[string][]byte{"--home-a-p--/s1.jsonl": example, "--home-a-p--/s2.jsonl": example, "--home-a-q--/r.jsonl": refused})
	broken := append(append([]byte{}, example[:bytes.IndexByte(example, '\n')+1]...), []byte("this line is not JSON\n")...)
	giveTree(t, b, map[string][]byte{"--home-b-p--/s1.jsonl": example, "--home-b-p--/s2.jsonl": example, "--home-b-p--/bad.jsonl": broken})
	// B's tree: a run killed after staging s1's sidecar, holding the tree lock.
	fp := fixtures.BuildBinary(t, "failpoints")
	// Root's run: its child, as B, is killed.
	cmd := exec.Command(fp, "migrate", "--jobs", "1", b.tree())
	cmd.Env = append(os.Environ(), "PISESS_FAILPOINT=engine.after-staging-seal", EnvLogDir+"="+t.TempDir())
	cmd.Dir = "/"
	out, _ := cmd.CombinedOutput()
	staging, _ := filepath.Glob(filepath.Join(b.tree(), "--home-b-p--", "*.v2.staging.*"))
	if len(staging) == 0 {
		t.Fatalf("the killed run left no staging directory:\n%s", out)
	}
	// C has an account and a home, no tree.
	return f
}

// rotateLog empties root's log (as logrotate's copytruncate would), so
// that it holds the next run only.
func (f fleet) rotateLog(t *testing.T) {
	t.Helper()
	if err := os.Truncate(filepath.Join(f.logDir, defaultLogName), 0); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
}

// shipped maps a path of a shipped line to the test's: the binary into
// DESTDIR, node_exporter's directory to the test's.
func (f fleet) shipped(s string) string {
	s = strings.ReplaceAll(s, "/usr/bin/pisess", filepath.Join(f.dest, "usr", "bin", "pisess"))
	return strings.ReplaceAll(s, textfileDir, f.metrics)
}

// cronFile returns the commands of the installed /etc/cron.d example, by
// the first word of their pisess command line, with the user each runs as.
func (f fleet) cronFile(t *testing.T) map[string][2]string {
	t.Helper()
	out := map[string][2]string{}
	for _, l := range unitLines(t, filepath.Join(f.dest, "usr", "share", "doc", "pisess", "examples", "cron.d", "pisess")) {
		fields := strings.Fields(l)
		if len(fields) < 8 || strings.Contains(fields[0], "=") {
			t.Fatalf("not a cron.d job line: %q", l)
		}
		command := strings.Join(fields[6:], " ")
		out[fields[7]] = [2]string{fields[5], command}
	}
	return out
}

// promTrees lists the trees the metrics file has series of for command.
func promTrees(mfs map[string]*dto.MetricFamily, command string) map[string]bool {
	out := map[string]bool{}
	for tree := range promSeries(mfs, metrics.JournalBytes, metrics.LabelTree, metrics.LabelCommand, command) {
		out[tree] = true
	}
	return out
}

// treeSummaries reads the summary record of each tree's run from root's
// log, which holds one run (the children run one tree after another: a
// tree's summary is the first after the start record naming it).
func (f fleet) treeSummaries(t *testing.T) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	tree := ""
	for _, l := range logRecords(t, filepath.Join(f.logDir, defaultLogName)) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatal(err)
		}
		switch rec["message"] {
		case "run started":
			if paths, _ := rec["paths"].([]any); len(paths) == 1 {
				tree, _ = paths[0].(string)
			}
		case "run finished":
			if tree != "" {
				out[tree], tree = rec, ""
			}
		}
	}
	return out
}

// checkFleetMetrics: the metrics file parses; it holds the run, with exit
// status exit, and per tree the outcomes the run logged for it, the
// classes pisess status gives each tree now (as root over it, through a
// child as its owner) and its journal's size; the tree that does not exist
// has none.
func (f fleet) checkFleetMetrics(t *testing.T, exit int) map[string]*dto.MetricFamily {
	t.Helper()
	mfs := promFile(t, filepath.Join(f.metrics, "pisess.prom"))
	summaries := f.treeSummaries(t)
	if got := promValue(t, mfs, metrics.RunExitStatus, metrics.LabelCommand, "migrate"); got != float64(exit) {
		t.Errorf("exit status %v, want %d", got, exit)
	}
	trees := promTrees(mfs, "migrate")
	if len(trees) != 2 || !trees[f.accounts[0].tree()] || !trees[f.accounts[1].tree()] {
		t.Errorf("the metrics' trees: %v", trees)
	}
	for _, a := range f.accounts[:2] {
		r := pisess(t, "status", "--json", a.tree())
		var st statusReport
		if err := json.Unmarshal(detail(t, r.stdout), &st); err != nil {
			t.Fatalf("status: %v\n%s", err, r)
		}
		l := []string{metrics.LabelCommand, "migrate", metrics.LabelTree, a.tree()}
		for _, c := range []verify.Class{verify.ClassMigrated, verify.ClassStale, verify.ClassUnmigrated, verify.ClassCorrupt, verify.ClassPartial} {
			if got := promValue(t, mfs, metrics.Sessions, append(l, metrics.LabelClass, string(c))...); got != float64(st.Totals[c]) {
				t.Errorf("%s: class %s %v, status says %d", a.name, c, got, st.Totals[c])
			}
		}
		sum := 0.0
		for _, v := range promSeries(mfs, metrics.RunSessions, metrics.LabelOutcome, l...) {
			sum += v
		}
		if sum != float64(len(st.Sessions)) {
			t.Errorf("%s: outcomes add up to %v, the tree has %d sessions", a.name, sum, len(st.Sessions))
		}
		logged, ok := summaries[a.tree()]
		if !ok {
			t.Fatalf("root's log has no run of %s: %v", a.tree(), summaries)
		}
		num := func(keys ...string) float64 {
			n := 0.0
			for _, k := range keys {
				v, ok := logged[k].(float64)
				if !ok {
					t.Fatalf("%s's summary record has no %s: %v", a.name, k, logged)
				}
				n += v
			}
			return n
		}
		for outcome, keys := range map[string][]string{"done": {"migrated", "refreshed"}, "skipped": {"upToDate"}, "refused": {"refused"},
			"left": {"needsRepair"}, "busy": {"busy"}, "failed": {"failed"}} {
			if got, want := promValue(t, mfs, metrics.RunSessions, append(l, metrics.LabelOutcome, outcome)...), num(keys...); got != want {
				t.Errorf("%s: outcome %s %v, the run logged %v", a.name, outcome, got, want)
			}
		}
		if got, want := promValue(t, mfs, metrics.Refused, l...), num("refused"); got != want || want == 0 {
			t.Errorf("%s: refused %v, the run logged %v", a.name, got, want)
		}
		if got := promValue(t, mfs, metrics.JournalBytes, l...); got != float64(st.Trees[0].JournalBytes) {
			t.Errorf("%s: journal bytes %v, status says %d", a.name, got, st.Trees[0].JournalBytes)
		}
	}
	return mfs
}

// TestFleetCronFile is issue 35's "done when": pisess installed into a
// DESTDIR; the shipped /etc/cron.d line run as cron runs it (/bin/sh -c,
// cron's environment, as root) over three accounts' trees — one of new
// sessions, one a killed run left broken, one missing — migrates each
// tree as its owner (everything in it is theirs), writes metrics that
// parse and match each tree, and prints nothing; the same line again is a
// no-op that prints nothing and changes nothing; the prune line is silent
// too.
func TestFleetCronFile(t *testing.T) {
	f := newFleet(t)
	jobs := f.cronFile(t)
	migrate, prune := jobs["migrate"], jobs["prune"]
	if migrate[0] != "root" || prune[0] != "root" {
		t.Fatalf("the cron file's jobs: %q", jobs)
	}
	sb := sandbox{passwd: f.passwd}
	env := append(cronEnv("/root", "root"), EnvLogDir+"="+f.logDir)
	cron := func(what, command string) {
		t.Helper()
		f.rotateLog(t)
		r := sb.run(t, env, "/root", "/bin/sh", "-c", f.shipped(command))
		if r.code != ExitClean || r.stdout != "" || r.stderr != "" {
			t.Fatalf("%s: %s\n%s", what, f.shipped(command), r)
		}
	}
	cron("the first run", migrate[1])
	for _, a := range f.accounts[:2] {
		ownedBy(t, a)
	}
	if _, err := os.Lstat(filepath.Join(f.accounts[2].home, ".pi")); err == nil {
		t.Errorf("the account without a tree got one")
	}
	staging, _ := filepath.Glob(filepath.Join(f.accounts[1].tree(), "--home-b-p--", "*.v2.staging.*"))
	if len(staging) != 0 {
		t.Errorf("the broken tree's leftovers are still there: %v", staging)
	}
	for _, p := range []string{"--home-a-p--/s1.jsonl", "--home-a-p--/s2.jsonl"} {
		if _, err := os.Lstat(discover.SidecarPath(filepath.Join(f.accounts[0].tree(), p))); err != nil {
			t.Errorf("not migrated: %v", err)
		}
	}
	f.checkFleetMetrics(t, ExitClean)

	before := map[string]map[string]string{}
	for _, a := range f.accounts[:2] {
		before[a.name] = fixtures.TreeDigest(t, a.tree())
	}
	cron("the no-op run", migrate[1])
	for _, a := range f.accounts[:2] {
		if d := fixtures.DigestDiff(before[a.name], fixtures.TreeDigest(t, a.tree())); len(d) != 0 {
			t.Errorf("the no-op run changed %s's tree: %v", a.name, d)
		}
	}
	mfs := f.checkFleetMetrics(t, ExitClean)
	for _, a := range f.accounts[:2] {
		l := []string{metrics.LabelCommand, "migrate", metrics.LabelTree, a.tree(), metrics.LabelOutcome}
		if got := promValue(t, mfs, metrics.RunSessions, append(l, "done")...); got != 0 {
			t.Errorf("%s: the no-op run did %v sessions", a.name, got)
		}
	}
	cron("the prune run", prune[1])
	mfs = promFile(t, filepath.Join(f.metrics, "pisess.prom"))
	if got := promValue(t, mfs, metrics.RunExitStatus, metrics.LabelCommand, "prune"); got != 0 {
		t.Errorf("prune's exit status %v", got)
	}
	if trees := promTrees(mfs, "migrate"); len(trees) != 2 {
		t.Errorf("prune dropped migrate's series: %v", trees)
	}
}

// unitSandbox is what the service's directives make of the system, for
// the test: ProtectSystem=strict with its ReadWritePaths= (the ones that
// exist; node_exporter's directory is the test's) and the log directory
// (LogsDirectory=, the test's), ProtectProc= and ProcSubset=,
// PrivateNetwork=, CapabilityBoundingSet=, NoNewPrivileges=. PrivateTmp=
// is not reproduced: the test's files are in /tmp.
func (f fleet) unitSandbox(t *testing.T, unit []string) sandbox {
	t.Helper()
	sb := sandbox{passwd: f.passwd, rw: []string{f.logDir}}
	for _, l := range unit {
		k, v, _ := strings.Cut(l, "=")
		switch k {
		case "ProtectSystem":
			sb.strict = v == "strict"
		case "ReadWritePaths":
			for _, p := range strings.Fields(v) {
				optional := strings.HasPrefix(p, "-")
				p = f.shipped(strings.TrimPrefix(p, "-"))
				if _, err := os.Stat(p); err != nil {
					if !optional {
						t.Fatalf("ReadWritePaths=%s does not exist", p)
					}
					continue
				}
				sb.rw = append(sb.rw, p)
			}
		case "ProtectProc":
			sb.hideProc = sb.hideProc || v == "invisible"
		case "PrivateNetwork":
			sb.noNet = v == "yes"
		case "NoNewPrivileges":
			sb.nnp = v == "yes"
		case "CapabilityBoundingSet":
			caps := []string{"-all"}
			for _, c := range strings.Fields(v) {
				caps = append(caps, "+"+strings.ToLower(strings.TrimPrefix(c, "CAP_")))
			}
			sb.caps = strings.Join(caps, ",")
		}
	}
	if !sb.strict || sb.caps == "" || !sb.nnp || !sb.hideProc || !sb.noNet {
		t.Fatalf("the unit's sandbox is not what the test reproduces: %+v", sb)
	}
	return sb
}

// TestFleetUnits (issue 35, item 4): each installed service's ExecStart=
// line, run as printed (its binary in DESTDIR, node_exporter's directory
// the test's) in the sandbox its directives describe, as systemd runs it
// (root, systemd's PATH, nothing else), over the three accounts: the
// migrate service does the work, silently, everything in the trees their
// owners'; again it is a no-op; the prune service is silent. Without
// CAP_DAC_READ_SEARCH in the bounding set the run cannot reach the
// trees (0700 homes): the capability is needed.
func TestFleetUnits(t *testing.T) {
	f := newFleet(t)
	units := filepath.Join(f.dest, "usr", "lib", "systemd", "system")
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", EnvLogDir + "=" + f.logDir}
	execStart := func(unit []string) []string {
		for _, l := range unit {
			if v, ok := strings.CutPrefix(l, "ExecStart="); ok {
				if strings.ContainsAny(v, `"'\%$`) {
					t.Fatalf("ExecStart=%s: quoting or specifiers this test does not parse", v)
				}
				return strings.Fields(f.shipped(v))
			}
		}
		t.Fatal("no ExecStart=")
		return nil
	}
	service := unitLines(t, filepath.Join(units, "pisess.service"))
	sb := f.unitSandbox(t, service)
	argv := execStart(service)

	weak := sb
	weak.caps = strings.Replace(sb.caps, ",+dac_read_search", "", 1)
	if weak.caps == sb.caps {
		t.Fatalf("the bounding set %q has no CAP_DAC_READ_SEARCH", sb.caps)
	}
	if r := weak.run(t, env, "/", argv...); r.code == ExitClean {
		t.Errorf("without CAP_DAC_READ_SEARCH the run still exits 0: %s", r)
	}

	f.rotateLog(t)
	if r := sb.run(t, env, "/", argv...); r.code != ExitClean || r.stdout != "" || r.stderr != "" {
		t.Fatalf("pisess.service: %v\n%s", argv, r)
	}
	for _, a := range f.accounts[:2] {
		ownedBy(t, a)
	}
	f.checkFleetMetrics(t, ExitClean)
	before := fixtures.TreeDigest(t, f.accounts[0].tree())
	if r := sb.run(t, env, "/", argv...); r.code != ExitClean || r.stdout != "" || r.stderr != "" {
		t.Fatalf("pisess.service again: %s", r)
	}
	if d := fixtures.DigestDiff(before, fixtures.TreeDigest(t, f.accounts[0].tree())); len(d) != 0 {
		t.Errorf("the second run changed %v", d)
	}

	prune := unitLines(t, filepath.Join(units, "pisess-prune.service"))
	psb := f.unitSandbox(t, prune)
	if r := psb.run(t, env, "/", execStart(prune)...); r.code != ExitClean || r.stdout != "" || r.stderr != "" {
		t.Fatalf("pisess-prune.service: %s", r)
	}
}
