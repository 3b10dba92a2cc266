// Command skiff is the single Skiff binary; see `skiff --help`.
package main

import (
	"os"
	"time"

	containerdcmd "github.com/skiff-sh/skiff/internal/cli/containerd"
	"github.com/skiff-sh/skiff/internal/cli/root"
	"github.com/skiff-sh/skiff/internal/memtrim"
)

// longRunning are the subcommands that run until stopped: they give back
// the binary's pages touched only while starting (internal/memtrim), a
// minute after they start. The scheduler also gives them back at once,
// before its setup: its peak RSS comes while it schedules the pods it
// found at start, so a minute later is too late for it, and its setup is
// small (the server's doubles its time to ready when done this early).
// They also cap the heap's headroom (memtrim.CapHeadroom) at heapHeadroom:
// GOGC=100 until the live heap passes it, which only a large cluster's
// server, scheduler or controller manager does.
var longRunning = map[string]bool{
	"server": true, "agent": true, "scheduler": true, "controller-manager": true,
	"proxy": true, "simulate": true, "containerd": true,
}

var releaseAtStart = map[string]bool{"scheduler": true}

const heapHeadroom = 512 << 20

func main() {
	if len(os.Args) > 1 && longRunning[os.Args[1]] {
		if releaseAtStart[os.Args[1]] {
			_, _ = memtrim.Release()
		}
		memtrim.ReleaseAfter(time.Minute)
		memtrim.CapHeadroom(heapHeadroom)
	}
	// The node agent's containerd and its runc shims are this binary too
	// (the shim is found by its name, containerd-shim-runc-v2).
	containerdcmd.RunAsChild()
	if err := root.NewCommand().Execute(); err != nil {
		os.Exit(1)
	}
}
