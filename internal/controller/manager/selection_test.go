package manager

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSelection(t *testing.T) {
	known := []string{"deployment", "replicaset", "nodelifecycle"}
	tests := []struct {
		name    string
		flag    []string
		want    map[string]bool
		wantErr string
	}{
		{name: "default is every controller", flag: nil, want: map[string]bool{"deployment": true, "replicaset": true, "nodelifecycle": true}},
		{name: "star minus one", flag: []string{"*", "-nodelifecycle"}, want: map[string]bool{"deployment": true, "replicaset": true, "nodelifecycle": false}},
		{name: "only the named", flag: []string{"deployment"}, want: map[string]bool{"deployment": true, "replicaset": false, "nodelifecycle": false}},
		{name: "the first mention wins", flag: []string{"-deployment", "deployment", "*"}, want: map[string]bool{"deployment": false, "replicaset": true, "nodelifecycle": true}},
		{name: "unknown name", flag: []string{"*", "-frobnicator"}, wantErr: `"frobnicator" is not in the list of known controllers`},
		{name: "minus star", flag: []string{"-*"}, wantErr: `"-*" is not allowed`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sel, err := ParseSelection(tc.flag, known)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseSelection: %v", err)
			}
			got := map[string]bool{}
			for _, n := range known {
				got[n] = sel.Enabled(n, false)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("enabled (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRegistry(t *testing.T) {
	names := Names(Controllers())
	for _, want := range []string{"deployment", "replicaset", "replicationcontroller", "nodelifecycle", "endpointslice", "endpoints", "namespace", "garbagecollector", "serviceaccount", "root-ca-cert-publisher", "podgc"} {
		found := false
		for _, n := range names {
			found = found || n == want
		}
		if !found {
			t.Errorf("controller %q is not registered; have %v", want, names)
		}
	}
	if got := ComponentName("nodelifecycle"); got != "node-controller" {
		t.Errorf("ComponentName(nodelifecycle) = %q", got)
	}
	if got := ComponentName("deployment"); got != "deployment-controller" {
		t.Errorf("ComponentName(deployment) = %q", got)
	}
}

func TestNewValidates(t *testing.T) {
	if _, err := New(nil, Options{}); err == nil {
		t.Errorf("New without a config succeeded")
	}
}
