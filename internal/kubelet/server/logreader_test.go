package server

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/clock"
)

func TestParseCRIRecord(t *testing.T) {
	ts := time.Date(2026, 12, 1, 10, 0, 0, 5, time.UTC)
	for _, tc := range []struct {
		name, line string
		want       criRecord
		bad        bool
	}{
		{"full", "2026-12-01T10:00:00.000000005Z stdout F hello\n", criRecord{time: ts, stream: "stdout", content: []byte("hello\n")}, false},
		{"partial", "2026-12-01T10:00:00.000000005Z stderr P hel\n", criRecord{time: ts, stream: "stderr", partial: true, content: []byte("hel")}, false},
		{"more tags", "2026-12-01T10:00:00.000000005Z stdout F:x y z\n", criRecord{time: ts, stream: "stdout", content: []byte("y z\n")}, false},
		{"empty line", "2026-12-01T10:00:00.000000005Z stdout F\n", criRecord{time: ts, stream: "stdout", content: []byte("\n")}, false},
		{"no newline at the end", "2026-12-01T10:00:00.000000005Z stdout F last", criRecord{time: ts, stream: "stdout", content: []byte("last\n")}, false},
		{"bad time", "yesterday stdout F x\n", criRecord{}, true},
		{"bad stream", "2026-12-01T10:00:00.000000005Z stdin F x\n", criRecord{}, true},
		{"docker json", `{"log":"x\n","stream":"stdout","time":"2026-12-01T10:00:00Z"}` + "\n", criRecord{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseCRIRecord([]byte(tc.line))
			if (err != nil) != tc.bad {
				t.Fatalf("err = %v, bad = %v", err, tc.bad)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(criRecord{})); !tc.bad && diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestReadCRILogRotationBeforeReopen follows a log that is renamed away and
// only recreated later (the gap between the rotator's rename and the
// runtime's reopen): lines written to the old file before the rename are
// not lost, and the new file is read from its start.
func TestReadCRILogRotationBeforeReopen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "0.log")
	line := func(s string) string { return "2026-12-01T10:00:00Z stdout F " + s + "\n" }
	if err := os.WriteFile(path, []byte(line("one")), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out syncBuffer
	running := make(chan bool, 1)
	running <- true
	isRunning := func(context.Context) bool { v := <-running; running <- v; return v }
	done := make(chan error, 1)
	go func() {
		done <- readCRILog(ctx, path, readOptions{follow: true}, isRunning, clock.RealClock{}, &out)
	}()
	waitFor(t, ctx, &out, "one\n")
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(line("two, just before the rename"))
	f.Close()
	if err := os.Rename(path, path+".rotated"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, &out, "one\ntwo, just before the rename\n")
	if err := os.WriteFile(path, []byte(line("three")), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, &out, "one\ntwo, just before the rename\nthree\n")
	<-running
	running <- false
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("follow did not end after the container stopped")
	}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func waitFor(t *testing.T, ctx context.Context, b *syncBuffer, want string) {
	t.Helper()
	for b.String() != want {
		select {
		case <-ctx.Done():
			t.Fatalf("output %q, want %q", b.String(), want)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
