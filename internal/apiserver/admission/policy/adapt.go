package policy

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	upstream "k8s.io/apiserver/pkg/admission"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/skiff-sh/skiff/internal/apiserver/admission"
	"github.com/skiff-sh/skiff/internal/apiserver/authn"
	"github.com/skiff-sh/skiff/internal/apiserver/authz"
	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// This file adapts Skiff's admission attributes, users, authorizer and
// reader to the interfaces of k8s.io/apiserver's policy packages, which
// then decide exactly as kube-apiserver does.

var namespacesGVR = corev1.SchemeGroupVersion.WithResource("namespaces")

// requestAttributes is upstream's view of one Skiff admission request. It
// keeps the audit annotations the policies add.
type requestAttributes struct {
	upstream.Attributes
	annotations map[string]string
}

func newRequestAttributes(a *admission.Attributes) *requestAttributes {
	return &requestAttributes{
		Attributes: upstream.NewAttributesRecord(a.Object, a.OldObject, a.Kind, a.Namespace, a.Name, a.Resource,
			a.Subresource, upstream.Operation(a.Operation), nil, a.DryRun, userInfo(a.User)),
	}
}

func (r *requestAttributes) AddAnnotation(key, value string) error {
	return r.AddAnnotationWithLevel(key, value, auditinternal.LevelMetadata)
}

func (r *requestAttributes) AddAnnotationWithLevel(key, value string, _ auditinternal.Level) error {
	if r.annotations == nil {
		r.annotations = map[string]string{}
	}
	if old, ok := r.annotations[key]; ok && old != value {
		return fmt.Errorf("admission annotation %q set twice (%q, %q)", key, old, value)
	}
	r.annotations[key] = value
	return nil
}

// userInfo is upstream's user.Info for a Skiff user (an empty user for nil).
func userInfo(u *authn.User) user.Info {
	if u == nil {
		return &user.DefaultInfo{}
	}
	return &user.DefaultInfo{Name: u.Name, UID: u.UID, Groups: u.Groups, Extra: u.Extra}
}

// warnings passes the warnings the policies add (Warn actions) on to the
// request's Warning headers.
type warnings struct{ a *admission.Attributes }

func (w warnings) AddWarning(_, text string) { w.a.Warn(text) }

// authorizerFor is the CEL `authorizer`: Skiff's authorizer asked with
// upstream's attributes.
type authorizerFor struct{ authz authz.Authorizer }

func (z authorizerFor) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if z.authz == nil {
		return authorizer.DecisionNoOpinion, "no authorizer", nil
	}
	attrs := authz.Attributes{
		Verb: a.GetVerb(), APIGroup: a.GetAPIGroup(), APIVersion: a.GetAPIVersion(), Resource: a.GetResource(),
		Subresource: a.GetSubresource(), Namespace: a.GetNamespace(), Name: a.GetName(), Path: a.GetPath(),
		ResourceRequest: a.IsResourceRequest(),
	}
	if u := a.GetUser(); u != nil {
		attrs.User = &authn.User{Name: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups(), Extra: u.GetExtra()}
	}
	if reqs, err := a.GetFieldSelector(); err == nil && len(reqs) > 0 {
		var parts []string
		for _, r := range reqs {
			parts = append(parts, r.Field+string(r.Operator)+r.Value)
		}
		attrs.FieldSelector = strings.Join(parts, ",")
	}
	d, reason, err := z.authz.Authorize(ctx, attrs)
	switch d {
	case authz.Allow:
		return authorizer.DecisionAllow, reason, err
	case authz.Deny:
		return authorizer.DecisionDeny, reason, err
	}
	return authorizer.DecisionNoOpinion, reason, err
}

// objectInterfaces lets upstream create, convert and type Skiff's objects.
// Skiff's objects are already in their served version; "converting" one to
// its own kind copies it (the object's TypeMeta is often empty).
type objectInterfaces struct {
	scheme      *runtime.Scheme
	equivalents runtime.EquivalentResourceMapper
}

func (o objectInterfaces) GetObjectCreater() runtime.ObjectCreater     { return o.scheme }
func (o objectInterfaces) GetObjectTyper() runtime.ObjectTyper         { return o.scheme }
func (o objectInterfaces) GetObjectDefaulter() runtime.ObjectDefaulter { return noDefaults{} }
func (o objectInterfaces) GetObjectConvertor() runtime.ObjectConvertor { return convertor{o.scheme} }
func (o objectInterfaces) GetEquivalentResourceMapper() runtime.EquivalentResourceMapper {
	return o.equivalents
}

// noDefaults: Skiff's strategies default after mutating admission.
type noDefaults struct{}

func (noDefaults) Default(runtime.Object) {}

type convertor struct{ *runtime.Scheme }

// Convert copies between objects of the same Go type and leaves the rest to
// the scheme.
func (c convertor) Convert(in, out, ctx interface{}) error {
	iv, ov := reflect.ValueOf(in), reflect.ValueOf(out)
	if iv.Kind() == reflect.Pointer && iv.Type() == ov.Type() {
		ov.Elem().Set(iv.Elem())
		return nil
	}
	return c.Scheme.Convert(in, out, ctx)
}

// namespaces reads namespaces from the server's cache, and etcd on a miss
// (the `namespaceObject` and namespace selectors).
type namespaces struct{ r registry.Reader }

var _ corelisters.NamespaceLister = namespaces{}

func (n namespaces) List(sel labels.Selector) ([]*corev1.Namespace, error) {
	var l corev1.NamespaceList
	if err := n.r.List(context.Background(), namespacesGVR, "", false, &l); err != nil {
		return nil, err
	}
	var out []*corev1.Namespace
	for i := range l.Items {
		if sel.Matches(labels.Set(l.Items[i].Labels)) {
			out = append(out, &l.Items[i])
		}
	}
	return out, nil
}

func (n namespaces) Get(name string) (*corev1.Namespace, error) {
	var ns corev1.Namespace
	if err := n.r.Get(context.Background(), namespacesGVR, "", name, false, &ns); err != nil {
		return nil, err
	}
	return &ns, nil
}

// namespaceClient is the client upstream's matcher asks when its lister
// misses: the same reader, read live from etcd.
type namespaceClient struct {
	kubernetes.Interface
	r registry.Reader
}

func (c namespaceClient) CoreV1() corev1client.CoreV1Interface { return namespaceCoreV1{r: c.r} }

type namespaceCoreV1 struct {
	corev1client.CoreV1Interface
	r registry.Reader
}

// The methods of CoreV1Interface other than Namespaces are never called.
func (c namespaceCoreV1) Namespaces() corev1client.NamespaceInterface { return liveNamespaces{r: c.r} }

type liveNamespaces struct {
	corev1client.NamespaceInterface
	r registry.Reader
}

func (c liveNamespaces) Get(ctx context.Context, name string, _ metav1.GetOptions) (*corev1.Namespace, error) {
	var ns corev1.Namespace
	if err := c.r.Get(ctx, namespacesGVR, "", name, true, &ns); err != nil {
		return nil, err
	}
	return &ns, nil
}

// Mapping is where the objects of a kind are served.
type Mapping struct {
	Resource   schema.GroupVersionResource
	Namespaced bool
	// NewList returns an empty list of the kind (typed, or unstructured for
	// custom resources).
	NewList func() runtime.Object
}

// Mapper finds the resource that serves a param kind (built-in or custom).
type Mapper interface {
	ResourceFor(gvk schema.GroupVersionKind) (Mapping, bool)
}

// MapperFunc adapts a function to Mapper.
type MapperFunc func(gvk schema.GroupVersionKind) (Mapping, bool)

// ResourceFor calls f(gvk).
func (f MapperFunc) ResourceFor(gvk schema.GroupVersionKind) (Mapping, bool) { return f(gvk) }

// params is the param "informer" of a policy: its lister reads the
// server's cache (and etcd on a Get miss); it is always synced.
type params struct {
	r       registry.Reader
	mapping Mapping
}

var _ informers.GenericInformer = params{}

func (p params) Informer() cache.SharedIndexInformer { return synced{} }
func (p params) Lister() cache.GenericLister         { return paramLister{p: p} }

// synced is the only part of an informer the policy dispatcher asks for.
type synced struct{ cache.SharedIndexInformer }

func (synced) HasSynced() bool { return true }

type paramLister struct {
	p  params
	ns string
}

func (l paramLister) List(sel labels.Selector) ([]runtime.Object, error) {
	list := l.p.mapping.NewList()
	if err := l.p.r.List(context.Background(), l.p.mapping.Resource, l.ns, false, list); err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	var out []runtime.Object
	for _, o := range items {
		m, err := meta.Accessor(o)
		if err != nil {
			return nil, err
		}
		if sel.Matches(labels.Set(m.GetLabels())) {
			out = append(out, o)
		}
	}
	return out, nil
}

func (l paramLister) Get(name string) (runtime.Object, error) {
	obj, err := newItem(l.p.mapping.NewList())
	if err != nil {
		return nil, err
	}
	if err := l.p.r.Get(context.Background(), l.p.mapping.Resource, l.ns, name, false, obj); err != nil {
		return nil, err
	}
	return obj, nil
}

func (l paramLister) ByNamespace(ns string) cache.GenericNamespaceLister {
	return paramLister{p: l.p, ns: ns}
}

// newItem returns an empty item of a list's type.
func newItem(list runtime.Object) (runtime.Object, error) {
	if _, ok := list.(interface{ UnstructuredContent() map[string]interface{} }); ok {
		return &unstructured.Unstructured{}, nil
	}
	v := reflect.ValueOf(list).Elem().FieldByName("Items")
	if !v.IsValid() || v.Kind() != reflect.Slice {
		return nil, fmt.Errorf("%T is not a list", list)
	}
	obj, ok := reflect.New(v.Type().Elem()).Interface().(runtime.Object)
	if !ok {
		return nil, fmt.Errorf("items of %T are not objects", list)
	}
	return obj, nil
}
