package integration

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	genericserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	apiregv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	cmv1beta2 "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	emv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	"k8s.io/utils/ptr"

	kubeapiserver "github.com/skiff-sh/skiff/internal/apiserver"
	"github.com/skiff-sh/skiff/internal/controller/manager"
	"github.com/skiff-sh/skiff/internal/pki"
	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
	kubectltest "github.com/skiff-sh/skiff/internal/testing/kubectl"
)

// The extension API server of these tests listens on an address of an
// interface the test creates and removes (an empty bridge: this kernel
// has no dummy link type): EndpointSlice validation refuses loopback
// addresses, as upstream's does, so a Service endpoint cannot be
// 127.0.0.1. The address is the host's own, so no traffic leaves it.
func dummyAddress(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("skagg%04x", mrand.IntN(1<<16))
	ip := fmt.Sprintf("10.254.%d.%d", mrand.IntN(250)+1, mrand.IntN(250)+1)
	run := func(args ...string) {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	run("link", "add", name, "type", "bridge")
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", name).Run() })
	run("addr", "add", ip+"/32", "dev", name)
	run("link", "set", name, "up")
	return ip
}

// extensionServer is a hand-written extension API server serving
// custom.metrics.k8s.io/v1beta2 and external.metrics.k8s.io/v1beta1 as
// metrics adapters do, authenticating with k8s.io/apiserver's delegated
// authentication (so it trusts the front-proxy headers only over a client
// certificate from the requestheader CA Skiff publishes in
// kube-system/extension-apiserver-authentication, with an allowed name),
// and remembering the identity of the last request.
type extensionServer struct {
	addr  string // host:port
	caPEM []byte

	mu        sync.Mutex
	user      string
	groups    []string
	extra     map[string][]string
	podValue  string // each pod's http_requests
	extValue  string // queue_length
	watchNext chan struct{}
}

func startExtensionServer(t *testing.T, c *cluster, ip string) *extensionServer {
	t.Helper()
	cs := c.Clientset()
	// Delegated authentication exactly as servers built on k8s.io/apiserver
	// do it: the requestheader settings and CA from
	// kube-system/extension-apiserver-authentication, TokenReview for
	// tokens, the cluster CA for client certificates.
	authOpts := genericoptions.NewDelegatingAuthenticationOptions()
	authOpts.RemoteKubeConfigFile = c.Kubeconfig()
	authOpts.ClientCert.ClientCA = filepath.Join(c.PKI.Dir, pki.CACertFile)
	var authInfo genericserver.AuthenticationInfo
	if err := authOpts.ApplyTo(&authInfo, &genericserver.SecureServingInfo{}, nil); err != nil {
		t.Fatalf("delegated authentication: %v", err)
	}
	// The requestheader CA follows the ConfigMap through its own informer,
	// which a generic server runs as a post-start hook.
	runCtx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	go authInfo.RequestHeaderConfig.CAContentProvider.(dynamiccertificates.ControllerRunner).Run(runCtx, 1)
	eventually(t, 30*time.Second, "requestheader CA loaded from the ConfigMap", func() (bool, error) {
		_, ok := authInfo.RequestHeaderConfig.CAContentProvider.VerifyOptions()
		return ok, nil
	})
	caPEM, serving := servingPair(t, "adapter.monitoring.svc", ip)
	s := &extensionServer{caPEM: caPEM, podValue: "300", extValue: "10", watchNext: make(chan struct{})}
	ln, err := tls.Listen("tcp", net.JoinHostPort(ip, "0"), &tls.Config{
		Certificates: []tls.Certificate{serving}, ClientAuth: tls.RequestClientCert, // the authenticator verifies
		NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12,
	})
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	s.addr = ln.Addr().String()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /apis/custom.metrics.k8s.io/v1beta2", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: "custom.metrics.k8s.io/v1beta2",
			APIResources: []metav1.APIResource{{Name: "pods/http_requests", Namespaced: true, Kind: "MetricValueList", Verbs: []string{"get"}}}})
	})
	mux.HandleFunc("GET /apis/external.metrics.k8s.io/v1beta1", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: "external.metrics.k8s.io/v1beta1",
			APIResources: []metav1.APIResource{{Name: "queue_length", Namespaced: true, Kind: "ExternalMetricValueList", Verbs: []string{"get"}}}})
	})
	mux.HandleFunc("GET /apis/custom.metrics.k8s.io/v1beta2/namespaces/{ns}/pods/{name}/{metric}", func(w http.ResponseWriter, r *http.Request) {
		ns, name, metric := r.PathValue("ns"), r.PathValue("name"), r.PathValue("metric")
		if name == "echo" && metric == "exec" {
			s.echo(w, r)
			return
		}
		pods, err := cs.CoreV1().Pods(ns).List(r.Context(), metav1.ListOptions{LabelSelector: r.URL.Query().Get("labelSelector")})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		s.mu.Lock()
		value := resource.MustParse(s.podValue)
		s.mu.Unlock()
		list := &cmv1beta2.MetricValueList{TypeMeta: metav1.TypeMeta{Kind: "MetricValueList", APIVersion: "custom.metrics.k8s.io/v1beta2"}}
		for _, p := range pods.Items {
			if name != "*" && p.Name != name {
				continue
			}
			list.Items = append(list.Items, cmv1beta2.MetricValue{
				DescribedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: p.Name, APIVersion: "/v1"},
				Metric:          cmv1beta2.MetricIdentifier{Name: metric}, Timestamp: metav1.Now(), Value: value,
			})
		}
		writeJSON(w, list)
	})
	mux.HandleFunc("GET /apis/custom.metrics.k8s.io/v1beta2/namespaces/{ns}/pods", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") != "true" {
			http.NotFound(w, r)
			return
		}
		// Two events, the second only once the test has read the first:
		// the proxy must stream, not buffer.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = fmt.Fprintln(w, `{"type":"ADDED","object":{"kind":"MetricValue","metadata":{"name":"first"}}}`)
		w.(http.Flusher).Flush()
		select {
		case <-s.watchNext:
		case <-r.Context().Done():
			return
		}
		_, _ = fmt.Fprintln(w, `{"type":"ADDED","object":{"kind":"MetricValue","metadata":{"name":"second"}}}`)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	mux.HandleFunc("GET /apis/external.metrics.k8s.io/v1beta1/namespaces/{ns}/{metric}", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		value := resource.MustParse(s.extValue)
		s.mu.Unlock()
		writeJSON(w, &emv1beta1.ExternalMetricValueList{
			TypeMeta: metav1.TypeMeta{Kind: "ExternalMetricValueList", APIVersion: "external.metrics.k8s.io/v1beta1"},
			Items:    []emv1beta1.ExternalMetricValue{{MetricName: r.PathValue("metric"), Timestamp: metav1.Now(), Value: value}},
		})
	})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, ok, err := authInfo.Authenticator.AuthenticateRequest(r)
		if err != nil || !ok {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		if u := resp.User; u.GetName() != "system:kube-aggregator" { // not the availability probe
			s.mu.Lock()
			s.user, s.groups, s.extra = u.GetName(), u.GetGroups(), u.GetExtra()
			s.mu.Unlock()
		}
		mux.ServeHTTP(w, r)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

// echo answers an upgrade (as exec does) and echoes what it reads.
func (s *extensionServer) echo(w http.ResponseWriter, r *http.Request) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), "skiff-echo") {
		http.Error(w, "upgrade required", http.StatusBadRequest)
		return
	}
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	_, _ = rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: skiff-echo\r\n\r\n")
	_ = rw.Flush()
	line, err := rw.ReadString('\n')
	if err != nil {
		return
	}
	_, _ = rw.WriteString("echo: " + line)
	_ = rw.Flush()
}

func (s *extensionServer) identity() (string, []string, map[string][]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.user, s.groups, s.extra
}

func writeJSON(w http.ResponseWriter, obj any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(obj)
}

// servingPair is a CA and a serving certificate it signs for dnsName and ip.
func servingPair(t *testing.T, dnsName, ip string) ([]byte, tls.Certificate) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "adapter-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: dnsName}, DNSNames: []string{dnsName},
		IPAddresses: []net.IP{net.ParseIP(ip)}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// aggKubectl runs the embedded kubectl: its stdout, or stdout and stderr
// when it fails.
func aggKubectl(t *testing.T, kubeconfig string, args ...string) (out string, err error) {
	t.Helper()
	stdout, stderr, err := kubectltest.Run(t, kubeconfig, "", args...)
	if err != nil {
		return stdout + stderr, err
	}
	return stdout, nil
}

// apiServiceRow is the row of `kubectl get apiservices` naming name,
// with its columns split.
func apiServiceRow(t *testing.T, kubeconfig, name string) []string {
	t.Helper()
	out, err := aggKubectl(t, kubeconfig, "get", "apiservices")
	if err != nil {
		t.Fatalf("kubectl get apiservices: %v\n%s", err, out)
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && f[0] == name {
			return f
		}
	}
	return nil
}

// aggregationCluster is an API server with the front proxy of `skiff
// server` (pki/front-proxy-*: its own requestheader CA).
func aggregationCluster(t *testing.T) *cluster {
	t.Helper()
	fp, err := (&pki.Bundle{Dir: t.TempDir()}).EnsureFrontProxy(pki.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return testapiserver.StartWithOptions(t, testapiserver.Options{Configure: func(cfg *kubeapiserver.Config) {
		cfg.Aggregation = &kubeapiserver.AggregationConfig{ProxyClientCert: fp.Client, RequestHeaderCAPEM: fp.CAPEM}
	}})
}

// registerAdapter publishes the extension server as Service
// monitoring/adapter (port 443 → its port, one EndpointSlice) and
// registers its two group versions by APIServices with its CA bundle.
func registerAdapter(t *testing.T, cs kubernetes.Interface, c *cluster, ext *extensionServer) {
	t.Helper()
	ctx := testCtx(t, 30*time.Second)
	host, portStr, _ := net.SplitHostPort(ext.addr)
	var port int32
	fmt.Sscan(portStr, &port)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "monitoring"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Services("monitoring").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "adapter"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(port)}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.DiscoveryV1().EndpointSlices("monitoring").Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "adapter-1", Labels: map[string]string{discoveryv1.LabelServiceName: "adapter"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{host}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, gv := range []struct{ group, version string }{{"custom.metrics.k8s.io", "v1beta2"}, {"external.metrics.k8s.io", "v1beta1"}} {
		a := &apiregv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: gv.version + "." + gv.group},
			Spec: apiregv1.APIServiceSpec{Group: gv.group, Version: gv.version, CABundle: ext.caPEM,
				Service:              &apiregv1.ServiceReference{Namespace: "monitoring", Name: "adapter", Port: ptr.To[int32](443)},
				GroupPriorityMinimum: 100, VersionPriority: 200}}
		body, _ := json.Marshal(a)
		if err := cs.Discovery().RESTClient().Post().AbsPath("/apis/apiregistration.k8s.io/v1/apiservices").
			SetHeader("Content-Type", "application/json").Body(body).Do(ctx).Error(); err != nil {
			t.Fatalf("create APIService %s: %v", a.Name, err)
		}
	}
	for _, name := range []string{"v1beta2.custom.metrics.k8s.io", "v1beta1.external.metrics.k8s.io"} {
		eventually(t, 30*time.Second, "APIService "+name+" Available in kubectl get apiservices", func() (bool, error) {
			row := apiServiceRow(t, c.Kubeconfig(), name)
			return len(row) >= 3 && row[1] == "monitoring/adapter" && row[2] == "True", nil
		})
	}
}

// waitAuthConfigMap waits for kube-system/extension-apiserver-authentication.
func waitAuthConfigMap(t *testing.T, cs kubernetes.Interface) *corev1.ConfigMap {
	t.Helper()
	var cm *corev1.ConfigMap
	eventually(t, 30*time.Second, "kube-system/extension-apiserver-authentication", func() (bool, error) {
		got, err := cs.CoreV1().ConfigMaps("kube-system").Get(context.Background(), "extension-apiserver-authentication", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		cm = got
		return true, nil
	})
	return cm
}

// TestAPIAggregation: an extension server registered by APIServices is
// served through the API server: kubectl get --raw through it with the
// caller's identity in the front-proxy headers, watches stream and
// upgrades pass, `kubectl get apiservices` shows it Available beside the
// Local built-in group versions; without a ready endpoint it is
// Unavailable (MissingEndpoints) and its requests get 503, and it comes
// back with its endpoint.
func TestAPIAggregation(t *testing.T) {
	c := aggregationCluster(t)
	cs := c.Clientset()
	ctx := testCtx(t, 3*time.Minute)
	cm := waitAuthConfigMap(t, cs)
	for _, key := range []string{"requestheader-client-ca-file", "requestheader-allowed-names", "requestheader-username-headers",
		"requestheader-group-headers", "requestheader-extra-headers-prefix", "requestheader-uid-headers"} {
		if cm.Data[key] == "" {
			t.Errorf("extension-apiserver-authentication has no %s", key)
		}
	}
	ext := startExtensionServer(t, c, dummyAddress(t))
	_ = cm
	registerAdapter(t, cs, c, ext)

	t.Run("local APIServices", func(t *testing.T) {
		for _, name := range []string{"v1.", "v1.apps", "v1.apiregistration.k8s.io", "v1beta1.metrics.k8s.io"} {
			if diff := strings.Join(apiServiceRow(t, c.Kubeconfig(), name)[1:3], " "); diff != "Local True" {
				t.Errorf("%s: SERVICE AVAILABLE = %q, want \"Local True\"", name, diff)
			}
		}
	})

	t.Run("a CRD's group version gets a Local APIService", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "crd.yaml")
		if err := os.WriteFile(f, []byte(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: crontabs.stable.example.com
spec:
  group: stable.example.com
  scope: Namespaced
  names: {plural: crontabs, singular: crontab, kind: CronTab}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := aggKubectl(t, c.Kubeconfig(), "apply", "-f", f); err != nil {
			t.Fatalf("kubectl apply: %v\n%s", err, out)
		}
		eventually(t, 30*time.Second, "APIService v1.stable.example.com Local and Available", func() (bool, error) {
			row := apiServiceRow(t, c.Kubeconfig(), "v1.stable.example.com")
			return len(row) >= 3 && row[1] == "Local" && row[2] == "True", nil
		})
		if out, err := aggKubectl(t, c.Kubeconfig(), "delete", "-f", f); err != nil {
			t.Fatalf("kubectl delete: %v\n%s", err, out)
		}
		eventually(t, 30*time.Second, "APIService v1.stable.example.com gone with its CRD", func() (bool, error) {
			return apiServiceRow(t, c.Kubeconfig(), "v1.stable.example.com") == nil, nil
		})
	})

	t.Run("get --raw with the caller's identity", func(t *testing.T) {
		ns := newNamespace(t, cs)
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p1", Labels: map[string]string{"app": "x"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		out, err := aggKubectl(t, c.Kubeconfig(), "get", "--raw", "/apis/custom.metrics.k8s.io/v1beta2/namespaces/"+ns+"/pods/*/http_requests?labelSelector=app%3Dx",
			"--as", "alice", "--as-group", "devs", "--as-group", "system:authenticated", "--as-uid", "u-1")
		if err != nil {
			t.Fatalf("kubectl get --raw: %v\n%s", err, out)
		}
		var list cmv1beta2.MetricValueList
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			t.Fatalf("decode %q: %v", out, err)
		}
		if len(list.Items) != 1 || list.Items[0].DescribedObject.Name != "p1" || list.Items[0].Value.String() != "300" {
			t.Errorf("metric values: %+v", list.Items)
		}
		user, groups, _ := ext.identity()
		if user != "alice" || !slices.Contains(groups, "devs") {
			t.Errorf("extension server saw user %q groups %v, want alice in devs", user, groups)
		}
		out, err = aggKubectl(t, c.Kubeconfig(), "get", "--raw", "/apis/external.metrics.k8s.io/v1beta1/namespaces/"+ns+"/queue_length")
		if err != nil || !strings.Contains(out, `"value":"10"`) {
			t.Errorf("external metric: %v %s", err, out)
		}
		user, groups, _ = ext.identity()
		if user != "system:admin" || !slices.Contains(groups, "system:masters") {
			t.Errorf("extension server saw user %q groups %v, want system:admin in system:masters", user, groups)
		}
	})

	t.Run("forged headers without the front-proxy certificate", func(t *testing.T) {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(ext.caPEM)
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "adapter.monitoring.svc"}}}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+ext.addr+"/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_length", nil)
		req.Header.Set("X-Remote-User", "mallory")
		req.Header.Set("X-Remote-Group", "system:masters")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if user, groups, _ := ext.identity(); user != "system:anonymous" || slices.Contains(groups, "system:masters") {
			t.Errorf("a direct request with forged headers was %q in %v, want system:anonymous", user, groups)
		}
	})

	t.Run("discovery lists the extension's group versions", func(t *testing.T) {
		out, err := aggKubectl(t, c.Kubeconfig(), "api-versions")
		if err != nil {
			t.Fatalf("api-versions: %v %s", err, out)
		}
		for _, gv := range []string{"custom.metrics.k8s.io/v1beta2", "external.metrics.k8s.io/v1beta1", "apiregistration.k8s.io/v1"} {
			if !strings.Contains(out, gv+"\n") {
				t.Errorf("kubectl api-versions lacks %s:\n%s", gv, out)
			}
		}
		out, err = aggKubectl(t, c.Kubeconfig(), "api-resources", "--api-group", "external.metrics.k8s.io")
		if err != nil || !strings.Contains(out, "queue_length") {
			t.Errorf("kubectl api-resources --api-group external.metrics.k8s.io: %v\n%s", err, out)
		}
	})

	t.Run("watch streams", func(t *testing.T) {
		rt, err := transportFor(c)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.Config.Host+"/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods?watch=true", nil)
		resp, err := (&http.Client{Transport: rt}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		r := bufio.NewReader(resp.Body)
		first, err := r.ReadString('\n')
		if err != nil || !strings.Contains(first, `"first"`) {
			t.Fatalf("first event %q: %v", first, err)
		}
		close(ext.watchNext) // the server sends the second only now
		second, err := r.ReadString('\n')
		if err != nil || !strings.Contains(second, `"second"`) {
			t.Fatalf("second event %q: %v", second, err)
		}
	})

	t.Run("upgrade passes", func(t *testing.T) {
		tc, err := tlsConfigFor(c)
		if err != nil {
			t.Fatal(err)
		}
		tc.NextProtos = []string{"http/1.1"}
		conn, err := tls.Dial("tcp", strings.TrimPrefix(c.Config.Host, "https://"), tc)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
		fmt.Fprintf(conn, "GET /apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/echo/exec HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: skiff-echo\r\n\r\n")
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("status %d, want 101", resp.StatusCode)
		}
		fmt.Fprintf(conn, "ping\n")
		line, err := br.ReadString('\n')
		if err != nil || line != "echo: ping\n" {
			t.Fatalf("echo %q: %v", line, err)
		}
	})

	t.Run("unavailable without endpoints: 503", func(t *testing.T) {
		slice, err := cs.DiscoveryV1().EndpointSlices("monitoring").Get(ctx, "adapter-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		endpoints := slice.Endpoints
		slice.Endpoints = nil
		if slice, err = cs.DiscoveryV1().EndpointSlices("monitoring").Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "APIService Unavailable (MissingEndpoints)", func() (bool, error) {
			row := apiServiceRow(t, c.Kubeconfig(), "v1beta2.custom.metrics.k8s.io")
			return len(row) >= 4 && strings.Join(row[2:4], " ") == "False (MissingEndpoints)", nil
		})
		out, err := aggKubectl(t, c.Kubeconfig(), "get", "--raw", "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/*/http_requests")
		if err == nil || !strings.Contains(out, "ServiceUnavailable") {
			t.Errorf("kubectl get --raw while unavailable: err %v, output %q; want ServiceUnavailable", err, out)
		}
		a, err := cs.Discovery().RESTClient().Get().AbsPath("/apis/apiregistration.k8s.io/v1/apiservices/v1beta2.custom.metrics.k8s.io").DoRaw(ctx)
		if err != nil || !strings.Contains(string(a), `endpointslices for service/adapter in \"monitoring\" have no addresses with port name \"https\"`) {
			t.Errorf("APIService status: %v %s", err, a)
		}
		slice.Endpoints = endpoints
		if _, err := cs.DiscoveryV1().EndpointSlices("monitoring").Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "APIService Available again", func() (bool, error) {
			row := apiServiceRow(t, c.Kubeconfig(), "v1beta2.custom.metrics.k8s.io")
			return len(row) >= 3 && row[2] == "True", nil
		})
		if out, err := aggKubectl(t, c.Kubeconfig(), "get", "--raw", "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/*/http_requests"); err != nil {
			t.Errorf("kubectl get --raw once available again: %v %s", err, out)
		}
	})
}

// TestHPACustomAndExternalMetrics: HPAs scale Deployments (on simulated
// nodes) on a Pods metric (custom.metrics.k8s.io: every pod reports 300
// against an average target of 100: 1 → 3, the maximum) and on an
// External metric (external.metrics.k8s.io: 10 against 5 per pod: 1 → 2),
// both read through the aggregator from the test's extension server.
func TestHPACustomAndExternalMetrics(t *testing.T) {
	c := aggregationCluster(t)
	cs := c.Clientset()
	ctx := testCtx(t, 4*time.Minute)
	waitAuthConfigMap(t, cs)
	ext := startExtensionServer(t, c, dummyAddress(t))
	registerAdapter(t, cs, c, ext)
	runNodes(t, c, 2)
	runScheduler(t, c)
	opts := e2eControllerOptions()
	opts.HorizontalPodAutoscalerSyncPeriod = time.Second
	m, err := manager.New(c.Config, manager.Options{Controller: opts, Metrics: e2eMetrics})
	if err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Start(mctx) }()
	t.Cleanup(func() { cancel(); <-done })

	for _, tc := range []struct {
		name   string
		metric autoscalingv2.MetricSpec
		want   int32
		// current is the metric's current value in the status: each pod's
		// 300; the queue's 10 over the status replicas (1, then 2).
		current []string
		check   func(autoscalingv2.MetricStatus) string
	}{
		{"pods", autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: "http_requests"},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("100"))}}},
			3, []string{"300"}, func(s autoscalingv2.MetricStatus) string {
				if s.Pods == nil || s.Pods.Current.AverageValue == nil {
					return "no pods status"
				}
				return s.Pods.Current.AverageValue.String()
			}},
		{"external", autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: "queue_length"},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("5"))}}},
			2, []string{"10", "5"}, func(s autoscalingv2.MetricStatus) string {
				if s.External == nil || s.External.Current.AverageValue == nil {
					return "no external status"
				}
				return s.External.Current.AverageValue.String()
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNamespace(t, cs)
			if _, err := cs.AppsV1().Deployments(ns).Create(ctx, e2eDeployment("web", 1, 0), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			waitAvailable(t, cs, ns, "web", 1, 60*time.Second)
			if _, err := cs.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, &autoscalingv2.HorizontalPodAutoscaler{
				ObjectMeta: metav1.ObjectMeta{Name: "web"},
				Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
					ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
					MinReplicas:    ptr.To[int32](1), MaxReplicas: 3, Metrics: []autoscalingv2.MetricSpec{tc.metric},
				}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			waitAvailable(t, cs, ns, "web", tc.want, 90*time.Second)
			hpa, err := cs.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var active *autoscalingv2.HorizontalPodAutoscalerCondition
			for i := range hpa.Status.Conditions {
				if hpa.Status.Conditions[i].Type == autoscalingv2.ScalingActive {
					active = &hpa.Status.Conditions[i]
				}
			}
			if active == nil || active.Status != corev1.ConditionTrue || active.Reason != "ValidMetricFound" {
				t.Errorf("ScalingActive: %+v", active)
			}
			if len(hpa.Status.CurrentMetrics) != 1 {
				t.Fatalf("current metrics: %+v", hpa.Status.CurrentMetrics)
			}
			if got := tc.check(hpa.Status.CurrentMetrics[0]); !slices.Contains(tc.current, got) {
				t.Errorf("current %s metric %q, want one of %q", tc.name, got, tc.current)
			}
			t.Logf("%s: %s", tc.name, active.Message)
		})
	}

	// Any scale subresource: a custom resource's, found through discovery,
	// scaled on the external metric (10 against 5 per replica: 1 → 2).
	t.Run("custom resource", func(t *testing.T) {
		ns := newNamespace(t, cs)
		apix := apiextensionsclient.NewForConfigOrDie(c.Config)
		crd := &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: "workers.example.com"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
				Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "workers", Singular: "worker", Kind: "Worker"},
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
					Name: "v1", Served: true, Storage: true,
					Subresources: &apiextensionsv1.CustomResourceSubresources{
						Status: &apiextensionsv1.CustomResourceSubresourceStatus{},
						Scale: &apiextensionsv1.CustomResourceSubresourceScale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas",
							LabelSelectorPath: ptr.To(".status.selector")},
					},
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
						Type: "object",
						Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"replicas": {Type: "integer"}}},
							"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
								"replicas": {Type: "integer"}, "selector": {Type: "string"}}},
						},
					}},
				}},
			},
		}
		if _, err := apix.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = apix.ApiextensionsV1().CustomResourceDefinitions().Delete(context.Background(), crd.Name, metav1.DeleteOptions{})
		})
		gvr := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "workers"}
		dyn := dynamic.NewForConfigOrDie(c.Config)
		var w *unstructured.Unstructured
		eventually(t, 10*time.Second, "worker created", func() (bool, error) {
			var err error
			w, err = dyn.Resource(gvr).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "example.com/v1", "kind": "Worker", "metadata": map[string]any{"name": "w"},
				"spec": map[string]any{"replicas": int64(1)},
			}}, metav1.CreateOptions{})
			return err == nil, nil
		})
		// What the worker's own controller would report.
		w.Object["status"] = map[string]any{"replicas": int64(1), "selector": "app=worker"}
		if _, err := dyn.Resource(gvr).Namespace(ns).UpdateStatus(ctx, w, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, &autoscalingv2.HorizontalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{Name: "w"},
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "example.com/v1", Kind: "Worker", Name: "w"},
				MinReplicas:    ptr.To[int32](1), MaxReplicas: 3,
				Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
					Metric: autoscalingv2.MetricIdentifier{Name: "queue_length"},
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("5"))}}}},
			}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 60*time.Second, "the worker scaled to 2 through its scale subresource", func() (bool, error) {
			got, err := dyn.Resource(gvr).Namespace(ns).Get(ctx, "w", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			n, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicas")
			return n == 2, nil
		})
		hpa, err := cs.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "w", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if hpa.Status.DesiredReplicas != 2 || hpa.Status.LastScaleTime == nil {
			t.Errorf("HPA status %+v; want desired 2 and a scale time", hpa.Status)
		}
	})
}

func tlsConfigFor(c *cluster) (*tls.Config, error) {
	pair, err := tls.X509KeyPair(c.Config.TLSClientConfig.CertData, c.Config.TLSClientConfig.KeyData)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.Config.TLSClientConfig.CAData)
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}

func transportFor(c *cluster) (http.RoundTripper, error) {
	tc, err := tlsConfigFor(c)
	if err != nil {
		return nil, err
	}
	return &http.Transport{TLSClientConfig: tc}, nil
}
