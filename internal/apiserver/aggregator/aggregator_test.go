package aggregator

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiregv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/apiserver/authn"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/apiregistration"
)

// fakeObjects keeps the objects the aggregator reads and writes.
type fakeObjects struct {
	mu       sync.Mutex
	services map[string]*apiregv1.APIService
	svcs     map[string]*corev1.Service
	slices   map[string][]*discoveryv1.EndpointSlice
	cm       map[string]string
}

func newFake() *fakeObjects {
	return &fakeObjects{services: map[string]*apiregv1.APIService{}, svcs: map[string]*corev1.Service{}, slices: map[string][]*discoveryv1.EndpointSlice{}}
}

func (f *fakeObjects) APIServices(context.Context) ([]*apiregv1.APIService, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*apiregv1.APIService
	for _, a := range f.services {
		out = append(out, a.DeepCopy())
	}
	return out, nil
}

func (f *fakeObjects) Service(_ context.Context, ns, name string) (*corev1.Service, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s := f.svcs[ns+"/"+name]; s != nil {
		return s, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "services"}, name)
}

func (f *fakeObjects) EndpointSlices(_ context.Context, ns, name string) ([]*discoveryv1.EndpointSlice, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.slices[ns+"/"+name], nil
}

func (f *fakeObjects) CreateAPIService(_ context.Context, a *apiregv1.APIService) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	a = a.DeepCopy()
	apiregistration.Strategy{}.PrepareForCreate(context.Background(), a)
	f.services[a.Name] = a
	return nil
}

func (f *fakeObjects) DeleteAPIService(_ context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.services, name)
	return nil
}

func (f *fakeObjects) UpdateAPIServiceStatus(_ context.Context, a *apiregv1.APIService) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.services[a.Name] = a.DeepCopy()
	return nil
}

func (f *fakeObjects) EnsureConfigMap(_ context.Context, ns, name string, data map[string]string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cm = data
	return nil
}

func (f *fakeObjects) available(name string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.services[name]
	if a == nil {
		return "<none>"
	}
	c := apiregistration.Condition(a, apiregv1.Available)
	if c == nil {
		return "<no condition>"
	}
	return string(c.Status) + " " + c.Reason
}

func TestLocalAPIServices(t *testing.T) {
	f := newFake()
	a := New(Options{Objects: f, Clock: clocktesting.NewFakeClock(time.Now())})
	core, apps, crontabs := schema.GroupVersion{Version: "v1"}, schema.GroupVersion{Group: "apps", Version: "v1"}, schema.GroupVersion{Group: "stable.example.com", Version: "v1"}
	a.SetLocal([]schema.GroupVersion{core, apps}, []schema.GroupVersion{crontabs})
	if err := a.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	type row struct {
		Name, Label, Available string
		Group, Version         int32
	}
	rows := func() []row {
		var out []row
		for _, s := range f.services {
			out = append(out, row{s.Name, s.Labels[AutoManagedLabel], f.available(s.Name), s.Spec.GroupPriorityMinimum, s.Spec.VersionPriority})
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
		return out
	}
	want := []row{
		{"v1.", "onstart", "True Local", 18000, 1},
		{"v1.apps", "onstart", "True Local", 17800, 15},
		{"v1.stable.example.com", "true", "True Local", 1000, 100},
	}
	if diff := cmp.Diff(want, rows()); diff != "" {
		t.Errorf("APIServices (-want +got):\n%s", diff)
	}
	// The CRD goes: its APIService goes; the built-in ones stay.
	a.SetLocal([]schema.GroupVersion{core, apps}, nil)
	if err := a.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want[:2], rows()); diff != "" {
		t.Errorf("after the CRD went (-want +got):\n%s", diff)
	}
}

// extension is a TLS server answering discovery for custom.metrics.k8s.io
// and echoing the identity headers of other requests.
func extension(t *testing.T, discoveryStatus int) (*httptest.Server, string, int32) {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/apis/custom.metrics.k8s.io/v1beta2" {
			w.WriteHeader(discoveryStatus)
			_ = json.NewEncoder(w).Encode(metav1.APIResourceList{GroupVersion: "custom.metrics.k8s.io/v1beta2",
				APIResources: []metav1.APIResource{{Name: "pods/http_requests", Namespaced: true, Kind: "MetricValueList", Verbs: []string{"get"}}}})
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"user": r.Header.Get("X-Remote-User"), "groups": r.Header.Values("X-Remote-Group"),
			"extra": r.Header.Values("X-Remote-Extra-Scopes"), "authorization": r.Header.Get("Authorization"), "path": r.URL.Path})
	}))
	t.Cleanup(srv.Close)
	host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	return srv, host, int32(p)
}

func TestAvailability(t *testing.T) {
	remote := &apiregv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: "v1beta2.custom.metrics.k8s.io", ResourceVersion: "1"},
		Spec: apiregv1.APIServiceSpec{Group: "custom.metrics.k8s.io", Version: "v1beta2", InsecureSkipTLSVerify: true,
			Service: &apiregv1.ServiceReference{Namespace: "m", Name: "adapter", Port: ptr.To[int32](443)}, GroupPriorityMinimum: 100, VersionPriority: 100}}
	service := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "m", Name: "adapter"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: []corev1.ServicePort{{Name: "https", Port: 443}}}}
	slice := func(host string, port int32, ready bool) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{host}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)}}},
			Ports:     []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(port)}}}
	}
	_, okHost, okPort := extension(t, http.StatusOK)
	_, badHost, badPort := extension(t, http.StatusNotFound)
	tests := []struct {
		name    string
		svc     *corev1.Service
		slices  []*discoveryv1.EndpointSlice
		want    string
		proxied int // status of a proxied request
	}{
		{"no service", nil, nil, "False ServiceNotFound", http.StatusServiceUnavailable},
		{"wrong port", &corev1.Service{ObjectMeta: service.ObjectMeta, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "x", Port: 8443}}}}, nil,
			"False ServicePortError", http.StatusServiceUnavailable},
		{"no endpointslices", service, nil, "False EndpointsNotFound", http.StatusServiceUnavailable},
		{"no ready endpoint", service, []*discoveryv1.EndpointSlice{slice(okHost, okPort, false)}, "False MissingEndpoints", http.StatusServiceUnavailable},
		{"discovery fails", service, []*discoveryv1.EndpointSlice{slice(badHost, badPort, true)}, "False FailedDiscoveryCheck", http.StatusServiceUnavailable},
		{"passed", service, []*discoveryv1.EndpointSlice{slice(okHost, okPort, true)}, "True Passed", http.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			f.services[remote.Name] = remote.DeepCopy()
			if tc.svc != nil {
				f.svcs["m/adapter"] = tc.svc
			}
			f.slices["m/adapter"] = tc.slices
			var published []*metav1.APIResourceList
			a := New(Options{Objects: f, Clock: clocktesting.NewFakeClock(time.Now()), AuthenticationConfigMap: map[string]string{"k": "v"},
				Publish: func(d []*metav1.APIResourceList) { published = d }})
			_ = a.Sync(context.Background())
			if got := f.available(remote.Name); got != tc.want {
				t.Errorf("Available = %q, want %q", got, tc.want)
			}
			if diff := cmp.Diff(map[string]string{"k": "v"}, f.cm); diff != "" {
				t.Errorf("authentication ConfigMap (-want +got):\n%s", diff)
			}
			if wantDocs := tc.want == "True Passed"; wantDocs != (len(published) == 1) {
				t.Errorf("published %d documents", len(published))
			}
			r := httptest.NewRequest(http.MethodGet, "/apis/custom.metrics.k8s.io/v1beta2/namespaces/x/pods/*/http_requests", nil)
			r.Header.Set("Authorization", "Bearer secret")
			r.Header.Set("X-Remote-User", "forged")
			r = r.WithContext(authn.WithUser(r.Context(), &authn.User{Name: "alice", Groups: []string{"devs"}, Extra: map[string][]string{"scopes": {"a", "b"}}}))
			w := httptest.NewRecorder()
			if !a.ServeProxy(w, r) {
				t.Fatal("ServeProxy did not serve a remote group version")
			}
			if w.Code != tc.proxied {
				t.Fatalf("proxied status %d, want %d: %s", w.Code, tc.proxied, w.Body)
			}
			if tc.proxied == http.StatusOK {
				var got map[string]any
				_ = json.Unmarshal(w.Body.Bytes(), &got)
				want := map[string]any{"user": "alice", "groups": []any{"devs"}, "extra": []any{"a", "b"}, "authorization": "",
					"path": "/apis/custom.metrics.k8s.io/v1beta2/namespaces/x/pods/*/http_requests"}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("what the extension server saw (-want +got):\n%s", diff)
				}
			}
			if a.ServeProxy(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/apis/apps/v1/deployments", nil)) {
				t.Error("ServeProxy served a group version that is not remote")
			}
		})
	}
}
