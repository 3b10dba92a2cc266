// Package webhook holds the MutatingAdmissionWebhook and
// ValidatingAdmissionWebhook admission plugins: the
// MutatingWebhookConfigurations and ValidatingWebhookConfigurations
// (admissionregistration.k8s.io/v1) stored in the server are called
// through Skiff's admission chain (internal/apiserver/admission).
//
// The calling itself is upstream's: k8s.io/apiserver's webhook plugins
// (admission/plugin/webhook/mutating and validating) are used as
// libraries behind Skiff's Mutator and Validator interfaces, so that
// matching (rules with `*` and subresources, scope, namespaceSelector,
// objectSelector, matchPolicy Equivalent, matchConditions in CEL), the
// AdmissionReview v1/v1beta1 exchange, clientConfig url/service with
// caBundle, timeoutSeconds, failurePolicy, sideEffects on dry runs,
// JSONPatch responses, reinvocationPolicy IfNeeded, warnings, audit
// annotations, the exemption of admissionregistration objects, the
// apiserver_admission_webhook_* metrics and every error message are
// upstream's. This package adapts: Skiff's Attributes to upstream's
// (adapter.go), Skiff's scheme and served versions to upstream's
// ObjectInterfaces (objects.go), the server's caches to the informers the
// library reads configurations and namespaces from (informers.go), and
// Skiff's authorizer to the one matchConditions' CEL `authorizer` uses.
package webhook

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/initializer"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/config"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/mutating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/validating"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	webhookutil "k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/apiserver/pkg/warning"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/featuregate"

	skadmission "github.com/skiff-sh/skiff/internal/apiserver/admission"
	"github.com/skiff-sh/skiff/internal/apiserver/authz"
)

// The resources the plugins watch.
var (
	MutatingGVR   = admissionregistrationv1.SchemeGroupVersion.WithResource("mutatingwebhookconfigurations")
	ValidatingGVR = admissionregistrationv1.SchemeGroupVersion.WithResource("validatingwebhookconfigurations")
	NamespacesGVR = corev1.SchemeGroupVersion.WithResource("namespaces")
)

// excludedResources are never sent to any webhook (upstream's
// kubeapiserver/admission/exclusion: reviews that are not stored).
var excludedResources = []schema.GroupResource{
	{Group: "authentication.k8s.io", Resource: "selfsubjectreviews"},
	{Group: "authentication.k8s.io", Resource: "tokenreviews"},
	{Group: "authorization.k8s.io", Resource: "localsubjectaccessreviews"},
	{Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"},
	{Group: "authorization.k8s.io", Resource: "selfsubjectrulesreviews"},
	{Group: "authorization.k8s.io", Resource: "subjectaccessreviews"},
}

// Options are what the plugins need from the server.
type Options struct {
	// ListWatch lists and watches one of MutatingGVR, ValidatingGVR and
	// NamespacesGVR from the server's watch caches; the plugins keep
	// informers on them (no etcd read per request).
	ListWatch func(gvr schema.GroupVersionResource) cache.ListerWatcher
	// GetNamespace reads a namespace the informer has not seen yet (just
	// created), as upstream's namespace matcher does through its client.
	GetNamespace func(ctx context.Context, name string) (*corev1.Namespace, error)
	// Objects describes the server's types and versions.
	Objects Objects
	// ServiceResolver resolves clientConfig.service references
	// (servicerouting.Resolver); nil dials the service's DNS name.
	ServiceResolver webhookutil.ServiceResolver
	// Authorizer answers matchConditions' `authorizer` checks; nil makes
	// expressions that use it fail (and so the request, as upstream fails
	// closed on a matchCondition error).
	Authorizer authz.Authorizer
	// Stop ends the informers; they start on the first admitted request.
	Stop <-chan struct{}
	// MutatingConfig and ValidatingConfig are each plugin's
	// WebhookAdmissionConfiguration (apiserver.config.k8s.io/v1, from
	// --admission-control-config-file; nil: none): its kubeConfigFile
	// gives the client credentials presented to a webhook's host, as
	// upstream's, and its staticManifestsDir webhook configurations read
	// from files.
	MutatingConfig, ValidatingConfig []byte
}

// CheckConfig checks a WebhookAdmissionConfiguration as the plugins will
// read it: its apiVersion and kind, an absolute kubeConfigFile that
// loads, a valid staticManifestsDir.
func CheckConfig(data []byte) error {
	cfg, err := config.LoadConfig(bytes.NewReader(data))
	if err != nil {
		return err
	}
	_, err = webhookutil.NewDefaultAuthenticationInfoResolver(cfg.KubeConfigFile)
	return err
}

// configReader is what upstream's constructors read the configuration
// from (a nil io.Reader, not a nil *bytes.Reader, for none).
func configReader(data []byte) io.Reader {
	if data == nil {
		return nil
	}
	return bytes.NewReader(data)
}

// hasStaticManifests says whether a configuration names a
// staticManifestsDir (its webhooks are called with none stored).
func hasStaticManifests(data []byte) bool {
	if data == nil {
		return false
	}
	cfg, err := config.LoadConfig(bytes.NewReader(data))
	return err == nil && cfg.StaticManifestsDir != ""
}

// shared is what the two plugins share: one informer factory.
type shared struct {
	opts    Options
	objects admission.ObjectInterfaces
	factory informers.SharedInformerFactory
	start   sync.Once
	// mutating and validating configurations: with none stored, a request
	// skips the library entirely.
	mwc, vwc cache.SharedIndexInformer
}

// New builds both plugins. It has no side effects: the informers start
// with the first request that reaches a plugin.
func New(opts Options) (*Mutating, *Validating, error) {
	if opts.ListWatch == nil || opts.GetNamespace == nil {
		return nil, nil, fmt.Errorf("webhook admission needs ListWatch and GetNamespace")
	}
	s := &shared{opts: opts, objects: newObjectInterfaces(opts.Objects)}
	s.factory = newInformerFactory(opts.ListWatch, opts.GetNamespace)
	s.mwc = s.factory.Admissionregistration().V1().MutatingWebhookConfigurations().Informer()
	s.vwc = s.factory.Admissionregistration().V1().ValidatingWebhookConfigurations().Informer()

	mp, err := mutating.NewMutatingWebhook(configReader(opts.MutatingConfig))
	if err != nil {
		return nil, nil, fmt.Errorf("mutating admission webhook: %w", err)
	}
	vp, err := validating.NewValidatingAdmissionWebhook(configReader(opts.ValidatingConfig))
	if err != nil {
		return nil, nil, fmt.Errorf("validating admission webhook: %w", err)
	}
	for _, w := range []libraryWebhook{mp, vp} {
		if err := s.initialize(w); err != nil {
			return nil, nil, err
		}
	}
	return &Mutating{s: s, plugin: mp, static: hasStaticManifests(opts.MutatingConfig)},
		&Validating{s: s, plugin: vp, static: hasStaticManifests(opts.ValidatingConfig)}, nil
}

// libraryWebhook is what initialize sets on each upstream plugin.
type libraryWebhook interface {
	InspectFeatureGates(gates featuregate.FeatureGate)
	SetExcludedAdmissionResources(rs []schema.GroupResource)
	SetExternalKubeClientSet(c kubernetes.Interface)
	SetExternalKubeInformerFactory(f informers.SharedInformerFactory)
	SetServiceResolver(r webhookutil.ServiceResolver)
	SetUnconditionalAuthorizer(a authorizer.UnconditionalAuthorizer)
	SetDrainedNotification(stop <-chan struct{})
	SetManifestLoaders(loaders *initializer.ManifestLoaders)
	ValidateInitialization() error
}

func (s *shared) initialize(w libraryWebhook) error {
	w.InspectFeatureGates(utilfeature.DefaultFeatureGate)
	w.SetExcludedAdmissionResources(excludedResources)
	w.SetExternalKubeClientSet(namespaceClient{get: s.opts.GetNamespace})
	w.SetExternalKubeInformerFactory(s.factory)
	if s.opts.ServiceResolver != nil {
		w.SetServiceResolver(s.opts.ServiceResolver)
	}
	if s.opts.Authorizer != nil {
		w.SetUnconditionalAuthorizer(authorizerAdapter{s.opts.Authorizer})
	}
	stop := s.opts.Stop
	if stop == nil {
		stop = make(chan struct{}) // never stopped: tests without a server
	}
	w.SetDrainedNotification(stop) // ends the reload of static manifests
	w.SetManifestLoaders(manifestLoaders())
	if err := w.ValidateInitialization(); err != nil {
		return fmt.Errorf("webhook admission: %w", err)
	}
	return nil
}

// ensureStarted starts the informers once and waits for their first list
// (from the server's caches: milliseconds).
func (s *shared) ensureStarted() {
	s.start.Do(func() {
		stop := s.opts.Stop
		if stop == nil {
			stop = make(chan struct{}) // never stopped: tests without a server
		}
		s.factory.Start(stop)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.factory.WaitForCacheSync(ctx.Done())
	})
}

// none says no configuration of the informer is stored.
func none(inf cache.SharedIndexInformer) bool {
	return inf.HasSynced() && len(inf.GetStore().ListKeys()) == 0
}

// handles is upstream's: CREATE, UPDATE, DELETE and CONNECT.
func handles(op skadmission.Operation) bool {
	switch op {
	case skadmission.Create, skadmission.Update, skadmission.Delete, skadmission.Connect:
		return true
	}
	return false
}

// Mutating is the MutatingAdmissionWebhook plugin.
type Mutating struct {
	s      *shared
	plugin *mutating.Plugin
	static bool // configurations from a staticManifestsDir
}

var _ skadmission.Mutator = (*Mutating)(nil)

// Name is upstream's.
func (*Mutating) Name() string { return mutating.PluginName }

// Handles CREATE, UPDATE, DELETE and CONNECT.
func (*Mutating) Handles(op skadmission.Operation) bool { return handles(op) }

// Admit calls the matching mutating webhooks one after the other, in
// the order of their configurations' names and then their order in the
// configuration, applying each one's patch before the next is called.
// When a webhook changed the object and an earlier one asked for
// reinvocationPolicy IfNeeded, the webhooks are run a second time (only
// the IfNeeded ones that ran before are called again), as upstream's
// chain reinvokes; Skiff reinvokes the webhooks only, not the built-in
// plugins before them (they are idempotent and ran already).
func (m *Mutating) Admit(ctx context.Context, a *skadmission.Attributes) error {
	m.s.ensureStarted()
	if !m.static && none(m.s.mwc) {
		return nil
	}
	attrs, ctx := newAttributes(ctx, a)
	defer attrs.finish(ctx)
	if err := m.plugin.Admit(ctx, attrs, m.s.objects); err != nil {
		return err
	}
	if rc := attrs.GetReinvocationContext(); rc.ShouldReinvoke() {
		rc.SetIsReinvoke()
		return m.plugin.Admit(ctx, attrs, m.s.objects)
	}
	return nil
}

// Validating is the ValidatingAdmissionWebhook plugin.
type Validating struct {
	s      *shared
	plugin *validating.Plugin
	static bool // configurations from a staticManifestsDir
}

var _ skadmission.Validator = (*Validating)(nil)

// Name is upstream's.
func (*Validating) Name() string { return validating.PluginName }

// Handles CREATE, UPDATE, DELETE and CONNECT.
func (*Validating) Handles(op skadmission.Operation) bool { return handles(op) }

// Validate calls the matching validating webhooks in parallel; the first
// refusal (or failure of a webhook whose failurePolicy is Fail) refuses
// the request.
func (v *Validating) Validate(ctx context.Context, a *skadmission.Attributes) error {
	v.s.ensureStarted()
	if !v.static && none(v.s.vwc) {
		return nil
	}
	attrs, ctx := newAttributes(ctx, a)
	defer attrs.finish(ctx)
	return v.plugin.Validate(ctx, attrs, v.s.objects)
}

// recorder passes the webhooks' warnings on to the request (validating
// webhooks run in parallel, hence the lock).
type recorder struct {
	mu sync.Mutex
	a  *skadmission.Attributes
}

func (r *recorder) AddWarning(_, text string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.a.Warn(text)
}

var _ warning.Recorder = (*recorder)(nil)
