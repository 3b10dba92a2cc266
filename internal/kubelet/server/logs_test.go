package server

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testingclock "k8s.io/utils/clock/testing"
)

// criLog is a CRI log file as containerd writes it: a partial line (P)
// continues in the next record.
const criLog = `2026-12-01T10:00:00.000000001Z stdout F first line
2026-12-01T10:00:01.000000000Z stderr F an error
2026-12-01T10:00:02.000000000Z stdout P part one 
2026-12-01T10:00:02.500000000Z stdout F and part two
2026-12-01T10:00:03.000000000Z stdout F last line
`

const prevLog = `2026-12-01T09:00:00.000000000Z stdout F crashed run
`

func TestContainerLogs(t *testing.T) {
	h := startHarness(t, nil)
	h.addPod(t, criLog, prevLog)
	c := h.httpClient(t)
	for _, tc := range []struct {
		name, path string
		code       int
		want       string
	}{
		{"all", "default/web/app", 200, "first line\nan error\npart one and part two\nlast line\n"},
		{"timestamps", "default/web/app?timestamps=true", 200,
			"2026-12-01T10:00:00.000000001Z first line\n2026-12-01T10:00:01.000000000Z an error\n" +
				"2026-12-01T10:00:02.000000000Z part one and part two\n2026-12-01T10:00:03.000000000Z last line\n"},
		{"tail", "default/web/app?tailLines=2", 200, "and part two\nlast line\n"},
		{"legacy tail", "default/web/app?tail=1", 200, "last line\n"},
		{"tail zero", "default/web/app?tailLines=0", 200, ""},
		{"limit bytes", "default/web/app?limitBytes=15", 200, "first line\nan e"},
		{"since time", "default/web/app?sinceTime=2026-12-01T10:00:02Z", 200, "part one and part two\nlast line\n"},
		{"previous", "default/web/app?previous=true", 200, "crashed run\n"},
		{"unknown pod", "default/nope/app", 404, "pod \"nope\" does not exist\n"},
		{"unknown container", "default/web/nope", 404, "container \"nope\" not found in pod \"web\"\n"},
		{"waiting", "default/web/waiting", 400, "container \"waiting\" in pod \"web\" is waiting to start: ContainerCreating\n"},
		{"no previous", "default/web/waiting?previous=true", 400, "previous terminated container \"waiting\" in pod \"web\" not found\n"},
		{"negative tail", "default/web/app?tailLines=-1", 422, "{\"message\": \"Invalid request: tailLines: must be greater than or equal to 0\"}\n"},
		{"both since", "default/web/app?sinceSeconds=5&sinceTime=2026-12-01T10:00:02Z", 422, "{\"message\": \"Invalid request: at most one of sinceTime or sinceSeconds may be specified\"}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(t, c, h.base+"/containerLogs/"+tc.path)
			if code != tc.code {
				t.Errorf("code = %d, want %d (%q)", code, tc.code, body)
			}
			if diff := cmp.Diff(tc.want, body); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
		})
	}
}

// TestContainerLogsFollowRotation follows a log while it grows, is rotated
// by the LogRotator (rename, CRI ReopenContainerLog) and grows again, and
// ends when the container exits.
func TestContainerLogsFollowRotation(t *testing.T) {
	h := startHarness(t, nil)
	live := h.addPod(t, criLog, prevLog)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, h.base+"/containerLogs/default/web/app?follow=true&tailLines=1", nil)
	resp, err := h.httpClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	expect := func(want string) {
		t.Helper()
		select {
		case got, ok := <-lines:
			if !ok {
				t.Fatalf("stream ended, want %q", want)
			}
			if got != want {
				t.Fatalf("line = %q, want %q", got, want)
			}
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %q", want)
		}
	}
	appendLine := func(line string) {
		t.Helper()
		f, err := os.OpenFile(live, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(time.Now().UTC().Format(time.RFC3339Nano) + " stdout F " + line + "\n"); err != nil {
			t.Fatal(err)
		}
	}
	expect("last line")
	appendLine("written while following")
	expect("written while following")

	clk := testingclock.NewFakeClock(time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC))
	rot, err := NewLogRotator(h.runtime, RotatorOptions{MaxSize: 10, MaxFiles: 3, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if err := rot.RotateOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(live + ".20261201-110000"); err != nil {
		t.Fatalf("rotated file: %v", err)
	}
	appendLine("after rotation")
	expect("after rotation")

	h.runtime.SetState(containerID, runtimeapi.ContainerState_CONTAINER_EXITED)
	appendLine("last words")
	expect("last words")
	select {
	case l, ok := <-lines:
		if ok {
			t.Fatalf("unexpected line %q after the container exited", l)
		}
	case <-ctx.Done():
		t.Fatal("follow did not end after the container exited")
	}
}

func TestLogRotator(t *testing.T) {
	h := startHarness(t, nil)
	live := h.addPod(t, criLog, prevLog)
	ctx := context.Background()
	clk := testingclock.NewFakeClock(time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC))
	rot, err := NewLogRotator(h.runtime, RotatorOptions{MaxSize: int64(len(criLog)), MaxFiles: 3, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	files := func() []string {
		m, _ := filepath.Glob(live + "*")
		for i := range m {
			m[i] = strings.TrimPrefix(m[i], live)
		}
		return m
	}
	steps := []struct {
		name   string
		grow   bool
		minute int
		want   []string
	}{
		{"at max size: rotated", false, 0, []string{"", ".20261201-110000"}},
		{"small: left alone", false, 0, []string{"", ".20261201-110000"}},
		{"again: older one gzipped", true, 1, []string{"", ".20261201-110000.gz", ".20261201-110100"}},
		{"third: oldest removed to keep 3 files", true, 2, []string{"", ".20261201-110100.gz", ".20261201-110200"}},
	}
	for _, s := range steps {
		if s.grow {
			if err := os.WriteFile(live, []byte(criLog), 0o640); err != nil {
				t.Fatal(err)
			}
		}
		clk.SetTime(time.Date(2026, 12, 1, 11, s.minute, 0, 0, time.UTC))
		if err := rot.RotateOnce(ctx); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if diff := cmp.Diff(s.want, files()); diff != "" {
			t.Errorf("%s: files (-want +got):\n%s", s.name, diff)
		}
	}
	if n := len(h.runtime.Reopened()); n != 3 {
		t.Errorf("ReopenContainerLog calls = %d, want 3", n)
	}
	if _, err := NewLogRotator(h.runtime, RotatorOptions{MaxFiles: 1}); err == nil {
		t.Error("MaxFiles 1 accepted")
	}
}

func TestParseRotation(t *testing.T) {
	for _, tc := range []struct {
		size  string
		files int
		want  RotatorOptions
		bad   bool
	}{
		{"10Mi", 5, RotatorOptions{MaxSize: 10 << 20, MaxFiles: 5}, false},
		{"500k", 2, RotatorOptions{MaxSize: 500000, MaxFiles: 2}, false},
		{"0", 5, RotatorOptions{}, true},
		{"ten", 5, RotatorOptions{}, true},
		{"10Mi", 1, RotatorOptions{}, true},
	} {
		got, err := ParseRotation(tc.size, tc.files)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("ParseRotation(%q, %d) = %+v, %v", tc.size, tc.files, got, err)
		}
	}
}
