package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"time"

	"openbot/internal/waitctx"
)

// burstMemory records the memory figures of a platform bench once its last message
// reached the model: RSS and live heap (after a GC) at once, a pprof heap profile
// when asked, and, with b.settle, the same figures after that long idle, so one run
// shows whether per-conversation state is released (memory flat under bursts,
// DESIGN.md §9). It returns early, without the settled figures, when ctx ends.
func burstMemory(ctx context.Context, b platformBench, f *platformFigures) error {
	f.burstRSS, f.heapInUse = liveMemory()
	f.burstGo = readGoMemory()
	if b.heapProfile != "" {
		if err := writeHeapProfile(b.heapProfile); err != nil {
			return err
		}
	}
	if b.settle <= 0 {
		return nil
	}
	t := time.NewTimer(b.settle)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	}
	f.settledRSS, f.settledHeap = liveMemory()
	f.settledGo = readGoMemory()
	return nil
}

// startCPUProfile starts a pprof CPU profile into path ("": none); the returned
// stop ends it and closes the file, once however often it is called.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			pprof.StopCPUProfile()
			f.Close()
		})
	}, nil
}

// samplePeak reads the Go runtime's memory every 10 ms, keeping the reading
// with the most memory (and the most goroutines seen), until the returned stop
// is called or ctx ends; stop waits for the sampler and returns the peak
// (calling it again returns the same).
func samplePeak(ctx context.Context) (stop func() goMemory) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var peak goMemory
	sample := func() {
		m := readGoMemory()
		g := max(peak.goroutines, m.goroutines)
		if m.total > peak.total {
			peak = m
		}
		peak.goroutines = g
	}
	go func() {
		defer close(done)
		sample()
		waitctx.Every(ctx, 10*time.Millisecond, sample)
	}()
	return sync.OnceValue(func() goMemory { cancel(); <-done; return peak })
}

// liveMemory collects garbage and reads this process's RSS and in-use heap bytes.
func liveMemory() (rss string, heap uint64) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	rss, _ = memRSS()
	return rss, m.HeapInuse
}

// writeHeapProfile writes a pprof heap profile (in-use and allocated) to path.
func writeHeapProfile(path string) error {
	fh, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	if err := pprof.Lookup("heap").WriteTo(fh, 0); err != nil {
		fh.Close()
		return fmt.Errorf("heap profile %s: %w", path, err)
	}
	return fh.Close()
}

// heapMiB formats a byte count in MiB.
func heapMiB(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
