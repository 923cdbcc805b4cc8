//go:build profile

package tune

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"runtime/trace"
	"time"
)

// startProfiling writes a CPU profile to $PISESS_CPUPROFILE and a heap
// profile (in-use, at the run's end and at its peak) to $PISESS_MEMPROFILE,
// an execution trace (where goroutines wait) to $PISESS_TRACE,
// in builds with the profile tag only: as restic's debug build, a diagnosis
// tool that release binaries do not carry.
func startProfiling() func() {
	var stops []func()
	if path := os.Getenv("PISESS_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "pisess: cpu profile:", err)
		} else if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "pisess: cpu profile:", err)
		} else {
			stops = append(stops, func() { pprof.StopCPUProfile(); f.Close() })
		}
	}
	if path := os.Getenv("PISESS_TRACE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "pisess: trace:", err)
		} else if err := trace.Start(f); err != nil {
			fmt.Fprintln(os.Stderr, "pisess: trace:", err)
		} else {
			stops = append(stops, func() { trace.Stop(); f.Close() })
		}
	}
	if path := os.Getenv("PISESS_MEMPROFILE"); path != "" {
		runtime.MemProfileRate = 64 << 10
		// The live heap (as of the last collection) is sampled every 100 ms;
		// the profile kept is the one taken when it was largest (a profile
		// at exit would show what is live after the work, not what the
		// work held).
		done := make(chan struct{})
		finished := make(chan []byte)
		go func() {
			var peak uint64
			live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
			var best bytes.Buffer
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-done:
					finished <- best.Bytes()
					return
				case <-tick.C:
				}
				metrics.Read(live)
				if v := live[0].Value.Uint64(); v > peak+peak/20 {
					peak = v
					best.Reset()
					_ = pprof.Lookup("heap").WriteTo(&best, 0)
				}
			}
		}()
		stops = append(stops, func() {
			close(done)
			profile := <-finished
			if err := os.WriteFile(path, profile, 0o600); err != nil {
				fmt.Fprintln(os.Stderr, "pisess: heap profile:", err)
			}
		})
	}
	return func() {
		for _, stop := range stops {
			stop()
		}
	}
}
