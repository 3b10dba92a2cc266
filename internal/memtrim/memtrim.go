// Package memtrim gives back the pages of the skiff binary that a process
// touched only while starting.
//
// skiff is one binary of about 250 MB. Every process runs the package
// initialisers of all of it (API types, schemes, kubectl, containerd),
// which touch about 80 MB of its code and read-only data, although a
// scheduler or an idle server goes on to use less than half of that. The
// kernel keeps those file pages mapped, and counted in the process's RSS,
// as long as nothing else needs the memory. Release asks the kernel to
// page them out (MADV_PAGEOUT on the executable's read-only mappings) a
// minute after the start: they are clean file pages, so nothing is
// written, and those the process uses again come back from the page cache
// or the disk on their next fault. Pages that another process maps too (the server and its
// containerd child share some) are left alone by the kernel.
package memtrim

import (
	"bufio"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Release pages out the process's read-only mappings of its executable
// and returns how many bytes of mappings it advised. A kernel without
// MADV_PAGEOUT (before Linux 5.4) makes it a no-op that returns an error.
func Release() (int64, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, err
	}
	maps, err := executableMappings("/proc/self/maps", exe)
	if err != nil {
		return 0, err
	}
	var advised int64
	for _, m := range maps {
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, m.start, m.end-m.start, unix.MADV_PAGEOUT); errno != 0 {
			return advised, fmt.Errorf("madvise(MADV_PAGEOUT) of %#x-%#x: %w", m.start, m.end, errno)
		}
		// No read-ahead on the faults that bring pages back: they are
		// scattered code, and read-ahead would map their neighbours too.
		_, _, _ = unix.Syscall(unix.SYS_MADVISE, m.start, m.end-m.start, unix.MADV_RANDOM)
		advised += int64(m.end - m.start)
	}
	return advised, nil
}

// ReleaseAfter releases the pages once, after delay, and returns the
// heap's free memory to the OS: by then the process has started its
// components, and the pages that only the package initialisers and the
// setup code used can go. Releasing sooner, before the setup, measured
// worse: the setup's faults then read the binary back a page at a time
// (twice the server's start-up time).
func ReleaseAfter(delay time.Duration) {
	time.AfterFunc(delay, func() {
		_, _ = Release()
		// The heap's start-up garbage too (building schemes and the
		// OpenAPI documents): the scavenger would return it over minutes.
		debug.FreeOSMemory()
		go trimEvery(trimPeriod)
	})
}

// Every trimPeriod, a small heap's free pages are given back: Go's
// scavenger keeps those up to the heap's next goal mapped (13 of an idle
// server's 62 MB of anonymous memory), and an idle process reaches that
// goal rarely; returning them costs a collection, cheap while the live
// heap is under returnBelow (above, it is left to the scavenger). And a
// process that was idle over the period (under idleShare of a core) pages
// out the executable's pages again: what it touched since the last time
// (an idle server's periodic work brings back 10-15 MB in five minutes)
// and no longer uses. A busy process is left alone: the pages it uses
// would fault straight back.
const (
	trimPeriod  = 5 * time.Minute
	returnBelow = 256 << 20
	idleShare   = 0.05
)

func trimEvery(period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	last := cpuTime()
	for range t.C {
		returnIfSmall(returnBelow)
		now := cpuTime()
		if idle(now-last, period) {
			_, _ = Release()
		}
		last = now
	}
}

// idle reports whether a process that used cpu over period was idle.
func idle(cpu, period time.Duration) bool {
	return cpu >= 0 && float64(cpu) < idleShare*float64(period)
}

// cpuTime is the CPU (user and system) the process has used.
func cpuTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// returnIfSmall returns the heap's free pages if the live heap is under
// below bytes, and reports whether it did.
func returnIfSmall(below uint64) bool {
	if liveHeap() >= below {
		return false
	}
	debug.FreeOSMemory()
	return true
}

type mapping struct{ start, end uintptr }

// executableMappings reads the read-only (not writable) mappings of file
// exe from a /proc/<pid>/maps file.
func executableMappings(path, exe string) ([]mapping, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mapping
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// address perms offset dev inode path
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || strings.Join(fields[5:], " ") != exe || strings.Contains(fields[1], "w") {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		out = append(out, mapping{uintptr(start), uintptr(end)})
	}
	return out, sc.Err()
}
