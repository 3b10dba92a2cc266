package componentstatus

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestComponentStatuses(t *testing.T) {
	tests := []struct {
		name      string
		etcd      func() error
		component func(string) error
		want      [][]interface{}
	}{
		{name: "healthy", etcd: func() error { return nil }, want: [][]interface{}{
			{"controller-manager", "Healthy", "ok", ""}, {"scheduler", "Healthy", "ok", ""}, {"etcd-0", "Healthy", "ok", ""},
		}},
		{name: "etcd down", etcd: func() error { return errors.New("context deadline exceeded") }, want: [][]interface{}{
			{"controller-manager", "Healthy", "ok", ""}, {"scheduler", "Healthy", "ok", ""}, {"etcd-0", "Unhealthy", "", "context deadline exceeded"},
		}},
		{name: "scheduler not running", etcd: func() error { return nil },
			component: func(name string) error {
				if name == "scheduler" {
					return errors.New(`Get "https://127.0.0.1:10259/healthz": dial tcp 127.0.0.1:10259: connect: connection refused`)
				}
				return nil
			},
			want: [][]interface{}{
				{"controller-manager", "Healthy", "ok", ""},
				{"scheduler", "Unhealthy", "", `Get "https://127.0.0.1:10259/healthz": dial tcp 127.0.0.1:10259: connect: connection refused`},
				{"etcd-0", "Healthy", "ok", ""},
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got [][]interface{}
			for _, cs := range ComponentStatuses(tc.etcd, tc.component) {
				row, err := Strategy{}.TableRow(&cs)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, row)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadOnly(t *testing.T) {
	if diff := cmp.Diff([]string{"get", "list"}, Strategy{}.Verbs()); diff != "" {
		t.Errorf("verbs (-want +got):\n%s", diff)
	}
	cs := &corev1.ComponentStatus{}
	ctx := context.Background()
	if len(Strategy{}.Validate(ctx, cs)) == 0 || len(Strategy{}.ValidateUpdate(ctx, cs, cs)) == 0 {
		t.Errorf("writes are not refused")
	}
	row, _ := Strategy{}.TableRow(cs)
	if diff := cmp.Diff([]interface{}{"", "Unknown", "", ""}, row); diff != "" {
		t.Errorf("no condition (-want +got):\n%s", diff)
	}
}
