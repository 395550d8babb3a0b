package bench

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The process's memory as the scale phase reports it: RSS (client, node
// and embedded server share the process), sampled and from the kernel.

// peakDuring runs fn and returns its time and the process's peak RSS
// meanwhile (sampled every 20ms, and the kernel's high-water mark, reset
// first, where it can be).
func peakDuring(fn func() error) (secs float64, peak int64, err error) {
	runtime.GC()
	debug.FreeOSMemory()
	resetPeakRSS()
	var mu sync.Mutex
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if r := procStatus("VmRSS"); r > 0 {
					mu.Lock()
					peak = max(peak, r)
					mu.Unlock()
				}
			}
		}
	}()
	t0 := time.Now()
	err = fn()
	secs = time.Since(t0).Seconds()
	close(stop)
	wg.Wait()
	return secs, max(peak, procStatus("VmHWM")), err
}

// settledRSS is the process's RSS after a GC has returned what it can.
func settledRSS() int64 {
	runtime.GC()
	debug.FreeOSMemory()
	return procStatus("VmRSS")
}

// resetPeakRSS resets the kernel's high-water mark of the process's RSS
// (Linux: clear_refs 5); elsewhere it does nothing.
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// procStatus reads a "kB" field of /proc/self/status in bytes; 0 where
// there is none.
func procStatus(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// gcCount is how many collections the process has completed.
func gcCount() uint32 {
	var st runtime.MemStats
	runtime.ReadMemStats(&st)
	return st.NumGC
}

// liveHeap is the heap the last collection found live.
func liveHeap() int64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}
