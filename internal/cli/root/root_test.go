package root

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSubcommands(t *testing.T) {
	cmd := NewCommand()
	var names []string
	for _, c := range cmd.Commands() {
		names = append(names, c.Name())
	}
	if diff := cmp.Diff([]string{"agent", "containerd", "controller-manager", "image", "kubectl", "proxy", "scheduler", "server", "simulate", "version"}, names); diff != "" {
		t.Errorf("subcommands (-want +got):\n%s", diff)
	}
	kc, _, err := cmd.Find([]string{"kubectl", "get", "pods", "-n", "x"})
	if err != nil || kc.Name() != "kubectl" || !kc.DisableFlagParsing {
		t.Errorf("kubectl command = %v, %v; want it found, with flag parsing left to kubectl", kc, err)
	}
}

func TestRun(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    string
		wantErr bool
	}{
		{name: "version", args: []string{"version"}, want: "Skiff version:"},
		{name: "unknown command", args: []string{"frobnicate"}, want: `unknown command "frobnicate" for "skiff"`, wantErr: true},
		{name: "invalid server flags fail before starting", args: []string{"server", "--https-listen-port", "99999"}, want: "--https-listen-port 99999 is out of range", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := NewCommand()
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SetArgs(tc.args)
			err := cmd.Execute()
			if (err != nil) != tc.wantErr {
				t.Fatalf("Execute() error = %v, wantErr %v", err, tc.wantErr)
			}
			if !strings.Contains(out.String(), tc.want) {
				t.Errorf("output %q does not contain %q", out.String(), tc.want)
			}
		})
	}
}
