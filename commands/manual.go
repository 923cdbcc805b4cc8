package commands

import (
	"strings"

	"pisess/commands/metrics"
)

// The sections of pisess(1) that belong to no one command: the
// conventions every command follows, logs and metrics, several users'
// trees, the security model, and what the exit statuses count. They were
// the README's until the README became a newcomer's page (issue 33); the
// man page is the reference, so they live here, beside the definitions
// that --help is made from, and reach the reader through pisess man.

// manSections are written after COMMANDS, in this order. A section is
// paragraphs (blank-line separated, as a Description) and, after them,
// tagged items.
var manSections = []struct {
	name  string
	text  string
	items []manItem
}{
	{name: "CONVENTIONS", text: `Every command takes --help (or pisess help COMMAND), whose last section
lists its exit statuses; pisess completion bash|zsh|fish prints a
completion script, which completes commands, flags (after other flags too),
the words of flags and arguments that take one of a few, and file names where
a path goes; pisess --version (or pisess version, version --json) prints the
module version, VCS revision and Go version.

Flags may come anywhere: before or after the command, and after its paths.
One-letter flags bundle as getopt bundles them (-nq is -n -q, -j2 is -j 2).
A mistyped command or flag gets a "did you mean". Every flag a crontab sets
can come from the environment (see ENVIRONMENT; the command line wins), and
a bad value from the environment names its variable. Every numeric flag has
a range, shown in its help (--jobs 0 to 256, --lock-timeout 0 to 1h,
--lock-wait 0 to 24h, --keep-within 0 to 876000h, --max-segment-bytes 4096
to 67108864): a value outside it, from the command line or the environment,
is a usage error (16) that names what to fix.

Reports go to stdout (so pisess status TREE | grep stale works); logs,
errors and the progress bar (drawn only when stderr is a terminal) go to
stderr. A report lists problems first, then notices, then a summary;
sessions with nothing to report are counted, not listed (-v lists every
one). -q prints only what needs the operator's action, and nothing at all
when nothing does (exit 0): what a crontab wants. Paths in text reports are
relative to their tree, sizes in human units; --json has exact numbers.

SIGINT (Ctrl-C) or SIGTERM stops a run between steps, within a second
whatever it is doing (walking, planning, migrating, discarding displaced
copies); the error names the run and how to undo it (pisess rollback --tree
T ID), in text and in --json, where it also carries the partial report; with
-q that one line is all it prints. The partial report calls a session the run
had begun interrupted and one it never began not_started, neither a failure:
the next run does them.`},

	{name: "LOGS AND METRICS", text: `On stderr the default log level is warn (error with -q); in a log file it is
info: every run writes a start record (command, correlation id, paths, pid),
one record per session it changed or failed on, and a summary record (counts
by action and outcome, bytes, duration, exit status); with --log-format json
each record is one JSON object with unique keys, one a line.

Without --log-file, every run of a command that acts on trees (migrate,
upgrade, fsck, status, verify, runs, prune, rollback; at a terminal or not)
also appends its records to a default log: a user's is
$XDG_STATE_HOME/pisess/pisess.log, else ~/.local/state/pisess/pisess.log
(directory 0700, file 0600); root's is /var/log/pisess/pisess.log (directory
0750), never taken from HOME or XDG_STATE_HOME, which sudo -E would take from
a user; PISESS_LOG_DIR moves it. A default log that cannot be opened is one
warning on stderr and the run goes on; a --log-file that cannot be opened
fails the run (exit 8): it was asked for. A root run over a user's tree logs
to root's log, the child running as the owner writing through the
descriptor root opened. Each run opens its log anew for appending, so
logrotate may rotate a --log-file with create or copytruncate; a run that
finds the default log over 8 MiB moves it to pisess.log.old (replacing the
one before), so the default log needs no logrotate rule.

--metrics-file FILE writes, at the end of every run of a command that acts
on trees, a failed or interrupted one included, the Prometheus text format
that node_exporter's textfile collector reads, replaced atomically (a
temporary file in the same directory, renamed over it). A file that cannot
be written fails the run before it starts (exit 8); one that cannot be
replaced at the end makes the run exit 8. A dry run writes none. Every
series has a command label, and the series of the other commands are kept
from the file replaced, so the migrate and prune jobs share one file (runs
of the same command over different trees need a file each); the per-tree
series have a tree label (the tree's root; bytes that are not UTF-8 shown as
U+FFFD). The values come from the run's own report; the journal and
quarantine sizes are measured by the process that ran the tree (the owner's
child, which hands them to root's process; root takes a tree's values only
if that user owns it). A run that
fails keeps the last success time of the file it replaces. Sessions by class
are counted by status, fsck (after repair) and migrate (a session it
migrated, refreshed or found fresh is migrated; one with leftovers of an
interrupted run, which only fsck examines, is counted by outcome only); by
outcome, every command counts its own (migrate's below, verify's, upgrade's,
rollback's actions, fsck's clean, repaired, left). The series, with their
labels:`,
		items: metricItems()},

	{name: "SEVERAL USERS' TREES", text: `As root, --all-users (migrate, status, verify, fsck, prune, runs, upgrade)
runs over the default tree, <home>/.pi/agent/sessions, of every account of
the system's user database (getent passwd: every NSS source that can be
listed; /etc/passwd without getent; Directory Services on macOS). Another
user's PI_SESSIONS_DIR or PI_CODING_AGENT_DIR is not seen. A tree that does
not exist is skipped silently; a tree named on the command line that does
not exist is an error for that tree (exit 8, named). Paths of several owners
(pisess migrate /home/*/.pi/agent/sessions) are run the same way.
--all-users takes no path, is a usage error (16) when not root, and rollback
does not take it (a correlation id names one run: roll back per owner).

Each tree is run by a child process as its owner (see SECURITY), one tree
after another (--jobs applies within each tree), with one correlation id
for the whole run (migrate, upgrade). The run prints one report and exits
with one status, the most urgent of its trees' (16, 32, 8, 4, 1, 0): a
broken or locked tree is reported and the others still run. In text, each
tree's report follows a line "==> TREE (user NAME, uid N) <==" as it runs,
then a table of every tree with its exit status and what it means; with -q
a tree with nothing to act on prints nothing, the table lists only the trees
that need action, and a run with nothing to do prints nothing at all.`},

	{name: "SECURITY", text: `pisess is meant to run as root over every user's session tree. Everything
in a tree (sessions, sidecars, .pisess/journal.jsonl, quarantine entries,
source-state.json, manifests, the state files, file and directory names) can
be written by the tree's owner, and so by anything running as that user;
pisess gives the owner everything it creates there. It treats all of it as
data, never as an address, and trusts only the tree root it was given (or
the default tree) and its own code.

A journal record is acted on only when every path it names resolves inside
its tree (new records store tree-relative paths; older records with absolute
paths are read when they lie inside the tree). A record naming anything else
(a path outside the tree, a "..", a session inside .pisess/, a path into a
nested tree's .pisess/, a quarantine entry outside its own run's quarantine,
a path through a symlink) is refused as forged or corrupt: rollback lists it
(refused-record, exit 4) and acts on none of it, fsck reports it
(tree.journal-line, exit 4; --repair acknowledges it in the journal and never
rewrites it), and no file is created because of it. Records must also agree
with each other and with what pisess writes (an installed sidecar is the
session's own <stem>.v2, an upgrade names its quarantined original and both
digests); a session with a contradicting record is refused, untouched.

Before a rollback moves or restores anything, the object must be where
pisess recorded it, beneath the tree, with the device, inode and content
digest recorded (sources and originals are hashed before and after). No
symlink is ever followed: every path is opened one component at a time
without following links (openat2 with RESOLVE_NO_SYMLINKS on Linux,
O_NOFOLLOW beneath an open directory elsewhere), and every rename, link and
unlink goes through parent directories opened that way, so a symlink
anywhere on the way, planted before the run or swapped in during it, makes
the step fail instead of leading outside. A directory (a discarded
displaced sidecar, a staging store, prune's trash) is removed by descriptor
beneath its parent, each name unlinked in the directory it was listed in, so
a parent swapped for a symlink meanwhile is unlinked itself, never followed.
pisess never chmods, chowns or renames over a file with more than one hard
link: its other name may be outside the tree. .pisess itself must be a real
directory, its lock and journal.jsonl regular files: anything else there (a
symlink, a FIFO, a directory) stops every command over the tree with what it
is and the mv that moves it aside (exit 8), never followed; fsck --repair
moves it into the quarantine itself and reports the move. A SQLite
session's private copy and a dry run's store live in private directories
$TMPDIR/pisess-sqlite-* and pisess-dry-run-* (0700, flocked while used),
which the next pisess of the same user removes when a killed run left them.

Root never does a tree's work as root. It opens each tree root once, one
path component at a time with O_NOFOLLOW (a symbolic link is followed only
when root controls it: root's link in a directory no one else may change,
such as /home pointing at /var/home), takes the tree's owner from the
directory it opened, and hands that open directory to a child process
running with the owner's uid, primary gid and supplementary groups (from the
account, else the tree's group). The child checks that the tree it works on
is that very directory (device and inode) before it does anything: the
kernel then refuses anything the owner could not do, and what pisess creates
is the owner's without a chown. When root cannot identify a tree's owner
this way (the path is missing, or changes between two looks, a component is
a link another user could have made, the tree is root's but lies in a
directory another user can change, or the child cannot be started as the
owner), pisess does nothing in that tree: it reports an error naming the
tree (exit 8) and never falls back to working as root. Only a tree that is
root's, on a path only root can change, is handled in root's own process.
A --log-file that only root can open is opened by the parent and handed
down. The child runs in the same working directory (give absolute paths when
the owner cannot search it) and is named like the command (ps -C pisess);
when it dies of SIGPIPE (pisess status | head), root's run ends the same
way, quietly.

The state files in .pisess/ (refused.json, refresh.json, fresh.json) only
save work. Their keys are tree-relative names (anything else is dropped);
they are read without following a link, bounded, replaced atomically
(without a sync: a crash loses work, every entry being checked against the
files it names) and never through a link, and nothing in them is an address.
A forged entry whose identities match the files as they are can make pisess
report a session refused without reading it, skip a fresh-looking sidecar
without opening it, or continue a sidecar in a refresh on its manifest's
word (its frames CRC-checked, not parsed, or not read at all and its index
rows not hashed when a fresh-cache entry vouches for them); any other forged
entry only makes it read, rebuild or judge again: no more than the tree's
owner can do to their own sessions and sidecars anyway. A refresh proves the
unchanged prefix of a session by its XXH3-128, which catches any accidental
change but is not built to resist a crafted collision; only someone who can
rewrite the session file could craft one, and they can already make its
sidecar say what they like; the SHA-256 in the fingerprint is then the one
of the bytes the sidecar holds, so pi rebuilds it as soon as the file's
identity changes.`},
}

// manItem is a tagged paragraph of a section.
type manItem struct{ tag, text string }

// metricItems lists the metrics file's series as the metrics package
// declares them, so that the page cannot name one it does not write.
func metricItems() []manItem {
	var out []manItem
	for _, f := range metrics.Families() {
		out = append(out, manItem{f.Name, "{" + strings.Join(f.Labels, ", ") + "}: " + f.Help})
	}
	return out
}

// exitNotes follow the EXIT STATUS items: what the statuses count.
const exitNotes = `The statuses are fsck(8)'s values, but one value per run, never a bitwise
combination: a run that repaired some sessions and left others broken exits
4, not 5. A root run over several trees exits with the most urgent of its
trees' statuses in the order 16, 32, 8, 4, 1, 0; when a child run as a
tree's owner dies of SIGPIPE, root's run ends by SIGPIPE too (141 in a
shell, nothing on stderr), as the owner's own run would.

A problem is a session that failed, was busy, needs repair, or whose sidecar
is damaged (corrupt, partial, a check that fails); a forged journal record;
an unknown correlation id in rollback. Not problems (notices, exit 0): a
session the reference's model refuses (pi keeps reading it as JSONL; migrate
--strict makes it a problem) and a stale sidecar (pi reads the source until
a refresh; migrate and fsck --repair refresh it). status is informational
and always exits 0.`
