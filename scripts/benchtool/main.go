// Command benchtool is the Go half of scripts/bench: the parts of the
// whole-tree benchmark that a shell does badly.
//
//	benchtool read [-o FILE] TREE          read every JSONL session through readers/jsonl (issue 3)
//	benchtool append [-every N] TREE       append one valid entry to every Nth session (the refresh step)
//	benchtool rss -o FILE -- CMD [ARG...]  run CMD, write its peak RSS as /usr/bin/time -v does
//	benchtool summary [flags]              print the summary table, optionally write it as JSON
//
// It is a benchmark tool, not part of pisess: nothing imports it, and CI
// never runs it (it builds in `go vet ./...` and `go test ./...` only).
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "read":
		err = runRead(os.Args[2:])
	case "append":
		err = runAppend(os.Args[2:])
	case "rss":
		err = runRSS(os.Args[2:])
	case "summary":
		err = runSummary(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtool:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: benchtool read|append|rss|summary ... (see the package comment)")
	os.Exit(2)
}
