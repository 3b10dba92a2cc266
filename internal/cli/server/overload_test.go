package server

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/skiff-sh/skiff/internal/server"
)

func TestOverloadFlags(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want server.OverloadConfig
	}{
		{name: "defaults", want: server.OverloadConfig{RequestTimeout: time.Minute, MinRequestTimeout: 1800 * time.Second,
			MaxRequestsInflight: 400, MaxMutatingRequestsInflight: 200}},
		{name: "set", args: []string{"--request-timeout=30s", "--min-request-timeout=600", "--max-requests-inflight=0",
			"--max-mutating-requests-inflight=50", "--enable-priority-and-fairness=false", "--http2-max-streams-per-connection=1000"},
			want: server.OverloadConfig{RequestTimeout: 30 * time.Second, MinRequestTimeout: 600 * time.Second, MaxRequestsInflight: -1,
				MaxMutatingRequestsInflight: 50, DisablePriorityAndFairness: true, HTTP2MaxStreamsPerConnection: 1000}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd := NewCommand()
			if err := cmd.Flags().Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			f := defaultOverloadFlags()
			fs := cmd.Flags()
			f.RequestTimeout, _ = fs.GetDuration("request-timeout")
			f.MinRequestTimeout, _ = fs.GetInt("min-request-timeout")
			f.MaxRequestsInflight, _ = fs.GetInt("max-requests-inflight")
			f.MaxMutatingRequestsInflight, _ = fs.GetInt("max-mutating-requests-inflight")
			f.EnablePriorityAndFairness, _ = fs.GetBool("enable-priority-and-fairness")
			f.HTTP2MaxStreamsPerConnection, _ = fs.GetInt("http2-max-streams-per-connection")
			got, err := f.config()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("config (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := (OverloadFlags{RequestTimeout: -1}).config(); err == nil {
		t.Fatal("a negative timeout was accepted")
	}
	got, err := DefaultFlags().Overload.config()
	if err != nil || got.DisablePriorityAndFairness || got.MaxRequestsInflight != 400 {
		t.Fatalf("DefaultFlags: %+v %v", got, err)
	}
}
