// Package admissionpolicystatus type-checks ValidatingAdmissionPolicies, as
// upstream's validatingadmissionpolicy-status-controller does: each new
// generation of a policy has its expressions checked against the OpenAPI
// schemas of the kinds it matches (and of its param kind), and the result
// is applied to status.typeChecking.expressionWarnings with
// status.observedGeneration. The checker is upstream's
// (k8s.io/apiserver's validating.TypeChecker); the schemas are the API
// server's published OpenAPI v3 (upstream also compiles in the built-in
// definitions; Skiff serves them all over OpenAPI v3, so the server alone
// answers).
package admissionpolicystatus

import (
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	applyv1 "k8s.io/client-go/applyconfigurations/admissionregistration/v1"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/admissionregistration/v1"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/worker"
)

// Name is the controller's name in --controllers (upstream's), and the
// field manager of the status it applies.
const Name = "validatingadmissionpolicy-status-controller"

// Checker type-checks one policy.
type Checker interface {
	Check(p *admissionregistrationv1.ValidatingAdmissionPolicy) []admissionregistrationv1.ExpressionWarning
}

// Controller is the validatingadmissionpolicy-status-controller.
type Controller struct {
	client   kubernetes.Interface
	policies listersv1.ValidatingAdmissionPolicyLister
	synced   cache.InformerSynced
	checker  Checker
	queue    *worker.Queue[string]
}

// New builds the controller (a controllercontext.InitFunc) with upstream's
// type checker reading the API server's discovery and OpenAPI v3.
func New(_ context.Context, cc controllercontext.Context) (controllercontext.Controller, error) {
	disco := memory.NewMemCacheClient(cc.Client.Discovery())
	checker := &validating.TypeChecker{
		SchemaResolver: &resolver.ClientDiscoveryResolver{Discovery: cc.Client.Discovery()},
		RestMapper:     restmapper.NewDeferredDiscoveryRESTMapper(disco),
	}
	return NewWithChecker(cc, checker)
}

// NewWithChecker builds the controller with a given checker (tests).
func NewWithChecker(cc controllercontext.Context, checker Checker) (*Controller, error) {
	inf := cc.Informers.Admissionregistration().V1().ValidatingAdmissionPolicies()
	c := &Controller{client: cc.Client, policies: inf.Lister(), synced: inf.Informer().HasSynced, checker: checker}
	c.queue = worker.NewQueue(Name, c.Sync, worker.Options[string]{Clock: cc.Clock})
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
	}); err != nil {
		return nil, fmt.Errorf("%s: policies handler: %w", Name, err)
	}
	return c, nil
}

// Start runs the worker until ctx is done.
func (c *Controller) Start(ctx context.Context) error {
	return worker.Run(ctx, Name, []cache.InformerSynced{c.synced}, c.queue)
}

func (c *Controller) enqueue(obj any) {
	if p, ok := obj.(*admissionregistrationv1.ValidatingAdmissionPolicy); ok && needsCheck(p) {
		c.queue.Add(p.Name)
	}
}

// needsCheck: a generation not type-checked yet.
func needsCheck(p *admissionregistrationv1.ValidatingAdmissionPolicy) bool {
	return p.Generation > p.Status.ObservedGeneration
}

// Sync type-checks one policy and applies the warnings and the observed
// generation to its status (forcing ownership, as upstream).
func (c *Controller) Sync(ctx context.Context, name string) error {
	p, err := c.policies.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !needsCheck(p) {
		return nil
	}
	status := StatusFor(p.Generation, c.checker.Check(p))
	_, err = c.client.AdmissionregistrationV1().ValidatingAdmissionPolicies().ApplyStatus(ctx,
		applyv1.ValidatingAdmissionPolicy(p.Name).WithStatus(status), metav1.ApplyOptions{FieldManager: Name, Force: true})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// StatusFor is the status applied for a generation and its warnings.
func StatusFor(generation int64, warnings []admissionregistrationv1.ExpressionWarning) *applyv1.ValidatingAdmissionPolicyStatusApplyConfiguration {
	ws := make([]*applyv1.ExpressionWarningApplyConfiguration, 0, len(warnings))
	for _, w := range warnings {
		ws = append(ws, applyv1.ExpressionWarning().WithFieldRef(w.FieldRef).WithWarning(w.Warning))
	}
	return applyv1.ValidatingAdmissionPolicyStatus().
		WithObservedGeneration(generation).
		WithTypeChecking(applyv1.TypeChecking().WithExpressionWarnings(ws...))
}
