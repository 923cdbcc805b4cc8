package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// runRSS is scripts/bench's stand-in for `/usr/bin/time -v -o FILE` on
// machines without GNU time: it runs the command and writes the line that
// scripts/bench reads from time's report. The figure is the child's
// ru_maxrss from wait4 — the same counter GNU time prints, and the kernel's
// VmHWM of the child at exit. It exits with the command's status.
func runRSS(args []string) error {
	fs := flag.NewFlagSet("rss", flag.ExitOnError)
	out := fs.String("o", "", "file to write the report to")
	fs.Parse(args)
	if *out == "" || fs.NArg() == 0 {
		return errors.New("rss: want -o FILE -- CMD [ARG...]")
	}
	cmd := exec.Command(fs.Arg(0), fs.Args()[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	runErr := cmd.Run()
	if cmd.ProcessState == nil {
		return runErr
	}
	ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	var kb int64
	if ru != nil {
		kb = ru.Maxrss // KiB on Linux
	}
	report := fmt.Sprintf("\tCommand being timed: %q\n\tUser time (seconds): %.2f\n\tSystem time (seconds): %.2f\n"+
		"\tMaximum resident set size (kbytes): %d\n\tExit status: %d\n",
		fs.Arg(0), cmd.ProcessState.UserTime().Seconds(), cmd.ProcessState.SystemTime().Seconds(), kb, cmd.ProcessState.ExitCode())
	if err := os.WriteFile(*out, []byte(report), 0o644); err != nil {
		return err
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		os.Exit(code)
	}
	return nil
}
