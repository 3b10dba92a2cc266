package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	mdns "github.com/miekg/dns"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// runClient runs a busybox pod that executes script once and returns its
// output when it has finished.
func (c *agentCluster) runClient(t *testing.T, ns, name string, labels map[string]string, script string) string {
	t.Helper()
	p := busyboxPod(ns, name, c.image, "sh", "-c", script)
	p.Spec.RestartPolicy = corev1.RestartPolicyNever
	for k, v := range labels {
		p.Labels[k] = v
	}
	p = c.create(t, p)
	p = c.waitPod(t, ns, name, 90*time.Second, "finished", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	})
	var out string
	waitFor(t, 10*time.Second, "the client's output", func() bool {
		out = c.logFile(t, p, "main", 0)
		return strings.Contains(out, "DONE")
	})
	return out
}

// webDeployment is 3 busybox httpd replicas that answer with their
// hostname, ready while /www/ready exists.
func webDeployment(ns, image string) *appsv1.Deployment {
	labels := map[string]string{"app": "web"}
	grace := int64(1)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: &grace,
					Containers: []corev1.Container{{
						Name: "main", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
						Command: []string{"sh", "-c", "mkdir -p /www && hostname > /www/index.html && touch /www/ready && exec httpd -f -p 8080 -h /www"},
						Ports:   []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(8080)}},
							PeriodSeconds: 1, FailureThreshold: 1,
						},
					}},
				},
			},
		},
	}
}

func svcFor(ns, name string, typ corev1.ServiceType, mutate ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Type: typ, Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}},
	}
	for _, m := range mutate {
		m(s)
	}
	return s
}

// hostGet counts the distinct answers of n requests from the host.
func hostGet(url string, n int) (map[string]int, error) {
	seen := map[string]int{}
	client := &http.Client{Timeout: 3 * time.Second}
	for i := 0; i < n; i++ {
		resp, err := client.Get(url)
		if err != nil {
			return seen, err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		seen[strings.TrimSpace(string(b))]++
	}
	return seen, nil
}

func names(m map[string]int) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestServices: a Deployment of 3 behind Services, reached from pods and
// from the host, through the proxy and cluster DNS of `skiff server`.
func TestServices(t *testing.T) {
	c := cluster(t)
	ctx := context.Background()
	ns := c.namespace(t, "services")
	if _, err := c.client.AppsV1().Deployments(ns).Create(ctx, webDeployment(ns, c.image), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svcs := c.client.CoreV1().Services(ns)
	web, err := svcs.Create(ctx, svcFor(ns, "web", corev1.ServiceTypeNodePort), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svcs.Create(ctx, svcFor(ns, "web-headless", corev1.ServiceTypeClusterIP, func(s *corev1.Service) { s.Spec.ClusterIP = corev1.ClusterIPNone }), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	empty, err := svcs.Create(ctx, svcFor(ns, "empty", corev1.ServiceTypeClusterIP, func(s *corev1.Service) { s.Spec.Selector = map[string]string{"app": "nothing"} }), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svcs.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ext"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "www.example.com"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var pods []corev1.Pod
	waitFor(t, 120*time.Second, "3 ready web pods", func() bool {
		list, err := c.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false
		}
		pods = nil
		for _, p := range list.Items {
			if podRunningReady(&p) {
				pods = append(pods, p)
			}
		}
		return len(pods) == 3
	})
	want := map[string]bool{}
	var podIPs []string
	for _, p := range pods {
		want[p.Name] = true
		podIPs = append(podIPs, p.Status.PodIP)
	}
	ip := web.Spec.ClusterIP
	// Ready pods are not yet programmed endpoints: the EndpointSlice
	// controller and the proxy's rate-bounded sync follow. On a loaded
	// machine that takes seconds, so wait until the host reaches every
	// replica through the ClusterIP before asking pods to.
	waitFor(t, 60*time.Second, "the ClusterIP to reach all 3 replicas from the host", func() bool {
		seen, err := hostGet("http://"+net.JoinHostPort(ip, "80")+"/", 30)
		return err == nil && len(seen) == 3
	})

	// The image's static busybox wget crashes, and its libc cannot resolve
	// names without NSS modules, so clients speak HTTP with nc and resolve
	// with busybox's own nslookup (which asks the resolv.conf nameserver,
	// the cluster DNS).
	spreadFrom := func(t *testing.T, name, resolve string) {
		out := c.runClient(t, ns, name, nil, resolve+`for i in $(seq 30); do printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 3 $ip 80 | tail -n 1; done; echo DONE`)
		seen := map[string]bool{}
		for _, l := range strings.Split(out, "\n") {
			if want[strings.TrimSpace(l)] {
				seen[strings.TrimSpace(l)] = true
			}
		}
		if len(seen) != 3 {
			t.Errorf("30 requests to %s from a pod reached %v, want all 3 replicas; output:\n%s", name, seen, out)
		}
	}
	t.Run("clusterip from a pod spreads over the replicas", func(t *testing.T) { spreadFrom(t, "client-ip", "ip="+ip+"; ") })
	t.Run("dns name from a pod spreads over the replicas", func(t *testing.T) {
		spreadFrom(t, "client-dns", "ip=$(nslookup web."+ns+".svc.cluster.local | awk '/^Address/ {a=$NF} END {print a}'); echo resolved=$ip; ")
	})
	t.Run("nodeport from the host", func(t *testing.T) {
		seen, err := hostGet(fmt.Sprintf("http://%s/", net.JoinHostPort(pods[0].Status.HostIP, fmt.Sprint(web.Spec.Ports[0].NodePort))), 30)
		if err != nil || len(seen) != 3 {
			t.Errorf("NodePort from the host: %v, %v; want all 3 replicas", names(seen), err)
		}
	})
	t.Run("headless resolves to the pod addresses", func(t *testing.T) {
		out := c.runClient(t, ns, "client-headless", nil, "nslookup web-headless."+ns+".svc.cluster.local; echo DONE")
		for _, a := range podIPs {
			if !strings.Contains(out, a) {
				t.Errorf("nslookup output lacks %s:\n%s", a, out)
			}
		}
	})
	t.Run("externalname is a cname, asked from the host", func(t *testing.T) {
		m := new(mdns.Msg)
		m.SetQuestion("ext."+ns+".svc.cluster.local.", mdns.TypeA)
		r, _, err := (&mdns.Client{Timeout: 3 * time.Second}).Exchange(m, "10.43.0.10:53")
		if err != nil {
			t.Fatalf("DNS at 10.43.0.10 from the host: %v", err)
		}
		if len(r.Answer) == 0 || r.Answer[0].(*mdns.CNAME).Target != "www.example.com." {
			t.Errorf("answer %v, want a CNAME to www.example.com.", r.Answer)
		}
	})
	t.Run("no endpoints is refused at once", func(t *testing.T) {
		out := c.runClient(t, ns, "client-empty", nil, fmt.Sprintf("s=$(date +%%s); nc -w 10 %s 80 </dev/null; e=$(date +%%s); echo took=$((e-s)); echo DONE", empty.Spec.ClusterIP))
		if !strings.Contains(out, "refused") || !strings.Contains(out, "took=0") && !strings.Contains(out, "took=1") {
			t.Errorf("want a refusal within a second:\n%s", out)
		}
	})
	t.Run("client ip affinity sticks", func(t *testing.T) {
		sticky, err := svcs.Create(ctx, svcFor(ns, "sticky", corev1.ServiceTypeClusterIP, func(s *corev1.Service) {
			s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
		}), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		url := "http://" + net.JoinHostPort(sticky.Spec.ClusterIP, "80") + "/"
		waitFor(t, 15*time.Second, "the sticky Service to answer", func() bool { _, err := hostGet(url, 1); return err == nil })
		if seen, err := hostGet(url, 20); err != nil || len(seen) != 1 {
			t.Errorf("20 requests from the host reached %v (%v), want one replica", names(seen), err)
		}
	})
	t.Run("a load balancer gets an address that answers", func(t *testing.T) {
		lb, err := svcs.Create(ctx, svcFor(ns, "lb", corev1.ServiceTypeLoadBalancer, func(s *corev1.Service) { s.Spec.Ports[0].Port = 8081 }), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var addr string
		waitFor(t, 15*time.Second, "status.loadBalancer.ingress", func() bool {
			s, err := svcs.Get(ctx, lb.Name, metav1.GetOptions{})
			if err == nil && len(s.Status.LoadBalancer.Ingress) > 0 {
				addr = s.Status.LoadBalancer.Ingress[0].IP
			}
			return addr != ""
		})
		url := "http://" + net.JoinHostPort(addr, "8081") + "/"
		waitFor(t, 15*time.Second, "the load-balancer address to answer", func() bool { _, err := hostGet(url, 1); return err == nil })
	})
	t.Run("kubernetes.default.svc reaches the API server from a pod", func(t *testing.T) {
		eps, err := c.client.CoreV1().Endpoints("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		if err != nil || len(eps.Subsets) == 0 || len(eps.Subsets[0].Addresses) == 0 {
			t.Fatalf("Endpoints default/kubernetes: %v %v", eps, err)
		}
		advertised := net.JoinHostPort(eps.Subsets[0].Addresses[0].IP, fmt.Sprint(eps.Subsets[0].Ports[0].Port))
		if conn, err := net.DialTimeout("tcp", advertised, 3*time.Second); err != nil {
			t.Skipf("the API server does not listen on its advertised address %s (%v): with the default --bind-address 127.0.0.1 pods cannot reach it; see docs/architecture.md, Service proxy", advertised, err)
		} else {
			conn.Close()
		}
		out := c.runClient(t, ns, "client-api", nil, "ip=$(nslookup kubernetes.default.svc.cluster.local | awk '/^Address/ {a=$NF} END {print a}'); echo resolved=$ip; nc -w 3 $ip 443 </dev/null && echo open; echo DONE")
		if !strings.Contains(out, "resolved=10.43.0.1") || !strings.Contains(out, "open") {
			t.Errorf("want kubernetes.default.svc to resolve to 10.43.0.1 and accept a connection:\n%s", out)
		}
	})
	t.Run("an unready pod stops receiving traffic", func(t *testing.T) {
		victim := pods[2].Name
		cmd := exec.Command(binary(), "kubectl", "--kubeconfig", c.kubeconfig, "-n", ns, "exec", victim, "--", "rm", "/www/ready")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("kubectl exec: %v\n%s", err, out)
		}
		c.waitPod(t, ns, victim, 30*time.Second, "unready", func(p *corev1.Pod) bool { return !podRunningReady(p) })
		// Positive signal: 30 requests in a row that all miss the victim.
		waitFor(t, 15*time.Second, "30 requests in a row without "+victim, func() bool {
			seen, err := hostGet("http://"+net.JoinHostPort(ip, "80")+"/", 30)
			return err == nil && seen[victim] == 0 && len(seen) == 2
		})
	})
}

// TestNetworkPolicy: default deny, allow by pod label, allow by namespace
// label, and an egress rule, enforced by the agent.
func TestNetworkPolicy(t *testing.T) {
	c := cluster(t)
	ctx := context.Background()
	ns := c.namespace(t, "netpol")
	other := c.namespace(t, "netpol-other")
	unlabelled := c.namespace(t, "netpol-stranger")
	if _, err := c.client.CoreV1().Namespaces().Patch(ctx, other, "application/merge-patch+json",
		[]byte(`{"metadata":{"labels":{"team":"friends"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	srv := busyboxPod(ns, "srv", c.image, "sh", "-c", "mkdir -p /www && echo hi > /www/index.html && exec httpd -f -p 8080 -h /www")
	c.create(t, srv)
	p := c.waitPod(t, ns, "srv", 90*time.Second, "Running and Ready", podRunningReady)
	target := p.Status.PodIP + " 8080"
	n := 0
	try := func(t *testing.T, namespace string, labels map[string]string) string {
		n++
		// A new pod's address reaches the rules only once the kubelet has
		// reported it, which can be after the container started: try for
		// up to 5 s (a refusal is immediate, so denied clients finish fast).
		return c.runClient(t, namespace, fmt.Sprintf("client-%d", n), labels,
			`for i in $(seq 10); do printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 5 `+target+` && break; sleep 0.5; done; echo DONE`)
	}
	allowed := func(out string) bool { return strings.Contains(out, "\nhi\n") }
	pols := c.client.NetworkingV1().NetworkPolicies(ns)

	if out := try(t, ns, map[string]string{"role": "client"}); !allowed(out) {
		t.Fatalf("without policies the client is refused:\n%s", out)
	}
	if _, err := pols.Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "deny"},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if out := try(t, ns, map[string]string{"role": "client"}); allowed(out) {
		t.Errorf("default deny let the client in:\n%s", out)
	}
	if _, err := pols.Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "allow"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "srv"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
				{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}}},
				{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "friends"}}},
			}}},
		}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if out := try(t, ns, map[string]string{"role": "client"}); !allowed(out) {
		t.Errorf("allow by pod label refused the client:\n%s", out)
	}
	if out := try(t, ns, map[string]string{"role": "stranger"}); allowed(out) {
		t.Errorf("a pod without the label got in:\n%s", out)
	}
	if out := try(t, other, nil); !allowed(out) {
		t.Errorf("allow by namespace label refused the friend namespace:\n%s", out)
	}
	if out := try(t, unlabelled, map[string]string{"role": "client"}); allowed(out) {
		t.Errorf("a client in a namespace without the label got in (the pod selector is for the policy's own namespace):\n%s", out)
	}
	if _, err := pols.Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "egress"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{
				{IPBlock: &networkingv1.IPBlock{CIDR: "198.51.100.0/24"}}}}},
		}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if out := try(t, ns, map[string]string{"role": "client"}); allowed(out) {
		t.Errorf("an egress rule did not block the destination:\n%s", out)
	}
	// Cluster DNS stays reachable under an egress policy that does not
	// name it, as users expect.
	n++
	out := c.runClient(t, ns, fmt.Sprintf("client-%d", n), map[string]string{"role": "client"},
		"nslookup kubernetes.default.svc.cluster.local; echo DONE")
	if !strings.Contains(out, "10.43.0.1") {
		t.Errorf("a pod under an egress policy could not resolve kubernetes.default:\n%s", out)
	}
}
