package node

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func errorStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, string(e.Type)+" "+e.Field)
	}
	return out
}

func TestPrepareForCreate(t *testing.T) {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Status: corev1.NodeStatus{
			Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
			Phase:    corev1.NodeRunning,
		},
	}
	Strategy{}.PrepareForCreate(context.Background(), node)
	want := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
			Phase:       corev1.NodeRunning,
		},
	}
	if diff := cmp.Diff(want, *node); diff != "" {
		t.Errorf("node (-want +got):\n%s", diff)
	}
	Strategy{}.PrepareForCreate(context.Background(), node)
	if len(node.Spec.Taints) != 1 {
		t.Errorf("taint added twice: %v", node.Spec.Taints)
	}
}

func TestStatusRules(t *testing.T) {
	old := &corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true}, Status: corev1.NodeStatus{Phase: corev1.NodeRunning}}
	upd := &corev1.Node{Spec: corev1.NodeSpec{}, Status: corev1.NodeStatus{Phase: corev1.NodeTerminated}}
	Strategy{}.PrepareForUpdate(context.Background(), upd, old)
	if upd.Status.Phase != corev1.NodeRunning || upd.Spec.Unschedulable {
		t.Errorf("update: %+v", upd)
	}
	st := &corev1.Node{Spec: corev1.NodeSpec{}, Status: corev1.NodeStatus{Phase: corev1.NodeTerminated}}
	Strategy{}.PrepareForStatusUpdate(context.Background(), st, old)
	if st.Status.Phase != corev1.NodeTerminated || !st.Spec.Unschedulable {
		t.Errorf("status update: %+v", st)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		old  *corev1.NodeSpec
		spec corev1.NodeSpec
		want []string
	}{
		{name: "valid", spec: corev1.NodeSpec{PodCIDR: "10.42.0.0/24", PodCIDRs: []string{"10.42.0.0/24"}}},
		{name: "bad cidr", spec: corev1.NodeSpec{PodCIDRs: []string{"10.42.0.0"}}, want: []string{"FieldValueInvalid spec.podCIDRs[0]"}},
		{name: "bad taints", spec: corev1.NodeSpec{Taints: []corev1.Taint{
			{Key: "a", Effect: "Sometimes"}, {Key: "b", Effect: corev1.TaintEffectNoSchedule}, {Key: "b", Effect: corev1.TaintEffectNoSchedule}, {Key: "c"},
		}}, want: []string{"FieldValueNotSupported spec.taints[0].effect", "FieldValueDuplicate spec.taints[2]", "FieldValueRequired spec.taints[3].effect"}},
		{name: "cidr set once", old: &corev1.NodeSpec{PodCIDRs: []string{"10.42.0.0/24"}}, spec: corev1.NodeSpec{PodCIDRs: []string{"10.42.1.0/24"}},
			want: []string{"FieldValueForbidden spec.podCIDRs"}},
		{name: "cidr from empty", old: &corev1.NodeSpec{}, spec: corev1.NodeSpec{PodCIDRs: []string{"10.42.1.0/24"}}},
		{name: "provider id", old: &corev1.NodeSpec{ProviderID: "a"}, spec: corev1.NodeSpec{ProviderID: "b"}, want: []string{"FieldValueForbidden spec.providerID"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: tc.spec}
			var errs field.ErrorList
			if tc.old == nil {
				errs = Strategy{}.Validate(context.Background(), node)
			} else {
				errs = Strategy{}.ValidateUpdate(context.Background(), node, &corev1.Node{Spec: *tc.old})
			}
			if diff := cmp.Diff(tc.want, errorStrings(errs)); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFieldSet(t *testing.T) {
	got := Strategy{}.FieldSet(&corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true}})
	if diff := cmp.Diff(fields.Set{"spec.unschedulable": "true"}, got); diff != "" {
		t.Error(diff)
	}
}

func TestTableRow(t *testing.T) {
	created := metav1.NewTime(time.Now().Add(-48 * time.Hour))
	tests := []struct {
		name string
		node corev1.Node
		want []interface{}
	}{
		{name: "new", node: corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", CreationTimestamp: created}},
			want: []interface{}{"n1", "Unknown", "<none>", "2d", "", "<none>", "<none>", "<unknown>", "<unknown>", "<unknown>"}},
		{name: "ready control plane, cordoned", node: corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "n2", CreationTimestamp: created, Labels: map[string]string{
				"node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/etcd": "true", "kubernetes.io/role": "master",
			}},
			Spec: corev1.NodeSpec{Unschedulable: true},
			Status: corev1.NodeStatus{
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse}, {Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
				Addresses:  []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "n2"}, {Type: corev1.NodeInternalIP, Address: "192.0.2.10"}},
				NodeInfo:   corev1.NodeSystemInfo{KubeletVersion: "v1.37.2", OSImage: "Debian", KernelVersion: "6.1", ContainerRuntimeVersion: "containerd://2.4.2"},
			},
		}, want: []interface{}{"n2", "Ready,SchedulingDisabled", "control-plane,etcd,master", "2d", "v1.37.2", "192.0.2.10", "<none>", "Debian", "6.1", "containerd://2.4.2"}},
		{name: "not ready", node: corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "n3", CreationTimestamp: created},
			Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}},
		}, want: []interface{}{"n3", "NotReady", "<none>", "2d", "", "<none>", "<none>", "<unknown>", "<unknown>", "<unknown>"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Strategy{}.TableRow(&tc.node)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("row (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPodCIDRSync(t *testing.T) {
	node := &corev1.Node{Spec: corev1.NodeSpec{PodCIDR: "10.42.3.0/24"}}
	Strategy{}.PrepareForCreate(context.Background(), node)
	if diff := cmp.Diff([]string{"10.42.3.0/24"}, node.Spec.PodCIDRs); diff != "" {
		t.Errorf("podCIDRs (-want +got):\n%s", diff)
	}
	upd := &corev1.Node{Spec: corev1.NodeSpec{PodCIDR: "stale", PodCIDRs: []string{"10.42.4.0/24"}}}
	Strategy{}.PrepareForUpdate(context.Background(), upd, &corev1.Node{})
	if upd.Spec.PodCIDR != "10.42.4.0/24" {
		t.Errorf("podCIDR = %q", upd.Spec.PodCIDR)
	}
}
