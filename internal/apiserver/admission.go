package apiserver

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/apiserver/admission"
	"github.com/skiff-sh/skiff/internal/apiserver/authn"
	"github.com/skiff-sh/skiff/internal/apiserver/authz"
	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// newAdmission builds the admission chain: the built-in plugins, in
// upstream's order. Webhooks and the other plugins are appended here.
func newAdmission(r registry.Reader, c clock.PassiveClock) (*admission.Chain, error) {
	psConfig, err := admissionPluginConfig(r, "PodSecurity") // --admission-control-config-file (admissionconfig.go)
	if err != nil {
		return nil, fmt.Errorf("admission: %w", err)
	}
	podSecurity, err := admission.NewPodSecurity(r, psConfig)
	if err != nil {
		return nil, fmt.Errorf("admission: %w", err)
	}
	serviceAccount := admission.NewServiceAccount(r)
	if rd, ok := r.(reader); ok {
		serviceAccount.AllowMissing(rd.srv.cfg.AllowPodsWithoutServiceAccount)
	}
	var authorizer authz.Authorizer
	if rd, ok := r.(reader); ok {
		authorizer = rd.srv.authz
	}
	plugins := []admission.Plugin{
		admission.NewNamespaceLifecycle(r, c),
		admission.NewLimitRanger(r, c),
		serviceAccount,
		admission.NewNodeRestriction(r, authorizer),
		admission.NewPriority(r),
		podSecurity,
		admission.NewDefaultStorageClass(r),
		admission.StorageObjectInUseProtection{},
		admission.NewPersistentVolumeClaimResize(r),
		admission.NewRuntimeClass(r),
		admission.NewDefaultIngressClass(r),
		admission.NewPodResizeValidator(r),
	}
	plugins = append(plugins,
		admission.NewCertificateApproval(authorizer),
		admission.NewCertificateSigning(authorizer),
		admission.CertificateSubjectRestriction{},
	)
	if rd, ok := r.(reader); ok { // admission webhooks (webhooks.go)
		hooks, err := rd.srv.webhookAdmission()
		if err != nil {
			return nil, fmt.Errorf("admission: %w", err)
		}
		plugins = append(plugins, hooks...)
	}
	if rd, ok := r.(reader); ok { // CEL admission policies (admissionpolicy.go)
		plugins = append(plugins, rd.admissionPolicies()...)
	}
	if w, ok := r.(admission.QuotaStatusWriter); ok { // the server's reader (quotastatus.go)
		plugins = append(plugins, admission.NewResourceQuota(r, w, c))
	}
	// --enable-admission-plugins, --disable-admission-plugins (admissionconfig.go).
	if plugins, err = enabledAdmissionPlugins(r, plugins); err != nil {
		return nil, fmt.Errorf("admission: %w", err)
	}
	chain, err := admission.NewChain(plugins...)
	if err != nil {
		return nil, fmt.Errorf("admission: %w", err)
	}
	return chain, nil
}

// admit runs both admission phases for one write of this resource: obj is
// the object to write (nil on delete), old the stored one (nil on
// create). Creates and updates run the phases apart, with validation
// between them (create.go, update.go).
func (h *resourceHandler) admit(ctx context.Context, op admission.Operation, obj, old runtime.Object, info RequestInfo, dry bool) error {
	return h.runAdmission(ctx, h.admissionAttributes(ctx, op, obj, old, info, dry), h.srv.admission.Run)
}

// admissionAttributes describes one request to the admission chain.
func (h *resourceHandler) admissionAttributes(ctx context.Context, op admission.Operation, obj, old runtime.Object, info RequestInfo, dry bool) *admission.Attributes {
	a := &admission.Attributes{
		Operation:   op,
		Resource:    h.res.GroupVersion.WithResource(h.res.Resource),
		Subresource: info.Subresource,
		Kind:        h.gvk,
		Namespace:   info.Namespace,
		Name:        info.Name,
		Object:      obj,
		OldObject:   old,
		DryRun:      dry,
	}
	for _, o := range []runtime.Object{obj, old} {
		if m, err := meta.Accessor(o); o != nil && err == nil {
			a.Namespace, a.Name = m.GetNamespace(), m.GetName()
			break
		}
	}
	if u, ok := authn.UserFrom(ctx); ok {
		a.User = u
	}
	return a
}

// subresourceAdmission describes a request on a subresource whose object
// is not the resource's (pods/eviction's Eviction, pods/exec's
// PodExecOptions, serviceaccounts/token's TokenRequest): the kind is the
// subresource's, namespace and name are the URL's, as upstream's create
// and connect handlers take them.
func (h *resourceHandler) subresourceAdmission(ctx context.Context, op admission.Operation, obj runtime.Object, info RequestInfo, dry bool) *admission.Attributes {
	a := &admission.Attributes{
		Operation:   op,
		Resource:    h.res.GroupVersion.WithResource(h.res.Resource),
		Subresource: info.Subresource,
		Kind:        h.res.SubresourceKind(info.Subresource),
		Namespace:   info.Namespace,
		Name:        info.Name,
		Object:      obj,
		DryRun:      dry,
	}
	if u, ok := authn.UserFrom(ctx); ok {
		a.User = u
	}
	return a
}

// connectAdmission runs both phases for a CONNECT (pods/exec, attach,
// portforward, nodes/proxy): the object is the request's options, never
// a dry run, as upstream's connect handler.
func (h *resourceHandler) connectAdmission(ctx context.Context, info RequestInfo, opts runtime.Object) error {
	return h.runAdmission(ctx, h.subresourceAdmission(ctx, admission.Connect, opts, info, false), h.srv.admission.Run)
}

// objectNamespace sets the namespace of a subresource's body to the
// request's, or refuses another one (upstream's
// EnsureObjectNamespaceMatchesRequestNamespace).
func objectNamespace(obj runtime.Object, ns string) error {
	m, err := meta.Accessor(obj)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	switch m.GetNamespace() {
	case ns:
	case "":
		m.SetNamespace(ns)
	default:
		return apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	return nil
}

// runAdmission runs one phase of the chain and sends the warnings the
// plugins gave (PodSecurity's) as Warning headers, refused or not.
func (h *resourceHandler) runAdmission(ctx context.Context, a *admission.Attributes, phase func(context.Context, *admission.Attributes) error) error {
	err := phase(ctx, a)
	setWarnings(ctx, a.TakeWarnings())
	return err
}
