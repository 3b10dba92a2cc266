// Package aggregator is Skiff's API aggregation layer (upstream's
// kube-aggregator, re-stated): APIServices name who serves a group
// version. Local ones are this server's (one per built-in or custom group
// version, kept by Sync as upstream's autoregister and crdregistration
// controllers keep them); a remote one names a Service, and every request
// under /apis/<group>/<version> is proxied to a ready endpoint of it with
// the caller's identity in front-proxy headers (X-Remote-User,
// X-Remote-Uid, X-Remote-Group, X-Remote-Extra-*) over the front-proxy
// client certificate. The availability loop probes each remote APIService
// (service, port, endpoints, then a GET of its discovery document) and
// writes its Available condition with upstream's reasons; a remote group
// version that is not Available answers 503. The discovery document
// fetched by the probe is what the server publishes for the group
// version, so kubectl sees the extension server's resources.
package aggregator

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/transport"
	"k8s.io/klog/v2"
	apiregv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/apiserver/authn"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/apiregistration"
)

// Objects is what the aggregator reads and writes through the API
// server's stores.
type Objects interface {
	APIServices(ctx context.Context) ([]*apiregv1.APIService, error)
	Service(ctx context.Context, ns, name string) (*corev1.Service, error)
	// EndpointSlices are those labelled kubernetes.io/service-name=name.
	EndpointSlices(ctx context.Context, ns, name string) ([]*discoveryv1.EndpointSlice, error)
	CreateAPIService(ctx context.Context, a *apiregv1.APIService) error
	DeleteAPIService(ctx context.Context, name string) error
	// UpdateAPIServiceStatus writes a's status if a's resourceVersion is
	// still current.
	UpdateAPIServiceStatus(ctx context.Context, a *apiregv1.APIService) error
	// EnsureConfigMap creates or updates ns/name to hold exactly data.
	EnsureConfigMap(ctx context.Context, ns, name string, data map[string]string) error
}

// Options configure an Aggregator.
type Options struct {
	Objects Objects
	// ProxyClientCert is presented to extension servers (front-proxy
	// client); nil presents none, and extension servers then see no
	// trusted identity.
	ProxyClientCert *tls.Certificate
	// GetProxyClientCertificate, when set, gives it at each handshake
	// instead (a certificate renewed on disk is presented to new
	// connections).
	GetProxyClientCertificate func(*tls.CertificateRequestInfo) (*tls.Certificate, error)
	// AuthenticationConfigMap, when set, is kept as
	// kube-system/extension-apiserver-authentication.
	AuthenticationConfigMap map[string]string
	// Publish receives the discovery documents of the Available remote
	// group versions whenever they or an APIService's priorities change.
	Publish func(remote []*metav1.APIResourceList)
	Clock   clock.WithTicker
	// Resolver picks the endpoint a request goes to (the server passes
	// servicerouting's, shared with webhooks); nil: the aggregator's own
	// pick from Objects.
	Resolver interface {
		Resolve(ctx context.Context, ns, name string, port int32) (*url.URL, error)
	}
	// Interval between syncs (default 1s: the loop reads caches); a
	// remote APIService's discovery document is fetched every ProbeInterval
	// (default 10s) and whenever its endpoint changes.
	Interval, ProbeInterval time.Duration
}

// Labels of APIServices the aggregator manages (upstream's autoregister
// label): onstart for built-in group versions, true for custom ones.
const (
	AutoManagedLabel = "kube-aggregator.kubernetes.io/automanaged"
)

// Aggregator routes remote group versions and keeps APIServices.
type Aggregator struct {
	opts   Options
	routes atomic.Pointer[map[schema.GroupVersion]*route]

	mu sync.Mutex
	// builtin and custom are the locally served group versions.
	builtin, custom []schema.GroupVersion
	// priorities of the APIServices at the last sync.
	priorities map[schema.GroupVersion]priority
	// probes by APIService name.
	probes map[string]*probe
	kick   chan struct{}
}

// route is how one remote group version is served right now.
type route struct {
	name      string
	available bool
	ns, svc   string
	port      int32
	transport *http.Transport
}

// probe is what the availability loop remembers of a remote APIService.
type probe struct {
	key       string // spec fingerprint; a change rebuilds the transport
	transport *http.Transport
	endpoint  string
	last      time.Time
	err       error
	doc       *metav1.APIResourceList
	// docChanged: doc changed since it was last published.
	docChanged bool
}

// New returns an Aggregator; Start runs its loop.
func New(opts Options) *Aggregator {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Interval == 0 {
		opts.Interval = time.Second
	}
	if opts.ProbeInterval == 0 {
		opts.ProbeInterval = 10 * time.Second
	}
	a := &Aggregator{opts: opts, probes: map[string]*probe{}, kick: make(chan struct{}, 1)}
	empty := map[schema.GroupVersion]*route{}
	a.routes.Store(&empty)
	return a
}

// SetLocal says which group versions this server serves itself (built-in
// and custom); each gets a Local APIService.
func (a *Aggregator) SetLocal(builtin, custom []schema.GroupVersion) {
	a.mu.Lock()
	a.builtin, a.custom = builtin, custom
	a.mu.Unlock()
	a.Kick()
}

// Kick asks for a sync soon (an APIService, Service or EndpointSlice
// changed).
func (a *Aggregator) Kick() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// Start syncs every Interval until ctx is done.
func (a *Aggregator) Start(ctx context.Context) error {
	t := a.opts.Clock.NewTicker(a.opts.Interval)
	defer t.Stop()
	for {
		if err := a.Sync(ctx); err != nil && ctx.Err() == nil {
			klog.FromContext(ctx).V(2).Info("API aggregation sync", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		case <-a.kick:
		}
	}
}

// Name is the APIService name of a group version ("v1." for core).
func Name(gv schema.GroupVersion) string { return gv.Version + "." + gv.Group }

// Sync does one round: the Local APIServices, the authentication
// ConfigMap, then each remote APIService's availability, its route and
// its discovery document.
func (a *Aggregator) Sync(ctx context.Context) error {
	var errs []error
	if a.opts.AuthenticationConfigMap != nil {
		if err := a.opts.Objects.EnsureConfigMap(ctx, metav1.NamespaceSystem, "extension-apiserver-authentication", a.opts.AuthenticationConfigMap); err != nil {
			errs = append(errs, fmt.Errorf("extension-apiserver-authentication: %w", err))
		}
	}
	list, err := a.opts.Objects.APIServices(ctx)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	errs = append(errs, a.syncLocal(ctx, list)...)
	reorder := a.setPriorities(list)

	// Remote APIServices are checked side by side: one that does not
	// answer (5 s) holds up no other.
	type result struct {
		gv  schema.GroupVersion
		r   *route
		doc *metav1.APIResourceList
		err error
	}
	var remote []*apiregv1.APIService
	seen := map[string]bool{}
	for _, svc := range list {
		if svc.Spec.Service != nil && svc.DeletionTimestamp == nil {
			remote = append(remote, svc)
			seen[svc.Name] = true
		}
	}
	results := make([]result, len(remote))
	var wg sync.WaitGroup
	for i, svc := range remote {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, doc, err := a.syncRemote(ctx, svc)
			results[i] = result{schema.GroupVersion{Group: svc.Spec.Group, Version: svc.Spec.Version}, r, doc, err}
		}()
	}
	wg.Wait()
	routes := map[schema.GroupVersion]*route{}
	var docs []*metav1.APIResourceList
	for _, res := range results {
		if res.err != nil {
			errs = append(errs, res.err)
		}
		routes[res.gv] = res.r
		if res.r.available && res.doc != nil {
			docs = append(docs, res.doc)
		}
	}
	a.mu.Lock()
	for name, p := range a.probes {
		if !seen[name] {
			if p.transport != nil {
				p.transport.CloseIdleConnections()
			}
			delete(a.probes, name)
		}
	}
	a.mu.Unlock()
	sort.Slice(docs, func(i, j int) bool { return docs[i].GroupVersion < docs[j].GroupVersion })
	old := a.routes.Swap(&routes)
	if same := sameDocs(*old, routes, a); a.opts.Publish != nil && (!same || reorder) {
		a.opts.Publish(docs)
	}
	return errors.Join(errs...)
}

// sameDocs reports whether nothing published changed: the same Available
// group versions with the same documents.
func sameDocs(old, cur map[schema.GroupVersion]*route, a *Aggregator) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	key := func(m map[schema.GroupVersion]*route) map[schema.GroupVersion]bool {
		out := map[schema.GroupVersion]bool{}
		for gv, r := range m {
			if r.available {
				out[gv] = true
			}
		}
		return out
	}
	if !reflect.DeepEqual(key(old), key(cur)) {
		return false
	}
	for _, p := range a.probes {
		if p.docChanged {
			p.docChanged = false
			return false
		}
	}
	return true
}

func (a *Aggregator) syncLocal(ctx context.Context, list []*apiregv1.APIService) []error {
	a.mu.Lock()
	want := map[string]string{}
	var order []schema.GroupVersion
	for _, gv := range a.builtin {
		want[Name(gv)] = "onstart"
		order = append(order, gv)
	}
	for _, gv := range a.custom {
		if _, ok := want[Name(gv)]; !ok {
			want[Name(gv)] = "true"
			order = append(order, gv)
		}
	}
	a.mu.Unlock()
	if len(order) == 0 {
		return nil // not told yet
	}
	have := map[string]*apiregv1.APIService{}
	for _, s := range list {
		have[s.Name] = s
	}
	var errs []error
	for _, gv := range order {
		name := Name(gv)
		if have[name] != nil {
			continue
		}
		err := a.opts.Objects.CreateAPIService(ctx, &apiregv1.APIService{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{AutoManagedLabel: want[name]}},
			Spec: apiregv1.APIServiceSpec{Group: gv.Group, Version: gv.Version,
				GroupPriorityMinimum: groupPriority(gv), VersionPriority: versionPriority(gv)},
		})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			errs = append(errs, fmt.Errorf("create APIService %s: %w", name, err))
		}
	}
	// A custom group version no longer served loses its APIService.
	for _, s := range list {
		if s.Labels[AutoManagedLabel] == "true" && s.Spec.Service == nil && want[s.Name] == "" && s.DeletionTimestamp == nil {
			if err := a.opts.Objects.DeleteAPIService(ctx, s.Name); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("delete APIService %s: %w", s.Name, err))
			}
		}
	}
	return errs
}

// syncRemote checks one remote APIService, writes its Available
// condition when it changed and returns its route and, when the probe
// passed, its discovery document.
func (a *Aggregator) syncRemote(ctx context.Context, svc *apiregv1.APIService) (*route, *metav1.APIResourceList, error) {
	ref := svc.Spec.Service
	port := int32(443)
	if ref.Port != nil {
		port = *ref.Port
	}
	r := &route{name: svc.Name, ns: ref.Namespace, svc: ref.Name, port: port}
	a.mu.Lock()
	p := a.probes[svc.Name]
	key := fmt.Sprintf("%s/%s:%d %t %x", ref.Namespace, ref.Name, port, svc.Spec.InsecureSkipTLSVerify, svc.Spec.CABundle)
	if p == nil || p.key != key {
		if p != nil && p.transport != nil {
			p.transport.CloseIdleConnections()
		}
		p = &probe{key: key}
		a.probes[svc.Name] = p
	}
	a.mu.Unlock()
	if p.transport == nil {
		t, err := a.transportFor(svc)
		if err != nil {
			return r, nil, a.setAvailable(ctx, svc, apiregv1.ConditionFalse, "FailedDiscoveryCheck", err.Error())
		}
		p.transport = t
	}
	r.transport = p.transport

	endpoint, err := resolve(ctx, a.opts.Objects, ref.Namespace, ref.Name, port)
	if err == nil {
		endpoint, err = a.endpoint(ctx, ref.Namespace, ref.Name, port)
	}
	if err != nil {
		var re *resolveError
		status := apiregv1.ConditionFalse
		reason, msg := "FailedDiscoveryCheck", err.Error()
		if errors.As(err, &re) {
			reason = re.reason
			if strings.HasSuffix(reason, "AccessError") {
				status = apiregv1.ConditionUnknown
			}
		}
		p.endpoint = ""
		return r, nil, a.setAvailable(ctx, svc, status, reason, msg)
	}
	now := a.opts.Clock.Now()
	if endpoint != p.endpoint && p.err == nil && p.doc != nil && now.Sub(p.last) < a.opts.ProbeInterval {
		// another endpoint of the same service: no need to probe again
		p.endpoint = endpoint
	}
	if p.endpoint != endpoint || now.Sub(p.last) >= a.opts.ProbeInterval || p.last.IsZero() {
		p.endpoint, p.last = endpoint, now
		doc, err := a.fetchDiscovery(ctx, p.transport, endpoint, svc)
		a.mu.Lock()
		p.err = err
		if err == nil && !reflect.DeepEqual(doc, p.doc) {
			p.doc, p.docChanged = doc, true
		}
		a.mu.Unlock()
	}
	if p.err != nil {
		return r, nil, a.setAvailable(ctx, svc, apiregv1.ConditionFalse, "FailedDiscoveryCheck", p.err.Error())
	}
	r.available = true
	return r, p.doc, a.setAvailable(ctx, svc, apiregv1.ConditionTrue, "Passed", "all checks passed")
}

// setAvailable writes the Available condition if it changed.
func (a *Aggregator) setAvailable(ctx context.Context, svc *apiregv1.APIService, status apiregv1.ConditionStatus, reason, msg string) error {
	if c := apiregistration.Condition(svc, apiregv1.Available); c != nil && c.Status == status && c.Reason == reason && c.Message == msg {
		return nil
	}
	next := svc.DeepCopy()
	apiregistration.SetCondition(next, apiregv1.APIServiceCondition{Type: apiregv1.Available, Status: status,
		Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(a.opts.Clock.Now())})
	klog.FromContext(ctx).V(2).Info("APIService availability", "name", svc.Name, "status", status, "reason", reason, "message", msg)
	if err := a.opts.Objects.UpdateAPIServiceStatus(ctx, next); err != nil {
		return fmt.Errorf("update APIService %s status: %w", svc.Name, err)
	}
	return nil
}

// transportFor dials the extension server: its caBundle (or no
// verification), the service's DNS name as server name, the front-proxy
// client certificate; HTTP/1.1 so that upgrades pass.
func (a *Aggregator) transportFor(svc *apiregv1.APIService) (*http.Transport, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: svc.Spec.Service.Name + "." + svc.Spec.Service.Namespace + ".svc"}
	if svc.Spec.InsecureSkipTLSVerify {
		tc.InsecureSkipVerify = true
	} else if len(svc.Spec.CABundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(svc.Spec.CABundle) {
			return nil, errors.New("spec.caBundle holds no PEM certificate")
		}
		tc.RootCAs = pool
	}
	if a.opts.GetProxyClientCertificate != nil {
		tc.GetClientCertificate = a.opts.GetProxyClientCertificate
	} else if a.opts.ProxyClientCert != nil {
		tc.Certificates = []tls.Certificate{*a.opts.ProxyClientCert}
	}
	return &http.Transport{
		TLSClientConfig:     tc,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout: 5 * time.Second,
		MaxIdleConnsPerHost: 32,
		IdleConnTimeout:     90 * time.Second,
	}, nil
}

// fetchDiscovery GETs /apis/<group>/<version> from endpoint as
// system:kube-aggregator in system:masters (upstream's probe identity),
// within 5 s, and decodes the APIResourceList.
func (a *Aggregator) fetchDiscovery(ctx context.Context, t *http.Transport, endpoint string, svc *apiregv1.APIService) (*metav1.APIResourceList, error) {
	path := "/apis/" + svc.Spec.Group + "/" + svc.Spec.Version
	if svc.Spec.Group == "" {
		path = "/api/" + svc.Spec.Version
	}
	url := "https://" + endpoint + path
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	transport.SetAuthProxyHeaders(req, "system:kube-aggregator", "", []string{"system:masters"}, nil)
	resp, err := (&http.Client{Transport: t, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.CloseIdleConnections()
		return nil, fmt.Errorf("failing or missing response from %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		return nil, fmt.Errorf("failing or missing response from %s: bad status from %s: %d", url, url, resp.StatusCode)
	}
	if err != nil {
		return nil, fmt.Errorf("failing or missing response from %s: %w", url, err)
	}
	doc := &metav1.APIResourceList{}
	if err := json.Unmarshal(body, doc); err != nil {
		return nil, fmt.Errorf("discovery document from %s: %w", url, err)
	}
	doc.GroupVersion = schema.GroupVersion{Group: svc.Spec.Group, Version: svc.Spec.Version}.String()
	return doc, nil
}

// endpoint is the host:port a request to the service goes to.
func (a *Aggregator) endpoint(ctx context.Context, ns, name string, port int32) (string, error) {
	if a.opts.Resolver == nil {
		return resolve(ctx, a.opts.Objects, ns, name, port)
	}
	u, err := a.opts.Resolver.Resolve(ctx, ns, name, port)
	if err != nil {
		return "", err
	}
	return u.Host, nil
}

// ServeProxy serves r if it is under a remote group version
// (/apis/<group>/<version>...) and reports whether it did: 503 "service
// unavailable" while the APIService is not Available, else the request
// goes to a ready endpoint with the caller's identity in front-proxy
// headers. Watches stream and upgrades (exec-style) pass through.
func (a *Aggregator) ServeProxy(w http.ResponseWriter, r *http.Request) bool {
	segs := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 4)
	if len(segs) < 3 || segs[0] != "apis" {
		return false
	}
	rt := (*a.routes.Load())[schema.GroupVersion{Group: segs[1], Version: segs[2]}]
	if rt == nil {
		return false
	}
	if !rt.available {
		http.Error(w, "service unavailable", http.StatusServiceUnavailable)
		return true
	}
	user, ok := authn.UserFrom(r.Context())
	if !ok {
		http.Error(w, "missing user", http.StatusInternalServerError)
		return true
	}
	endpoint, err := a.endpoint(r.Context(), rt.ns, rt.svc, rt.port)
	if err != nil {
		klog.FromContext(r.Context()).V(2).Info("aggregated request", "apiservice", rt.name, "err", err)
		http.Error(w, "service unavailable", http.StatusServiceUnavailable)
		return true
	}
	proxy := &httputil.ReverseProxy{
		Transport:     rt.transport,
		FlushInterval: -1,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.Host = "https", endpoint, ""
			h := pr.Out.Header
			h.Del("Authorization")
			for k := range h {
				if strings.HasPrefix(strings.ToLower(k), "impersonate-") {
					h.Del(k)
				}
			}
			transport.SetAuthProxyHeaders(pr.Out, user.Name, user.UID, user.Groups, user.Extra)
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			klog.FromContext(r.Context()).V(2).Info("aggregated request failed", "apiservice", rt.name, "err", err)
			http.Error(w, fmt.Sprintf("error trying to reach service: %v", err), http.StatusServiceUnavailable)
		},
	}
	proxy.ServeHTTP(w, r)
	return true
}
