package webhook

import (
	"context"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/warning"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	skadmission "github.com/skiff-sh/skiff/internal/apiserver/admission"
	"github.com/skiff-sh/skiff/internal/apiserver/audit"
	"github.com/skiff-sh/skiff/internal/apiserver/authn"
	"github.com/skiff-sh/skiff/internal/apiserver/authz"
)

// attributes is one request as upstream's admission.Attributes: the
// object is Skiff's own (a mutating webhook's patch is converted back into
// it); audit annotations are kept until finish.
type attributes struct {
	a        *skadmission.Attributes
	options  runtime.Object
	user     user.Info
	reinvoke reinvocation

	mu          sync.Mutex
	annotations map[string]string
}

var _ admission.Attributes = (*attributes)(nil)

// newAttributes adapts a; the returned context carries the warning
// recorder upstream's webhooks add warnings through.
func newAttributes(ctx context.Context, a *skadmission.Attributes) (*attributes, context.Context) {
	at := &attributes{a: a, options: operationOptions(a), user: userInfo(a.User)}
	return at, warning.WithWarningRecorder(ctx, &recorder{a: a})
}

// operationOptions is the options object an AdmissionReview carries
// (upstream sends the request's CreateOptions, UpdateOptions or
// DeleteOptions; Skiff keeps only dryRun of them).
func operationOptions(a *skadmission.Attributes) runtime.Object {
	var dry []string
	if a.DryRun {
		dry = []string{metav1.DryRunAll}
	}
	meta := func(kind string) metav1.TypeMeta {
		return metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: kind}
	}
	switch a.Operation {
	case skadmission.Create:
		return &metav1.CreateOptions{TypeMeta: meta("CreateOptions"), DryRun: dry}
	case skadmission.Update:
		return &metav1.UpdateOptions{TypeMeta: meta("UpdateOptions"), DryRun: dry}
	case skadmission.Delete:
		return &metav1.DeleteOptions{TypeMeta: meta("DeleteOptions"), DryRun: dry}
	}
	return nil
}

func userInfo(u *authn.User) user.Info {
	if u == nil {
		return &user.DefaultInfo{}
	}
	return &user.DefaultInfo{Name: u.Name, UID: u.UID, Groups: u.Groups, Extra: u.Extra}
}

func (at *attributes) GetName() string                                       { return at.a.Name }
func (at *attributes) GetNamespace() string                                  { return at.a.Namespace }
func (at *attributes) GetResource() schema.GroupVersionResource              { return at.a.Resource }
func (at *attributes) GetSubresource() string                                { return at.a.Subresource }
func (at *attributes) GetOperation() admission.Operation                     { return admission.Operation(at.a.Operation) }
func (at *attributes) GetOperationOptions() runtime.Object                   { return at.options }
func (at *attributes) IsDryRun() bool                                        { return at.a.DryRun }
func (at *attributes) GetOldObject() runtime.Object                          { return at.a.OldObject }
func (at *attributes) GetKind() schema.GroupVersionKind                      { return at.a.Kind }
func (at *attributes) GetUserInfo() user.Info                                { return at.user }
func (at *attributes) GetReinvocationContext() admission.ReinvocationContext { return &at.reinvoke }

// GetObject is the object to be written; nil on delete (an untyped nil,
// as upstream's checks compare against nil).
func (at *attributes) GetObject() runtime.Object {
	if at.a.Object == nil {
		return nil
	}
	return at.a.Object
}

func (at *attributes) AddAnnotation(key, value string) error {
	return at.AddAnnotationWithLevel(key, value, auditinternal.LevelMetadata)
}

// AddAnnotationWithLevel keeps an audit annotation; the first value of a
// key stands, as upstream's.
func (at *attributes) AddAnnotationWithLevel(key, value string, _ auditinternal.Level) error {
	at.mu.Lock()
	defer at.mu.Unlock()
	if at.annotations == nil {
		at.annotations = map[string]string{}
	}
	if _, ok := at.annotations[key]; !ok {
		at.annotations[key] = value
	}
	return nil
}

// finish hands the audit annotations to the request's audit event
// (audit.AddAnnotations).
func (at *attributes) finish(ctx context.Context) {
	at.mu.Lock()
	defer at.mu.Unlock()
	keys := make([]string, 0, len(at.annotations))
	for k := range at.annotations {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		audit.AddAnnotations(ctx, k, at.annotations[k])
	}
}

// reinvocation is upstream's ReinvocationContext for one request.
type reinvocation struct {
	isReinvoke, shouldReinvoke bool
	values                     map[string]any
}

func (r *reinvocation) IsReinvoke() bool        { return r.isReinvoke }
func (r *reinvocation) SetIsReinvoke()          { r.isReinvoke = true }
func (r *reinvocation) ShouldReinvoke() bool    { return r.shouldReinvoke }
func (r *reinvocation) SetShouldReinvoke()      { r.shouldReinvoke = true }
func (r *reinvocation) Value(plugin string) any { return r.values[plugin] }
func (r *reinvocation) SetValue(plugin string, v any) {
	if r.values == nil {
		r.values = map[string]any{}
	}
	r.values[plugin] = v
}

// namespaceClient is the one call upstream's namespace matcher makes
// through a clientset: reading a namespace its informer has not seen.
type namespaceClient struct {
	kubernetes.Interface
	get func(ctx context.Context, name string) (*corev1.Namespace, error)
}

func (c namespaceClient) CoreV1() corev1client.CoreV1Interface { return coreClient{get: c.get} }

type coreClient struct {
	corev1client.CoreV1Interface
	get func(ctx context.Context, name string) (*corev1.Namespace, error)
}

func (c coreClient) Namespaces() corev1client.NamespaceInterface { return namespaces{get: c.get} }

type namespaces struct {
	corev1client.NamespaceInterface
	get func(ctx context.Context, name string) (*corev1.Namespace, error)
}

func (n namespaces) Get(ctx context.Context, name string, _ metav1.GetOptions) (*corev1.Namespace, error) {
	return n.get(ctx, name)
}

// The embedded interfaces are nil: any other call panics, which would
// mean upstream's library began to use the client for more.

// authorizerAdapter asks Skiff's authorizer upstream's questions
// (matchConditions' `authorizer` library).
type authorizerAdapter struct{ authz authz.Authorizer }

func (a authorizerAdapter) Authorize(ctx context.Context, at authorizer.Attributes) (authorizer.Decision, string, error) {
	var u *authn.User
	if ui := at.GetUser(); ui != nil {
		u = &authn.User{Name: ui.GetName(), UID: ui.GetUID(), Groups: ui.GetGroups(), Extra: ui.GetExtra()}
	}
	fs := ""
	if reqs, err := at.GetFieldSelector(); err == nil && len(reqs) > 0 {
		sels := make([]fields.Selector, 0, len(reqs))
		for _, r := range reqs {
			sels = append(sels, fields.OneTermEqualSelector(r.Field, r.Value))
		}
		fs = fields.AndSelectors(sels...).String()
	}
	d, reason, err := a.authz.Authorize(ctx, authz.Attributes{
		User: u, Verb: at.GetVerb(), APIGroup: at.GetAPIGroup(), APIVersion: at.GetAPIVersion(),
		Resource: at.GetResource(), Subresource: at.GetSubresource(), Namespace: at.GetNamespace(),
		Name: at.GetName(), Path: at.GetPath(), ResourceRequest: at.IsResourceRequest(), FieldSelector: fs,
	})
	switch d {
	case authz.Allow:
		return authorizer.DecisionAllow, reason, err
	case authz.Deny:
		return authorizer.DecisionDeny, reason, err
	}
	return authorizer.DecisionNoOpinion, reason, err
}
