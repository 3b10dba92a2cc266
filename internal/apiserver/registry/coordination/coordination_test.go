package coordination

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		spec coordinationv1.LeaseSpec
		want []string
	}{
		{name: "valid", spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("node-1"), LeaseDurationSeconds: ptr.To[int32](40)}},
		{name: "empty", spec: coordinationv1.LeaseSpec{}},
		{name: "zero duration", spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To[int32](0)},
			want: []string{"spec.leaseDurationSeconds: Invalid value"}},
		{name: "negative transitions", spec: coordinationv1.LeaseSpec{LeaseTransitions: ptr.To[int32](-1)},
			want: []string{"spec.leaseTransitions: Invalid value"}},
		{name: "preferred holder without strategy", spec: coordinationv1.LeaseSpec{PreferredHolder: ptr.To("a")},
			want: []string{"spec.preferredHolder: Forbidden"}},
		{name: "unknown strategy", spec: coordinationv1.LeaseSpec{Strategy: ptr.To(coordinationv1.CoordinatedLeaseStrategy("Newest"))},
			want: []string{"spec.strategy: Unsupported value"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: tc.spec}
			var got []string
			for _, e := range (Strategy{}).Validate(context.Background(), l) {
				got = append(got, e.Field+": "+e.Type.String())
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestTableRow(t *testing.T) {
	for _, tc := range []struct {
		holder *string
		want   string
	}{{ptr.To("node-1"), "node-1"}, {nil, ""}} {
		l := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: "node-1", CreationTimestamp: metav1.NewTime(time.Now().Add(-10 * time.Second))},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: tc.holder},
		}
		got, err := Strategy{}.TableRow(l)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff([]interface{}{"node-1", tc.want, "10s"}, got); d != "" {
			t.Errorf("(-want +got):\n%s", d)
		}
	}
}
