package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"

	"pisess/readers/jsonl"
)

// ReadResult is what `benchtool read` measures: every session of a tree
// opened with jsonl.Open (pass 1: check and hash the whole file) and drained
// with Next (pass 2: decode, canonicalize, resolve ids), one after another.
type ReadResult struct {
	Tree           string  `json:"tree"`
	Sessions       int     `json:"sessions"`
	Refused        int     `json:"refused"`
	FirstRefusal   string  `json:"firstRefusal,omitempty"`
	Entries        int64   `json:"entries"`
	Bytes          int64   `json:"bytes"` // source bytes (each is read twice: pass 1 and pass 2)
	LargestSession int64   `json:"largestSessionBytes"`
	Seconds        float64 `json:"seconds"`
	MBps           float64 `json:"mbPerSec"`         // 1 MB = 10^6 bytes, over source bytes
	PeakRSSKB      int64   `json:"peakRssKB"`        // VmHWM of this process
	PeakHeapBytes  uint64  `json:"peakHeapBytes"`    // live heap objects, sampled every 5 ms
	AllocBytes     uint64  `json:"allocBytes"`       // bytes allocated during the read
	GCCycles       uint64  `json:"gcCycles"`         // GC cycles during the read
	GOMAXPROCS     int     `json:"gomaxprocs"`       // informational: the read is sequential
	AllocPerByte   float64 `json:"allocBytesPerSrc"` // AllocBytes / Bytes
}

func runRead(args []string) error {
	fs := flag.NewFlagSet("read", flag.ExitOnError)
	out := fs.String("o", "", "also write the JSON result to this file")
	fs.Parse(args)
	if fs.NArg() != 1 {
		return errors.New("read: want exactly one TREE")
	}
	files, err := sessionFiles(fs.Arg(0))
	if err != nil {
		return fmt.Errorf("list sessions: %w", err)
	}
	res := ReadResult{Tree: fs.Arg(0), GOMAXPROCS: runtime.GOMAXPROCS(0)}
	heap := startHeapSampler(5 * time.Millisecond)
	allocs0, gc0 := readCounters()
	start := time.Now()
	for _, p := range files {
		n, size, err := drain(p)
		res.Sessions++
		res.Entries += n
		res.Bytes += size
		res.LargestSession = max(res.LargestSession, size)
		if err != nil {
			res.Refused++
			if res.FirstRefusal == "" {
				res.FirstRefusal = err.Error()
			}
		}
	}
	res.Seconds = time.Since(start).Seconds()
	allocs1, gc1 := readCounters()
	res.PeakHeapBytes = heap.stop()
	res.AllocBytes, res.GCCycles = allocs1-allocs0, gc1-gc0
	res.MBps = float64(res.Bytes) / 1e6 / res.Seconds
	if res.Bytes > 0 {
		res.AllocPerByte = float64(res.AllocBytes) / float64(res.Bytes)
	}
	if res.PeakRSSKB, err = vmHWM(); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(res, "", "  ")
	fmt.Println(string(b))
	if *out != "" {
		return os.WriteFile(*out, append(b, '\n'), 0o644)
	}
	return nil
}

// drain reads one session to its end and returns its entry count and size.
func drain(path string) (int64, int64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, 0, err
	}
	s, err := jsonl.Open(path, jsonl.Options{})
	if err != nil {
		return 0, fi.Size(), err
	}
	defer s.Close()
	var n int64
	for {
		_, err := s.Next()
		if err == io.EOF {
			return n, fi.Size(), nil
		}
		if err != nil {
			return n, fi.Size(), err
		}
		n++
	}
}

// vmHWM is the process's peak resident set size in KiB, from the kernel's
// own high-water mark (the number /usr/bin/time -v reports as "Maximum
// resident set size" for a child).
func vmHWM() (int64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("peak RSS: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		}
	}
	return 0, errors.New("peak RSS: no VmHWM in /proc/self/status")
}

func readCounters() (allocBytes, gcCycles uint64) {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

// heapSampler tracks the largest live heap seen. The runtime keeps no peak
// of its own; a 5 ms sample misses only spikes shorter than that, and VmHWM
// bounds them anyway.
type heapSampler struct {
	done chan struct{}
	wg   sync.WaitGroup
	peak uint64
}

func startHeapSampler(every time.Duration) *heapSampler {
	h := &heapSampler{done: make(chan struct{})}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			metrics.Read(s)
			h.peak = max(h.peak, s[0].Value.Uint64())
			select {
			case <-h.done:
				return
			case <-t.C:
			}
		}
	}()
	return h
}

func (h *heapSampler) stop() uint64 {
	close(h.done)
	h.wg.Wait()
	return h.peak
}
