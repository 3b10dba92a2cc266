package apisurface

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	kubeapiserver "github.com/skiff-sh/skiff/internal/apiserver"
	"github.com/skiff-sh/skiff/internal/controller/manager"
	"github.com/skiff-sh/skiff/internal/controller/servicecidr"
	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

// managerMetrics is the one registry the managers of this test binary
// publish to (client-go's workqueue metrics provider is set once).
var managerMetrics = prometheus.NewRegistry()

// runServiceCIDRController runs Skiff's controller manager with only the
// service-cidr-controller against c.
func runServiceCIDRController(t *testing.T, c *testapiserver.Cluster) {
	t.Helper()
	m, err := manager.New(c.Config, manager.Options{Controllers: manager.Selection{servicecidr.Name}, Metrics: managerMetrics})
	if err != nil {
		t.Fatalf("manager.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx) }()
	var once sync.Once
	t.Cleanup(func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("controller manager: %v", err)
			}
		})
	})
}

func createService(ctx context.Context, cs kubernetes.Interface, name, clusterIP string) (*corev1.Service, error) {
	return cs.CoreV1().Services("default").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{ClusterIP: clusterIP, Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
}

// fillRange creates Services until the API server answers that the range
// is full, and returns their addresses by name.
func fillRange(t *testing.T, ctx context.Context, cs kubernetes.Interface, prefix string) map[string]string {
	t.Helper()
	got := map[string]string{}
	for i := 0; ; i++ {
		name := fmt.Sprintf("%s-%d", prefix, i)
		svc, err := createService(ctx, cs, name, "")
		if err != nil {
			want := fmt.Sprintf("Internal error occurred: failed to allocate a serviceIP for Service %q: range is full", name)
			if !apierrors.IsInternalError(err) || err.Error() != want {
				t.Fatalf("create %s: %v, want %q (500)", name, err, want)
			}
			return got
		}
		got[name] = svc.Spec.ClusterIP
		if i > 64 {
			t.Fatalf("%d Services created in a tiny range", i)
		}
	}
}

func readyCondition(sc *networkingv1.ServiceCIDR) *metav1.Condition {
	return apimeta.FindStatusCondition(sc.Status.Conditions, networkingv1.ServiceCIDRConditionReady)
}

// TestServiceCIDRExtendsClusterIPs, as a user would try it against one
// API server with a /29 service range and the controller manager's
// service-cidr-controller: once the range is full, creates fail with
// upstream's error; a new ServiceCIDR, once Ready, gives Services
// addresses, including one asked for by name (one outside every
// ServiceCIDR is refused with upstream's 422). Deleting the ServiceCIDR
// while Services use it leaves it terminating with its finalizer and
// Ready False; deleting them lets it go.
func TestServiceCIDRExtendsClusterIPs(t *testing.T) {
	c := testapiserver.StartWithOptions(t, testapiserver.Options{Configure: func(cfg *kubeapiserver.Config) {
		cfg.ServiceCIDR = "10.43.0.0/29"
	}})
	cs := c.Clientset()
	runServiceCIDRController(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	nets := cs.NetworkingV1().ServiceCIDRs()

	filled := fillRange(t, ctx, cs, "fill")
	if len(filled) != 5 { // 6 addresses, the kubernetes Service holds one
		t.Errorf("%d Services fit in the /29, want 5", len(filled))
	}
	_, err := createService(ctx, cs, "outside", "10.44.0.10")
	const mismatch = `Service "outside" is invalid: spec.clusterIPs: Invalid value: ["10.44.0.10"]: failed to allocate IP 10.44.0.10: the provided network does not match the current range`
	if !apierrors.IsInvalid(err) || err.Error() != mismatch {
		t.Errorf("clusterIP outside every ServiceCIDR: %v, want %q (422)", err, mismatch)
	}

	if _, err := nets.Create(ctx, &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "extra"},
		Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.44.0.0/24"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var extra *networkingv1.ServiceCIDR
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		extra, err = nets.Get(ctx, "extra", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cond := readyCondition(extra)
		return cond != nil && cond.Status == metav1.ConditionTrue && slices.Contains(extra.Finalizers, servicecidr.Finalizer), nil
	}); err != nil {
		t.Fatalf("ServiceCIDR extra never Ready with its finalizer: %v (%+v)", err, extra)
	}

	inExtra := netip.MustParsePrefix("10.44.0.0/24")
	next, err := createService(ctx, cs, "next", "")
	if err != nil {
		t.Fatalf("create with the default range full and extra Ready: %v", err)
	}
	if !inExtra.Contains(netip.MustParseAddr(next.Spec.ClusterIP)) {
		t.Errorf("Service next got %s, want an address of 10.44.0.0/24", next.Spec.ClusterIP)
	}
	asked, err := createService(ctx, cs, "asked", "10.44.0.10")
	if err != nil || asked.Spec.ClusterIP != "10.44.0.10" {
		t.Fatalf("create asking for 10.44.0.10: %v", err)
	}
	for _, name := range []string{"next", "asked"} {
		svc, _ := cs.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{})
		ip, err := cs.NetworkingV1().IPAddresses().Get(ctx, svc.Spec.ClusterIP, metav1.GetOptions{})
		if err != nil || ip.Spec.ParentRef == nil || ip.Spec.ParentRef.Name != name {
			t.Errorf("IPAddress %s of Service %s: %v %+v", svc.Spec.ClusterIP, name, err, ip)
		}
	}

	// Deleting it while Services use it: it stays, terminating.
	if err := nets.Delete(ctx, "extra", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		extra, err = nets.Get(ctx, "extra", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cond := readyCondition(extra)
		return cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == networkingv1.ServiceCIDRReasonTerminating, nil
	}); err != nil {
		t.Fatalf("ServiceCIDR extra deleted while in use: %v (%+v), want Ready False, reason Terminating", err, extra)
	}
	if extra.DeletionTimestamp == nil || !slices.Contains(extra.Finalizers, servicecidr.Finalizer) {
		t.Errorf("ServiceCIDR extra in use: deletionTimestamp %v, finalizers %v", extra.DeletionTimestamp, extra.Finalizers)
	}
	// No new address comes from a terminating ServiceCIDR.
	if _, err := createService(ctx, cs, "late", ""); !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), "range is full") {
		t.Errorf("create with extra terminating: %v, want range is full", err)
	}

	// Once its Services are gone, so is it.
	for _, name := range []string{"next", "asked"} {
		if err := cs.CoreV1().Services("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 45*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := nets.Get(ctx, "extra", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Fatalf("ServiceCIDR extra still there after its Services were deleted: %v", err)
	}
}

// TestClusterIPFreedThroughAnotherAPIServer: two API servers on one etcd,
// both with a /29 service range. Server B fills it; what a Service
// deleted through server A held, B hands out again, asked for by name or
// as the next free address.
func TestClusterIPFreedThroughAnotherAPIServer(t *testing.T) {
	c := testapiserver.StartWithOptions(t, testapiserver.Options{Configure: func(cfg *kubeapiserver.Config) {
		cfg.ServiceCIDR = "10.43.0.0/29"
	}})
	a := c.Clientset()
	b := startSecondServer(t, c, "10.43.0.0/29")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	held := fillRange(t, ctx, b, "b")
	if len(held) != 5 {
		t.Fatalf("%d Services fit in the /29 through B, want 5", len(held))
	}
	for _, name := range []string{"b-0", "b-1"} {
		if err := a.CoreV1().Services("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := createService(ctx, b, "again", held["b-0"]); err != nil {
		t.Errorf("asking B for %s, freed through A: %v", held["b-0"], err)
	}
	switch svc, err := createService(ctx, b, "next", ""); {
	case err != nil:
		t.Errorf("next address from B: %v, want %s (freed through A)", err, held["b-1"])
	case svc.Spec.ClusterIP != held["b-1"]:
		t.Errorf("next address from B: %s, want %s (freed through A)", svc.Spec.ClusterIP, held["b-1"])
	}
}

// TestIPAddressRepair: an allocator's IPAddress whose Service does not
// exist goes once the grace period is over (shortened here from
// upstream's minute), one that is not the allocator's stays, and a
// Service whose IPAddress was deleted by hand gets it back; the default
// ServiceCIDR, deleted, is recreated.
func TestIPAddressRepair(t *testing.T) {
	c := testapiserver.StartWithOptions(t, testapiserver.Options{Configure: func(cfg *kubeapiserver.Config) {
		cfg.IPRepairInterval, cfg.IPLeakGracePeriod = 200*time.Millisecond, 2*time.Second
	}})
	cs := c.Clientset()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ips := cs.NetworkingV1().IPAddresses()

	leaked := func(name string, labels map[string]string) *networkingv1.IPAddress {
		return &networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Resource: "services", Namespace: "default", Name: "ghost"}}}
	}
	if _, err := ips.Create(ctx, leaked("10.43.7.7", map[string]string{
		"ipaddress.kubernetes.io/managed-by": "ipallocator.k8s.io", "ipaddress.kubernetes.io/ip-family": "IPv4"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ips.Create(ctx, leaked("10.43.7.8", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	web, err := createService(ctx, cs, "web", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := ips.Delete(ctx, web.Spec.ClusterIP, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := ips.Get(ctx, "10.43.7.7", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Errorf("leaked IPAddress 10.43.7.7 still there: %v", err)
	}
	var back *networkingv1.IPAddress
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		back, err = ips.Get(ctx, web.Spec.ClusterIP, metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		t.Errorf("IPAddress %s of Service web never came back: %v", web.Spec.ClusterIP, err)
	} else if r := back.Spec.ParentRef; r == nil || r.Resource != "services" || r.Namespace != "default" || r.Name != "web" {
		t.Errorf("IPAddress %s came back naming %+v, want services/default/web", web.Spec.ClusterIP, r)
	}
	if _, err := ips.Get(ctx, "10.43.7.8", metav1.GetOptions{}); err != nil {
		t.Errorf("IPAddress 10.43.7.8, not the allocator's: %v, want it kept", err)
	}

	// The default ServiceCIDR, once gone (no controller holds it here),
	// comes back.
	nets := cs.NetworkingV1().ServiceCIDRs()
	if err := nets.Delete(ctx, kubeapiserver.DefaultServiceCIDRName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var def *networkingv1.ServiceCIDR
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		def, err = nets.Get(ctx, kubeapiserver.DefaultServiceCIDRName, metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("default ServiceCIDR never recreated: %v", err)
	}
	if len(def.Spec.CIDRs) != 1 || def.Spec.CIDRs[0] != "10.43.0.0/16" {
		t.Errorf("recreated default ServiceCIDR: cidrs %v, want [10.43.0.0/16]", def.Spec.CIDRs)
	}
}
