package endpoints

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
)

func pod(name, ip string, ready bool, port string) *corev1.Pod {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name), Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{
			{Name: port, ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}}}},
		Status: corev1.PodStatus{PodIP: ip, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}},
	}
}

func svc() *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", Labels: map[string]string{"team": "a"}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, ClusterIP: "10.43.0.5",
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("web")}}},
	}
}

func ips(a []corev1.EndpointAddress) []string {
	var out []string
	for _, x := range a {
		out = append(out, x.IP)
	}
	return out
}

func TestSubsets(t *testing.T) {
	pods := []*corev1.Pod{
		pod("b", "10.42.0.2", true, "web"),
		pod("a", "10.42.0.1", true, "web"),
		pod("nr", "10.42.0.3", false, "web"),
		pod("noport", "10.42.0.4", true, "other"),
	}
	got, truncated := Subsets(svc(), pods)
	want := []corev1.EndpointSubset{{
		Addresses:         []corev1.EndpointAddress{{IP: "10.42.0.1"}, {IP: "10.42.0.2"}},
		NotReadyAddresses: []corev1.EndpointAddress{{IP: "10.42.0.3"}},
		Ports:             []corev1.EndpointPort{{Name: "http", Port: 8080, Protocol: corev1.ProtocolTCP}},
	}}
	if truncated || len(got) != 1 {
		t.Fatalf("got %d subsets (truncated %v), want 1", len(got), truncated)
	}
	if diff := cmp.Diff(ips(want[0].Addresses), ips(got[0].Addresses)); diff != "" {
		t.Errorf("addresses (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(ips(want[0].NotReadyAddresses), ips(got[0].NotReadyAddresses)); diff != "" {
		t.Errorf("notReadyAddresses (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want[0].Ports, got[0].Ports); diff != "" {
		t.Errorf("ports (-want +got):\n%s", diff)
	}
}

func TestSyncTruncatesOverCapacity(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	objs := []runtime.Object{svc()}
	for i := 0; i < MaxAddresses+5; i++ {
		objs = append(objs, pod(fmt.Sprintf("p%d", i), fmt.Sprintf("10.42.%d.%d", i/250, i%250+1), i%2 == 0, "web"))
	}
	cs := fake.NewClientset(objs...)
	f := informers.NewSharedInformerFactory(cs, 0)
	ctrl, err := New(ctx, controllercontext.Context{Client: cs, Informers: f, Clock: clocktesting.NewFakeClock(time.Now())})
	if err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	if err := ctrl.(*Controller).sync(ctx, "ns/web"); err != nil {
		t.Fatal(err)
	}
	ep, err := cs.CoreV1().Endpoints("ns").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ready, notReady := len(ep.Subsets[0].Addresses), len(ep.Subsets[0].NotReadyAddresses)
	if ready != 503 || ready+notReady != MaxAddresses {
		t.Errorf("ready %d + notReady %d; want all 503 ready kept and %d in all", ready, notReady, MaxAddresses)
	}
	if ep.Annotations[OverCapacityAnnotation] != "truncated" || ep.Labels["team"] != "a" {
		t.Errorf("annotations %v labels %v", ep.Annotations, ep.Labels)
	}
}

func TestSyncLeavesSelectorlessServicesAlone(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := svc()
	s.Spec.Selector = nil
	user := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
		Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "192.0.2.1"}}}}}
	cs := fake.NewClientset(s, user, pod("a", "10.42.0.1", true, "web"))
	f := informers.NewSharedInformerFactory(cs, 0)
	ctrl, err := New(ctx, controllercontext.Context{Client: cs, Informers: f, Clock: clocktesting.NewFakeClock(time.Now())})
	if err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	cs.ClearActions()
	if err := ctrl.(*Controller).sync(ctx, "ns/web"); err != nil {
		t.Fatal(err)
	}
	for _, a := range cs.Actions() {
		if a.GetVerb() != "list" && a.GetVerb() != "watch" {
			t.Errorf("selectorless service: %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
}

// TestUserEndpointsWithoutServiceStay: an Endpoints a user makes and
// updates without any Service is not the controller's to delete (upstream's
// conformance "lifecycle of an Endpoint"); the Service's own Endpoints,
// queued after it, shows the update was processed first.
func TestUserEndpointsWithoutServiceStay(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs := fake.NewClientset(pod("a", "10.42.0.1", true, "web"))
	f := informers.NewSharedInformerFactory(cs, 0)
	ctrl, err := New(ctx, controllercontext.Context{Client: cs, Informers: f, Clock: clocktesting.NewFakeClock(time.Now()),
		Options: controllercontext.Options{ConcurrentSyncs: map[string]int{Name: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	go func() { _ = ctrl.Start(ctx) }()

	user := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "testservice", Namespace: "ns"},
		Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.0.0.24"}}, Ports: []corev1.EndpointPort{{Port: 80}}}}}
	if _, err := cs.CoreV1().Endpoints("ns").Create(ctx, user, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	user.Labels = map[string]string{"test-service": "updated"}
	if _, err := cs.CoreV1().Endpoints("ns").Update(ctx, user, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Let the informer deliver the update before the Service comes.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if ep, err := ctrl.(*Controller).epLister.Endpoints("ns").Get("testservice"); err == nil && ep.Labels["test-service"] == "updated" {
			break
		}
		if _, err := cs.CoreV1().Endpoints("ns").Get(ctx, "testservice", metav1.GetOptions{}); err != nil {
			t.Fatalf("the user's Endpoints without a Service, after its update: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the informer never saw the update")
		}
	}
	if _, err := cs.CoreV1().Services("ns").Create(ctx, svc(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := cs.CoreV1().Endpoints("ns").Get(ctx, "web", metav1.GetOptions{}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the Service's Endpoints were never written")
		}
	}
	if _, err := cs.CoreV1().Endpoints("ns").Get(ctx, "testservice", metav1.GetOptions{}); err != nil {
		t.Errorf("the user's Endpoints without a Service: %v", err)
	}
}
