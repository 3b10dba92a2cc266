package admission

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	psadmission "k8s.io/pod-security-admission/admission"
	psconfig "k8s.io/pod-security-admission/admission/api"
	psload "k8s.io/pod-security-admission/admission/api/load"
	psapi "k8s.io/pod-security-admission/api"
	psmetrics "k8s.io/pod-security-admission/metrics"
	"k8s.io/pod-security-admission/policy"

	"github.com/skiff-sh/skiff/internal/apiserver/audit"
	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// PodSecurity enforces the Pod Security Standards (privileged, baseline,
// restricted) that a namespace's pod-security.kubernetes.io/enforce,
// audit and warn labels ask for, as upstream's plugin of that name does.
// The policy and its messages are upstream's library
// (k8s.io/pod-security-admission): a pod breaking the enforce level is
// refused with 403 naming each violation, a break of the warn level is a
// Warning header, and a namespace whose enforce label changes warns about
// the pods already there that break it. Pods, namespaces and the pod
// templates of workload resources are checked; exemptions (users,
// namespaces, runtime classes) and the defaults for unlabelled
// namespaces come from upstream's PodSecurityConfiguration. The audit
// level's violations are annotations of the request's audit event.
type PodSecurity struct {
	delegate *psadmission.Admission
}

var _ Validator = (*PodSecurity)(nil)

// NewPodSecurity builds the plugin. config is an
// AdmissionConfiguration's PodSecurity configuration
// (pod-security.admission.config.k8s.io PodSecurityConfiguration, YAML or
// JSON); empty means upstream's defaults (privileged, no exemptions).
func NewPodSecurity(r registry.Reader, config []byte) (*PodSecurity, error) {
	cfg, err := psload.LoadFromData(config)
	if err != nil {
		return nil, fmt.Errorf("PodSecurity configuration: %w", err)
	}
	return newPodSecurity(r, cfg)
}

func newPodSecurity(r registry.Reader, cfg *psconfig.PodSecurityConfiguration) (*PodSecurity, error) {
	evaluator, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		return nil, fmt.Errorf("PodSecurity: %w", err)
	}
	d := &psadmission.Admission{
		Configuration:    cfg,
		Evaluator:        evaluator,
		Metrics:          noMetrics{},
		PodSpecExtractor: psadmission.DefaultPodSpecExtractor{},
		NamespaceGetter:  namespaceGetter{r},
		PodLister:        podLister{r},
	}
	if err := d.CompleteConfiguration(); err != nil {
		return nil, fmt.Errorf("PodSecurity configuration: %w", err)
	}
	if err := d.ValidateConfiguration(); err != nil {
		return nil, fmt.Errorf("PodSecurity configuration: %w", err)
	}
	return &PodSecurity{delegate: d}, nil
}

// Name is the upstream name.
func (*PodSecurity) Name() string { return "PodSecurity" }

// Handles creates and updates.
func (*PodSecurity) Handles(op Operation) bool { return op == Create || op == Update }

// Validate asks the library and turns its answer into warnings and a 403.
func (p *PodSecurity) Validate(ctx context.Context, a *Attributes) error {
	gr := a.Resource.GroupResource()
	if gr != corev1.Resource("pods") && gr != corev1.Resource("namespaces") && !p.delegate.PodSpecExtractor.HasPodSpec(gr) {
		return nil
	}
	rec := &psapi.AttributesRecord{
		Name: a.Name, Namespace: a.Namespace, Kind: a.Kind, Resource: a.Resource,
		Subresource: a.Subresource, Operation: admissionv1.Operation(a.Operation),
		Object: a.Object, OldObject: a.OldObject,
	}
	if a.User != nil {
		rec.Username = a.User.Name
	}
	if gr == corev1.Resource("namespaces") {
		// The library reads a namespace's name from the request.
		rec.Namespace = a.Name
	}
	resp := p.delegate.Validate(ctx, rec)
	for _, w := range resp.Warnings {
		a.Warn(w)
	}
	// The audit level's violations and the enforced policy go to the
	// request's audit event (pod-security.kubernetes.io/audit-violations,
	// enforce-policy, exempt), as upstream's plugin records them.
	for _, k := range slices.Sorted(maps.Keys(resp.AuditAnnotations)) {
		audit.AddAnnotations(ctx, psapi.AuditAnnotationPrefix+k, resp.AuditAnnotations[k])
	}
	if resp.Allowed {
		return nil
	}
	refused := forbidden(a, errors.New("Not allowed by PodSecurity")).(*apierrors.StatusError)
	if r := resp.Result; r != nil {
		if r.Message != "" {
			refused.ErrStatus.Message = r.Message
		}
		if r.Reason != "" {
			refused.ErrStatus.Reason = r.Reason
		}
		if r.Details != nil {
			refused.ErrStatus.Details = r.Details
		}
		if r.Code != 0 {
			refused.ErrStatus.Code = r.Code
		}
	}
	return refused
}

// namespaceGetter reads namespaces from the server's cache (etcd on a
// miss).
type namespaceGetter struct{ r registry.Reader }

func (g namespaceGetter) GetNamespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	ns := &corev1.Namespace{}
	if err := g.r.Get(ctx, namespacesGVR, "", name, false, ns); err != nil {
		return nil, err
	}
	return ns, nil
}

// podLister lists a namespace's pods from the server's cache, for the
// warnings of a namespace's new enforce level.
type podLister struct{ r registry.Reader }

func (l podLister) ListPods(ctx context.Context, namespace string) ([]*corev1.Pod, error) {
	list := &corev1.PodList{}
	if err := l.r.List(ctx, corev1.SchemeGroupVersion.WithResource("pods"), namespace, false, list); err != nil {
		return nil, err
	}
	pods := make([]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		pods[i] = &list.Items[i]
	}
	return pods, nil
}

// noMetrics drops the library's evaluation metrics (Skiff does not export
// pod_security_evaluations_total yet).
type noMetrics struct{}

func (noMetrics) RecordEvaluation(psmetrics.Decision, psapi.LevelVersion, psmetrics.Mode, psapi.Attributes) {
}
func (noMetrics) RecordExemption(psapi.Attributes)   {}
func (noMetrics) RecordError(bool, psapi.Attributes) {}
