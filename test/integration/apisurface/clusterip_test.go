package apisurface

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	kubeapiserver "github.com/skiff-sh/skiff/internal/apiserver"
	"github.com/skiff-sh/skiff/internal/pki"
	"github.com/skiff-sh/skiff/internal/server"
	"github.com/skiff-sh/skiff/internal/server/lifecycle"
	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

// startSecondServer starts another API server on c's etcd (with service
// range serviceCIDR, "" for the default) and returns a client of it.
func startSecondServer(t *testing.T, c *testapiserver.Cluster, serviceCIDR string) kubernetes.Interface {
	t.Helper()
	api, err := kubeapiserver.New(kubeapiserver.Config{
		Etcd: c.Etcd(), ClientCA: c.PKI.CAPool, ServingCert: c.PKI.Serving, BindAddress: "127.0.0.1",
		ServiceCIDR: serviceCIDR,
	})
	if err != nil {
		t.Fatal(err)
	}
	h, err := lifecycle.Launch(context.Background(), "apiserver-b", api, testapiserver.ReadyTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Stop() })
	url := pki.ServerURL("127.0.0.1", server.ListenPort(api.Addr(), 0))
	cs, err := kubernetes.NewForConfig(c.PKI.AdminRESTConfig(url))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestClusterIPsAcrossAPIServers: two API servers on one etcd create
// Services concurrently and never hand out the same ClusterIP, because
// each allocation is an IPAddress object created only if absent. Each
// Service's address has its IPAddress naming it, the default ServiceCIDR
// "kubernetes" holds the service range, and a deleted Service's
// IPAddress goes with it.
func TestClusterIPsAcrossAPIServers(t *testing.T) {
	c := testapiserver.Start(t)
	a := c.Clientset()
	b := startSecondServer(t, c, "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	const perServer = 25
	var mu sync.Mutex
	owner := map[string]string{} // ClusterIP -> service
	var wg sync.WaitGroup
	errs := make(chan error, 2*perServer)
	for si, cs := range []kubernetes.Interface{a, b} {
		for i := 0; i < perServer; i++ {
			wg.Add(1)
			go func(cs kubernetes.Interface, name string) {
				defer wg.Done()
				svc, err := cs.CoreV1().Services("default").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
					Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
				if err != nil {
					errs <- fmt.Errorf("create %s: %w", name, err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if prev, dup := owner[svc.Spec.ClusterIP]; dup {
					errs <- fmt.Errorf("%s and %s both got %s", prev, name, svc.Spec.ClusterIP)
				}
				owner[svc.Spec.ClusterIP] = name
			}(cs, fmt.Sprintf("s%d-%d", si, i))
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(owner) != 2*perServer {
		t.Fatalf("%d distinct ClusterIPs for %d services", len(owner), 2*perServer)
	}

	ips, err := a.NetworkingV1().IPAddresses().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byIP := map[string]string{}
	for _, ip := range ips.Items {
		if r := ip.Spec.ParentRef; r != nil && r.Resource == "services" && r.Namespace == "default" {
			byIP[ip.Name] = r.Name
		}
	}
	for ip, name := range owner {
		if byIP[ip] != name {
			t.Errorf("IPAddress %s names %q, want service %s", ip, byIP[ip], name)
		}
	}
	if byIP["10.43.0.1"] != "kubernetes" {
		t.Errorf("IPAddress 10.43.0.1 names %q, want the kubernetes Service", byIP["10.43.0.1"])
	}

	def, err := a.NetworkingV1().ServiceCIDRs().Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ready := len(def.Status.Conditions) == 1 && def.Status.Conditions[0].Type == networkingv1.ServiceCIDRConditionReady &&
		def.Status.Conditions[0].Status == metav1.ConditionTrue
	if diff := cmp.Diff([]string{"10.43.0.0/16"}, def.Spec.CIDRs); diff != "" || !ready {
		t.Errorf("default ServiceCIDR: cidrs (-want +got) %s, conditions %+v", diff, def.Status.Conditions)
	}

	var gone string
	for ip, name := range owner {
		if name == "s1-0" {
			gone = ip
		}
	}
	if err := b.CoreV1().Services("default").Delete(ctx, "s1-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.NetworkingV1().IPAddresses().Get(ctx, gone, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("IPAddress %s after its Service was deleted: %v, want NotFound", gone, err)
	}
	// An address another server holds is refused when asked for by name.
	taken := ""
	for ip, name := range owner {
		if name == "s0-0" {
			taken = ip
		}
	}
	_, err = b.CoreV1().Services("default").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "copycat"},
		Spec: corev1.ServiceSpec{ClusterIP: taken, Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Errorf("asking server B for %s, held through server A: %v, want 422", taken, err)
	}
}

// TestNodePortsAcrossAPIServers: two API servers on one etcd create
// NodePort Services concurrently and never hand out the same port, because
// each allocation changes upstream's shared bitmap (a RangeAllocation at
// /registry/services/nodeports) by compare-and-swap. A port freed through
// one server can be asked for through the other, and a port the other
// holds is refused with upstream's message.
func TestNodePortsAcrossAPIServers(t *testing.T) {
	c := testapiserver.Start(t)
	a := c.Clientset()
	b := startSecondServer(t, c, "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nodePortService := func(name string, port int32) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Port: 80, NodePort: port}}}}
	}

	const perServer = 20
	var mu sync.Mutex
	owner := map[int32]string{} // NodePort -> service
	via := map[string]kubernetes.Interface{}
	var wg sync.WaitGroup
	errs := make(chan error, 2*perServer)
	for si, cs := range []kubernetes.Interface{a, b} {
		for i := 0; i < perServer; i++ {
			name := fmt.Sprintf("np%d-%d", si, i)
			via[name] = cs
			wg.Add(1)
			go func(cs kubernetes.Interface, name string) {
				defer wg.Done()
				svc, err := cs.CoreV1().Services("default").Create(ctx, nodePortService(name, 0), metav1.CreateOptions{})
				if err != nil {
					errs <- fmt.Errorf("create %s: %w", name, err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				p := svc.Spec.Ports[0].NodePort
				if prev, dup := owner[p]; dup {
					errs <- fmt.Errorf("%s and %s both got node port %d", prev, name, p)
				}
				owner[p] = name
			}(cs, name)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(owner) != 2*perServer {
		t.Fatalf("%d distinct node ports for %d services", len(owner), 2*perServer)
	}

	// np0-0's port, allocated through a, freed through b, asked for
	// through a (where it is still marked locally).
	var freed, heldByB int32
	for p, name := range owner {
		switch name {
		case "np0-0":
			freed = p
		case "np1-0":
			heldByB = p
		}
	}
	if err := b.CoreV1().Services("default").Delete(ctx, "np0-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CoreV1().Services("default").Create(ctx, nodePortService("again", freed), metav1.CreateOptions{}); err != nil {
		t.Errorf("node port %d freed through the other server: %v", freed, err)
	}
	_, err := a.CoreV1().Services("default").Create(ctx, nodePortService("taken", heldByB), metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), fmt.Sprintf("spec.ports[0].nodePort: Invalid value: %d: provided port is already allocated", heldByB)) {
		t.Errorf("node port %d held through the other server: %v, want 422 already allocated", heldByB, err)
	}
}

// TestNodePortRepair: a NodePort held in the shared bitmap by no Service
// (here the Service's key is deleted straight from etcd, as a crash
// between the claim and the write would leave it) is freed once the grace
// period is over (shortened from upstream's), so a Service can ask for it
// again; before that it is refused.
func TestNodePortRepair(t *testing.T) {
	c := testapiserver.StartWithOptions(t, testapiserver.Options{Configure: func(cfg *kubeapiserver.Config) {
		cfg.IPRepairInterval, cfg.IPLeakGracePeriod = 200*time.Millisecond, 3*time.Second
	}})
	cs := c.Clientset()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	svc := func(name string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Port: 80, NodePort: 31234}}}}
	}
	if _, err := cs.CoreV1().Services("default").Create(ctx, svc("first"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Etcd().Delete(ctx, "/registry/services/specs/default/first"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := cs.CoreV1().Services("default").Create(ctx, svc("second"), metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Fatalf("node port of a leak within the grace period: %v, want 422 already allocated", err)
	}
	for {
		_, err = cs.CoreV1().Services("default").Create(ctx, svc("second"), metav1.CreateOptions{})
		if err == nil {
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("leaked node port never freed: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if d := time.Since(start); d < 2*time.Second {
		t.Errorf("leaked node port freed after %v, before the grace period", d)
	}
}
