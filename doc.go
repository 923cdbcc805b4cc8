// Command pisess migrates, verifies, repairs and rolls back session stores of
// the pi coding agent into Session Store V2 sidecars. Everything but the
// process boundary lives in package commands: main turns the runtime's
// knobs (commands.Tune), cancels the run's context on SIGINT and SIGTERM
// and exits with the status commands.Main returns.
//
// # Layout
//
// The folders follow the pipeline: readers → a V2 writer in a staging
// directory → verify → atomic cutover or rollback → correlated ledger
// records; commands and their orchestration sit on top. One line per
// package: what it holds, and the pisess packages it may import ("-":
// none). A package imports only packages on lines below its own, so no
// cycle can form; TestLayout (layout_test.go) runs go list and fails when a
// package imports one its line does not name, or has no line.
//
//	package            | holds                                                                          | may import
//	main               | the process: knobs first, a signal-cancelled context, os.Exit(commands.Main)   | commands
//	commands           | the urfave/cli app: flags → options → one library call → text or --json; exit | commands/engine commands/metrics commands/tune rollback verify ledger writers writers/upgrade readers/discover readers writers/store writers/durable writers/wire
//	commands/engine    | orchestration: plan, schedule (jobs, places, lock waits), the per-session flow | commands/tune rollback verify ledger writers writers/upgrade readers/discover readers/jsonl readers/normalize readers/privtmp readers writers/store writers/durable writers/wire
//	commands/tune      | the runtime knobs, each with the measurement that keeps it; the CPUs (--jobs)  | -
//	commands/metrics   | the --metrics-file document: Prometheus text format, written atomically        | -
//	scripts/testprogress | make test's progress over go test -json for the crash harness              | -
//	scripts/benchtool  | the benchmark's helpers                                                        | readers/jsonl
//	scripts/gentree    | a synthetic session tree for benchmarks                                        | -
//	rollback           | cutover, rollback by run or checkpoint, fsck's repairs, heal, discards         | verify ledger readers/discover readers writers/store writers/durable writers/wire
//	verify             | read-only checks: findings, statuses, fsck's checks, the fresh cache's verdicts | ledger readers/discover readers/normalize readers/payload readers writers/idgraph writers/store writers/durable writers/wire
//	writers/upgrade    | the explicit v1/v2 → v3 rewrite of old JSONL sessions, and upgrade's tree run   | ledger readers/discover readers/jsonl readers/normalize readers/payload readers writers/jsjson writers/durable writers/wire
//	ledger             | the tree's .pisess/: journal, store ledger, lock, runs, prune, quarantine, caches | writers/durable writers/wire
//	writers            | Stage: a store from a readers.Source into <stem>.v2.staging.<uuid>             | readers writers/store writers/bufpool writers/durable writers/wire
//	readers/discover   | walk a tree; pair sessions with sidecars and leftovers; open the right Source  | readers/jsonl readers/sqlitev1 readers writers/durable writers/wire
//	readers/nativev2   | a V2 store as a source                                                         | readers/payload readers writers/store writers/wire
//	readers/sqlitev1   | pi's SQLite sessions                                                           | readers/normalize readers/payload readers/privtmp readers writers/durable
//	readers/jsonl      | pi's JSONL sessions, streaming, every error with its line                     | readers/normalize readers/payload readers writers/bufpool writers/durable writers/wire
//	readers/normalize  | the normalized entry stream: ids, links, canonical payloads                     | readers/payload readers writers/bufpool writers/idgraph writers/wire
//	readers/payload    | the reference's typed entry model: accept or refuse one entry                  | readers writers/wire
//	readers/privtmp    | pisess's private temporary directories (SQLite copies, dry runs); dead ones swept | writers/durable
//	readers            | the model: Header, Entry, SourceFormat, Source, *RefusedError                  | -
//	writers/store      | a store on disk: layout, frame scanner, appender, check, repair primitives     | writers/bufpool writers/durable writers/idgraph writers/wire
//	writers/jsjson     | the JavaScript JSON dialect upgrade writes                                     | writers/wire
//	writers/idgraph    | a session's entry ids and parent links in pointer-free memory                  | -
//	writers/bufpool    | bounded free lists of a run's big buffers                                      | -
//	writers/durable    | atomic writes, durable renames, fsync, locks, no-symlink opens, failpoints     | -
//	writers/wire       | the codec of every V2 document; reference-exact JSON; CRC-32C, SHA-256          | -
//	fixtures/pi        | the pinned TypeScript pi, driven headlessly by interop tests                   | fixtures
//	fixtures/trees     | session trees of reference vectors for tests                                   | fixtures
//	fixtures/legacy    | legacy session files for tests                                                 | -
//	fixtures           | shared test data and helpers                                                   | -
//
// Beyond STYLE.md §1: verify reads the ledger (the journal's lines are
// fsck findings; the fresh cache's entries are verdicts to judge), and
// rollback reads readers/discover (fsck's repairs list a session's
// leftovers again and read its header), so that their code moved from
// engine whole; and, as restic's cmd_check.go over internal/checker,
// commands calls the owning package itself for status and verify
// (verify), runs and prune (ledger), rollback and fsck (rollback; fsck's
// rebuilds go through engine.FsckRebuild, migrate's pipeline), inspect
// (writers/store) and build (writers), and upgrade's run is
// writers/upgrade's (upgrade.Run, below ledger so that it keeps its tree
// lock and journal), so that engine orchestrates migrate only.
package main
