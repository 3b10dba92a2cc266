package apiserver

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/uuid"
	apiregv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	"github.com/skiff-sh/skiff/internal/apiserver/aggregator"
	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/apiserver/servicerouting"
	"github.com/skiff-sh/skiff/internal/storage"
)

// AggregationConfig is what API aggregation needs from the PKI.
type AggregationConfig struct {
	// ProxyClientCert is the front-proxy client certificate
	// (pki/front-proxy-client.*, CN front-proxy-client) presented to
	// extension API servers.
	ProxyClientCert tls.Certificate
	// GetProxyClientCertificate, when set, gives it at each handshake
	// (skiff server: from its files, so a renewed one is used).
	GetProxyClientCertificate func(*tls.CertificateRequestInfo) (*tls.Certificate, error)
	// RequestHeaderCAPEM is the CA that signed it (pki/front-proxy-ca.crt)
	// and ClientCAPEM the cluster CA, both published in
	// kube-system/extension-apiserver-authentication.
	RequestHeaderCAPEM, ClientCAPEM []byte
	// AllowedNames are the front-proxy client names extension servers
	// accept (default front-proxy-client).
	AllowedNames []string
}

// aggregation wires the aggregator (internal/apiserver/aggregator) to the
// server: its objects through the stores, discovery made of the local
// resources and the remote documents.
type aggregation struct {
	srv *Server
	agg *aggregator.Aggregator

	mu            sync.Mutex
	local, remote []registry.Resource
	builtinGVs    []schema.GroupVersion
}

func newAggregation(s *Server) *aggregation {
	a := &aggregation{srv: s, local: s.resources}
	opts := aggregator.Options{Objects: aggregationObjects{s: s}, Clock: s.clock, Publish: a.publishRemote,
		Resolver: servicerouting.New(reader{srv: s})}
	if c := s.cfg.Aggregation; c != nil {
		cert := c.ProxyClientCert
		opts.ProxyClientCert = &cert
		opts.GetProxyClientCertificate = c.GetProxyClientCertificate
		opts.AuthenticationConfigMap = authenticationConfigMap(c)
	}
	a.agg = aggregator.New(opts)
	a.builtinGVs = groupVersions(s.resources, nil)
	a.agg.SetLocal(a.builtinGVs, nil)
	return a
}

// authenticationConfigMap is the data of
// kube-system/extension-apiserver-authentication, as upstream's
// cluster-authentication-trust controller writes it: lists are JSON.
func authenticationConfigMap(c *AggregationConfig) map[string]string {
	list := func(v ...string) string {
		b, _ := json.Marshal(v)
		return string(b)
	}
	names := c.AllowedNames
	if len(names) == 0 {
		names = []string{"front-proxy-client"}
	}
	data := map[string]string{
		"requestheader-client-ca-file":       string(c.RequestHeaderCAPEM),
		"requestheader-allowed-names":        list(names...),
		"requestheader-username-headers":     list("X-Remote-User"),
		"requestheader-uid-headers":          list("X-Remote-Uid"),
		"requestheader-group-headers":        list("X-Remote-Group"),
		"requestheader-extra-headers-prefix": list("X-Remote-Extra-"),
	}
	if len(c.ClientCAPEM) > 0 { // upstream leaves the key out without a client CA
		data["client-ca-file"] = string(c.ClientCAPEM)
	}
	return data
}

func (a *aggregation) Start(ctx context.Context) error { return a.agg.Start(ctx) }

// groupVersions are the group versions of rs not in skip, in order.
func groupVersions(rs []registry.Resource, skip []schema.GroupVersion) []schema.GroupVersion {
	seen := map[schema.GroupVersion]bool{}
	for _, gv := range skip {
		seen[gv] = true
	}
	var out []schema.GroupVersion
	for _, r := range rs {
		if !seen[r.GroupVersion] {
			seen[r.GroupVersion] = true
			out = append(out, r.GroupVersion)
		}
	}
	return out
}

// publishLocal is what the CRD controller calls with the built-in and
// custom resources: discovery gets them and the remote ones, each custom
// group version a Local APIService.
func (a *aggregation) publishLocal(rs []registry.Resource) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.local = rs
	a.agg.SetLocal(a.builtinGVs, groupVersions(rs, a.builtinGVs))
	a.publishLocked()
}

// publishRemote is the aggregator's: the documents of the Available remote
// group versions.
func (a *aggregation) publishRemote(docs []*metav1.APIResourceList) {
	var rs []registry.Resource
	for _, d := range docs {
		rs = append(rs, remoteResources(d)...)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.remote = rs
	a.publishLocked()
}

func (a *aggregation) publishLocked() {
	all := append([]registry.Resource(nil), a.local...)
	local := map[schema.GroupVersion]bool{}
	for _, r := range a.local {
		local[r.GroupVersion] = true
	}
	for _, r := range a.remote {
		if !local[r.GroupVersion] { // a group version served here stays ours
			all = append(all, r)
		}
	}
	a.srv.disco.SetResources(all)
}

// remoteVerbs gives a remote resource the verbs its server listed.
type remoteVerbs struct {
	registry.DefaultStrategy
	verbs []string
}

func (s remoteVerbs) Verbs() []string { return s.verbs }

// remoteResources turns an extension server's document into resources
// for discovery (names, kinds, scope, verbs, short names, categories,
// subresources). A subresource whose parent is not listed (custom metrics
// servers list only "pods/<metric>") gets a parent without verbs, so that
// the group version is still published.
func remoteResources(doc *metav1.APIResourceList) []registry.Resource {
	gv, err := schema.ParseGroupVersion(doc.GroupVersion)
	if err != nil {
		return nil
	}
	byName := map[string]*registry.Resource{}
	var order []string
	add := func(r metav1.APIResource, name string, verbs []string) *registry.Resource {
		res := &registry.Resource{
			GroupVersion: gv, Resource: name, Kind: r.Kind, ListKind: r.Kind + "List", SingularName: r.SingularName,
			ShortNames: r.ShortNames, Categories: r.Categories, Namespaced: r.Namespaced,
			Strategy: remoteVerbs{verbs: append([]string{}, verbs...)},
		}
		byName[name] = res
		order = append(order, name)
		return res
	}
	for _, r := range doc.APIResources {
		if _, _, sub := cut(r.Name); !sub {
			add(r, r.Name, r.Verbs)
		}
	}
	for _, r := range doc.APIResources {
		parent, sub, ok := cut(r.Name)
		if !ok {
			continue
		}
		p := byName[parent]
		if p == nil {
			p = add(metav1.APIResource{Kind: r.Kind, Namespaced: r.Namespaced}, parent, nil)
		}
		if p.Subresources == nil {
			p.Subresources = map[string]registry.Subresource{}
		}
		kind := schema.GroupVersionKind{Group: gv.Group, Version: gv.Version, Kind: r.Kind}
		if r.Version != "" {
			kind.Group, kind.Version = r.Group, r.Version
		}
		p.Subresources[sub] = registry.Subresource{Kind: kind, Verbs: r.Verbs}
	}
	out := make([]registry.Resource, 0, len(order))
	for _, n := range order {
		out = append(out, *byName[n])
	}
	return out
}

func cut(name string) (string, string, bool) {
	for i := 0; i < len(name); i++ {
		if name[i] == '/' {
			return name[:i], name[i+1:], true
		}
	}
	return "", "", false
}

// aggregationObjects reads and writes through the server's stores.
type aggregationObjects struct{ s *Server }

var apiServicesGVR = apiregv1.SchemeGroupVersion.WithResource("apiservices")

func (o aggregationObjects) APIServices(ctx context.Context) ([]*apiregv1.APIService, error) {
	list := &apiregv1.APIServiceList{}
	if err := (reader{srv: o.s}).List(ctx, apiServicesGVR, "", false, list); err != nil {
		return nil, err
	}
	out := make([]*apiregv1.APIService, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out, nil
}

func (o aggregationObjects) Service(ctx context.Context, ns, name string) (*corev1.Service, error) {
	svc := &corev1.Service{}
	if err := (reader{srv: o.s}).Get(ctx, corev1.SchemeGroupVersion.WithResource("services"), ns, name, false, svc); err != nil {
		return nil, err
	}
	return svc, nil
}

func (o aggregationObjects) EndpointSlices(ctx context.Context, ns, name string) ([]*discoveryv1.EndpointSlice, error) {
	list := &discoveryv1.EndpointSliceList{}
	if err := (reader{srv: o.s}).List(ctx, discoveryv1.SchemeGroupVersion.WithResource("endpointslices"), ns, false, list); err != nil {
		return nil, err
	}
	var out []*discoveryv1.EndpointSlice
	for i := range list.Items {
		if list.Items[i].Labels[discoveryv1.LabelServiceName] == name {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

func (o aggregationObjects) handler(gvr schema.GroupVersionResource) (*resourceHandler, error) {
	return reader{srv: o.s}.handler(gvr)
}

func (o aggregationObjects) CreateAPIService(ctx context.Context, a *apiregv1.APIService) error {
	h, err := o.handler(apiServicesGVR)
	if err != nil {
		return err
	}
	a = a.DeepCopy()
	a.TypeMeta = metav1.TypeMeta{Kind: "APIService", APIVersion: apiregv1.SchemeGroupVersion.String()}
	a.UID = uuid.NewUUID()
	a.CreationTimestamp = metav1.NewTime(o.s.clock.Now().Truncate(time.Second))
	h.res.Strategy.PrepareForCreate(ctx, a)
	if errs := h.res.Strategy.Validate(ctx, a); len(errs) > 0 {
		return fmt.Errorf("APIService %s: %v", a.Name, errs.ToAggregate())
	}
	if err := h.store.Create(ctx, h.key("", a.Name), a, &apiregv1.APIService{}); err != nil {
		return h.apiErr(err, a.Name)
	}
	return nil
}

func (o aggregationObjects) DeleteAPIService(ctx context.Context, name string) error {
	h, err := o.handler(apiServicesGVR)
	if err != nil {
		return err
	}
	if err := h.store.Delete(ctx, h.key("", name), &apiregv1.APIService{}, nil); err != nil {
		return h.apiErr(err, name)
	}
	return nil
}

func (o aggregationObjects) UpdateAPIServiceStatus(ctx context.Context, a *apiregv1.APIService) error {
	h, err := o.handler(apiServicesGVR)
	if err != nil {
		return err
	}
	rv := a.ResourceVersion
	err = h.store.GuaranteedUpdate(ctx, h.key("", a.Name), &apiregv1.APIService{}, &storage.Preconditions{ResourceVersion: &rv},
		func(cur runtime.Object) (runtime.Object, error) {
			next := cur.(*apiregv1.APIService).DeepCopy()
			next.Status = *a.Status.DeepCopy()
			return next, nil
		})
	if err != nil {
		return h.apiErr(err, a.Name)
	}
	return nil
}

func (o aggregationObjects) EnsureConfigMap(ctx context.Context, ns, name string, data map[string]string) error {
	h, err := o.handler(corev1.SchemeGroupVersion.WithResource("configmaps"))
	if err != nil {
		return err
	}
	cur := &corev1.ConfigMap{}
	err = (reader{srv: o.s}).Get(ctx, corev1.SchemeGroupVersion.WithResource("configmaps"), ns, name, false, cur)
	switch {
	case apierrors.IsNotFound(err):
		ok := &corev1.Namespace{}
		if err := (reader{srv: o.s}).Get(ctx, corev1.SchemeGroupVersion.WithResource("namespaces"), "", ns, false, ok); err != nil {
			return err // not bootstrapped yet
		}
		cm := &corev1.ConfigMap{
			TypeMeta: metav1.TypeMeta{Kind: "ConfigMap", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: uuid.NewUUID(),
				CreationTimestamp: metav1.NewTime(o.s.clock.Now().Truncate(time.Second))},
			Data: data,
		}
		if err := h.store.Create(ctx, h.key(ns, name), cm, &corev1.ConfigMap{}); err != nil && !storage.IsExists(err) {
			return h.apiErr(err, name)
		}
		return nil
	case err != nil:
		return err
	case maps.Equal(cur.Data, data):
		return nil
	}
	err = h.store.GuaranteedUpdate(ctx, h.key(ns, name), &corev1.ConfigMap{}, nil, func(c runtime.Object) (runtime.Object, error) {
		next := c.(*corev1.ConfigMap).DeepCopy()
		next.Data = data
		return next, nil
	})
	if err != nil {
		return h.apiErr(err, name)
	}
	return nil
}
