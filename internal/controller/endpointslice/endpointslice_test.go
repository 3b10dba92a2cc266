package endpointslice

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
)

func service(name string, mut ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("svc-" + name)},
		Spec: corev1.ServiceSpec{
			Selector:  map[string]string{"app": "web"},
			ClusterIP: "10.43.0.20",
			Ports:     []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("web")}},
		},
	}
	for _, m := range mut {
		m(s)
	}
	return s
}

func pod(name, ip string, ready bool, mut ...func(*corev1.Pod)) *corev1.Pod {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name), Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{
			{Name: "web", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}}}},
		Status: corev1.PodStatus{PodIP: ip, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}},
	}
	for _, m := range mut {
		m(p)
	}
	return p
}

// summary is one endpoint as "ip ready/serving/terminating node zone".
func summary(s *discoveryv1.EndpointSlice) []string {
	var out []string
	b := func(p *bool) string {
		if p != nil && *p {
			return "T"
		}
		return "F"
	}
	for _, ep := range s.Endpoints {
		out = append(out, fmt.Sprintf("%s %s%s%s %s %s %s", ep.Addresses[0], b(ep.Conditions.Ready), b(ep.Conditions.Serving),
			b(ep.Conditions.Terminating), deref(ep.NodeName), deref(ep.Zone), deref(ep.Hostname)))
	}
	sort.Strings(out)
	return out
}

func TestSync(t *testing.T) {
	now := metav1.Now()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{ZoneLabel: "z1"}}}
	tests := []struct {
		name      string
		svc       *corev1.Service
		pods      []runtime.Object
		wantEPs   []string
		wantPorts []string
		wantNone  bool
	}{
		{
			name: "ready, not ready and terminating pods",
			svc:  service("web"),
			pods: []runtime.Object{
				pod("a", "10.42.0.1", true),
				pod("b", "10.42.0.2", false),
				pod("c", "10.42.0.3", true, func(p *corev1.Pod) { p.DeletionTimestamp = &now }),
				pod("noip", "", true),
				pod("other", "10.42.0.9", true, func(p *corev1.Pod) { p.Labels = map[string]string{"app": "db"} }),
				pod("done", "10.42.0.8", true, func(p *corev1.Pod) {
					p.Spec.RestartPolicy = corev1.RestartPolicyNever
					p.Status.Phase = corev1.PodSucceeded
				}),
			},
			wantEPs:   []string{"10.42.0.1 TTF n1 z1 ", "10.42.0.2 FFF n1 z1 ", "10.42.0.3 FTT n1 z1 "},
			wantPorts: []string{"http/TCP/8080"},
		},
		{
			name:      "publishNotReadyAddresses makes every endpoint ready",
			svc:       service("web", func(s *corev1.Service) { s.Spec.PublishNotReadyAddresses = true }),
			pods:      []runtime.Object{pod("b", "10.42.0.2", false)},
			wantEPs:   []string{"10.42.0.2 TTF n1 z1 "},
			wantPorts: []string{"http/TCP/8080"},
		},
		{
			name: "hostname for pods in the service's subdomain",
			svc:  service("web", func(s *corev1.Service) { s.Spec.ClusterIP = corev1.ClusterIPNone }),
			pods: []runtime.Object{pod("a", "10.42.0.1", true, func(p *corev1.Pod) {
				p.Spec.Hostname, p.Spec.Subdomain = "a", "web"
			})},
			wantEPs:   []string{"10.42.0.1 TTF n1 z1 a"},
			wantPorts: []string{"http/TCP/8080"},
		},
		{
			name:      "no pods gives one empty slice",
			svc:       service("web"),
			wantPorts: nil,
		},
		{
			name:     "services without selector are left alone",
			svc:      service("web", func(s *corev1.Service) { s.Spec.Selector = nil }),
			pods:     []runtime.Object{pod("a", "10.42.0.1", true)},
			wantNone: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			cs := fake.NewClientset(append(tc.pods, tc.svc, node)...)
			f := informers.NewSharedInformerFactory(cs, 0)
			ctrl, err := New(ctx, controllercontext.Context{Client: cs, Informers: f, Clock: clocktesting.NewFakeClock(time.Now())})
			if err != nil {
				t.Fatal(err)
			}
			f.Start(ctx.Done())
			f.WaitForCacheSync(ctx.Done())
			if err := ctrl.(*Controller).sync(ctx, "ns/web"); err != nil {
				t.Fatalf("sync: %v", err)
			}
			list, err := cs.DiscoveryV1().EndpointSlices("ns").List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantNone {
				if len(list.Items) != 0 {
					t.Fatalf("got %d slices, want none", len(list.Items))
				}
				return
			}
			if len(list.Items) != 1 {
				t.Fatalf("got %d slices, want 1", len(list.Items))
			}
			s := &list.Items[0]
			if diff := cmp.Diff(tc.wantEPs, summary(s)); diff != "" {
				t.Errorf("endpoints (-want +got):\n%s", diff)
			}
			var ports []string
			for _, p := range s.Ports {
				ports = append(ports, fmt.Sprintf("%s/%s/%d", deref(p.Name), *p.Protocol, *p.Port))
			}
			if diff := cmp.Diff(tc.wantPorts, ports); diff != "" {
				t.Errorf("ports (-want +got):\n%s", diff)
			}
			if s.Labels[discoveryv1.LabelServiceName] != "web" || s.Labels[discoveryv1.LabelManagedBy] != ManagedBy {
				t.Errorf("labels = %v", s.Labels)
			}
			if !metav1.IsControlledBy(s, tc.svc) {
				t.Errorf("owner references = %v", s.OwnerReferences)
			}
			// A second sync from the same state writes nothing.
			f.WaitForCacheSync(ctx.Done())
			// Once the informer has the slice written above.
			deadline := time.Now().Add(5 * time.Second)
			for {
				got, _ := ctrl.(*Controller).sliceLister.EndpointSlices("ns").List(everything())
				if len(got) == 1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the informer holds %d slices after 5s, want the 1 written", len(got))
				}
				time.Sleep(10 * time.Millisecond)
			}
			cs.ClearActions()
			if err := ctrl.(*Controller).sync(ctx, "ns/web"); err != nil {
				t.Fatalf("second sync: %v", err)
			}
			for _, a := range cs.Actions() {
				if a.GetVerb() != "list" && a.GetVerb() != "watch" {
					t.Errorf("second sync wrote: %s %s", a.GetVerb(), a.GetResource().Resource)
				}
			}
		})
	}
}

func TestPlanChunksAndKeepsEndpointsInPlace(t *testing.T) {
	svc := service("web")
	var pods []*corev1.Pod
	for i := 0; i < 250; i++ {
		pods = append(pods, pod(fmt.Sprintf("p%03d", i), fmt.Sprintf("10.42.%d.%d", i/200, i%200+1), true))
	}
	groups := desiredGroups(svc, pods, func(string) string { return "" })
	first := plan(svc, nil, groups, MaxEndpointsPerSlice)
	var sizes []int
	for _, s := range first.create {
		sizes = append(sizes, len(s.Endpoints))
	}
	if diff := cmp.Diff([]int{100, 100, 50}, sizes); diff != "" {
		t.Fatalf("slice sizes (-want +got):\n%s", diff)
	}
	// Remove one pod from the first slice and add a new one: only the
	// first slice changes, and the new endpoint fills its free place.
	gone := first.create[0].Endpoints[0].TargetRef.Name
	var next []*corev1.Pod
	for _, p := range pods {
		if p.Name != gone {
			next = append(next, p)
		}
	}
	next = append(next, pod("new", "10.42.9.9", true))
	second := plan(svc, first.create, desiredGroups(svc, next, func(string) string { return "" }), MaxEndpointsPerSlice)
	if len(second.create) != 0 || len(second.delete) != 0 || len(second.update) != 1 {
		t.Fatalf("plan = %d creates, %d updates, %d deletes; want 0, 1, 0", len(second.create), len(second.update), len(second.delete))
	}
	if second.update[0].Name != first.create[0].Name || len(second.update[0].Endpoints) != 100 {
		t.Errorf("updated %s with %d endpoints, want %s with 100", second.update[0].Name, len(second.update[0].Endpoints), first.create[0].Name)
	}
}

func everything() labels.Selector { return labels.Everything() }
