// Package flowcontrol holds the rules of flowcontrol.apiserver.k8s.io/v1
// flowschemas and prioritylevelconfigurations, the configuration of API
// Priority and Fairness (internal/apiserver/flowcontrol acts on them):
// upstream's defaults, the validation a client sees, status kept apart
// from spec, and kubectl's tables.
package flowcontrol

import (
	"context"
	"fmt"
	"strings"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Resources lists the flowcontrol.apiserver.k8s.io/v1 resources.
func Resources(registry.Deps) []registry.Resource {
	return []registry.Resource{FlowSchemas(), PriorityLevelConfigurations()}
}

// FlowSchemas describes flowcontrol.apiserver.k8s.io/v1 flowschemas.
func FlowSchemas() registry.Resource {
	return registry.Resource{
		GroupVersion:  flowcontrolv1.SchemeGroupVersion,
		Resource:      "flowschemas",
		Kind:          "FlowSchema",
		ListKind:      "FlowSchemaList",
		SingularName:  "flowschema",
		StoragePrefix: "flowcontrol.apiserver.k8s.io/flowschemas",
		New:           func() runtime.Object { return &flowcontrolv1.FlowSchema{} },
		NewList:       func() runtime.Object { return &flowcontrolv1.FlowSchemaList{} },
		Strategy:      FlowSchemaStrategy{},
		Subresources:  map[string]registry.Subresource{"status": registry.StatusSubresource()},
	}
}

// PriorityLevelConfigurations describes
// flowcontrol.apiserver.k8s.io/v1 prioritylevelconfigurations.
func PriorityLevelConfigurations() registry.Resource {
	return registry.Resource{
		GroupVersion:  flowcontrolv1.SchemeGroupVersion,
		Resource:      "prioritylevelconfigurations",
		Kind:          "PriorityLevelConfiguration",
		ListKind:      "PriorityLevelConfigurationList",
		SingularName:  "prioritylevelconfiguration",
		StoragePrefix: "flowcontrol.apiserver.k8s.io/prioritylevelconfigurations",
		New:           func() runtime.Object { return &flowcontrolv1.PriorityLevelConfiguration{} },
		NewList:       func() runtime.Object { return &flowcontrolv1.PriorityLevelConfigurationList{} },
		Strategy:      PriorityLevelStrategy{},
		Subresources:  map[string]registry.Subresource{"status": registry.StatusSubresource()},
	}
}

// FlowSchemaStrategy is the flowschemas strategy.
type FlowSchemaStrategy struct{ registry.DefaultStrategy }

// PriorityLevelStrategy is the prioritylevelconfigurations strategy.
type PriorityLevelStrategy struct{ registry.DefaultStrategy }

var (
	_ registry.Strategy = FlowSchemaStrategy{}
	_ registry.Strategy = PriorityLevelStrategy{}
)

// DefaultFlowSchema sets upstream's v1 defaults: matchingPrecedence 1000.
func DefaultFlowSchema(fs *flowcontrolv1.FlowSchema) {
	if fs.Spec.MatchingPrecedence == 0 {
		fs.Spec.MatchingPrecedence = 1000
	}
}

// DefaultPriorityLevel sets upstream's v1 defaults: 30 nominal
// concurrency shares for a limited level (0 for exempt), 0 lendable
// percent, and 64 queues, a hand of 8 and 50 per queue when queuing.
func DefaultPriorityLevel(pl *flowcontrolv1.PriorityLevelConfiguration) {
	if l := pl.Spec.Limited; l != nil {
		if l.NominalConcurrencyShares == nil {
			v := int32(30)
			l.NominalConcurrencyShares = &v
		}
		if l.LendablePercent == nil {
			v := int32(0)
			l.LendablePercent = &v
		}
		if l.LimitResponse.Type == flowcontrolv1.LimitResponseTypeQueue {
			if l.LimitResponse.Queuing == nil {
				l.LimitResponse.Queuing = &flowcontrolv1.QueuingConfiguration{}
			}
			q := l.LimitResponse.Queuing
			if q.Queues == 0 {
				q.Queues = 64
			}
			if q.HandSize == 0 {
				q.HandSize = 8
			}
			if q.QueueLengthLimit == 0 {
				q.QueueLengthLimit = 50
			}
		}
	}
	if e := pl.Spec.Exempt; e != nil {
		if e.NominalConcurrencyShares == nil {
			v := int32(0)
			e.NominalConcurrencyShares = &v
		}
		if e.LendablePercent == nil {
			v := int32(0)
			e.LendablePercent = &v
		}
	}
}

func (FlowSchemaStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	fs := obj.(*flowcontrolv1.FlowSchema)
	fs.Status = flowcontrolv1.FlowSchemaStatus{}
	DefaultFlowSchema(fs)
}

func (FlowSchemaStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	fs := obj.(*flowcontrolv1.FlowSchema)
	fs.Status = old.(*flowcontrolv1.FlowSchema).Status
	DefaultFlowSchema(fs)
}

func (FlowSchemaStrategy) PrepareForStatusUpdate(ctx context.Context, obj, old runtime.Object) {
	obj.(*flowcontrolv1.FlowSchema).Spec = old.(*flowcontrolv1.FlowSchema).Spec
}

func (FlowSchemaStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return ValidateFlowSchema(obj.(*flowcontrolv1.FlowSchema))
}

func (FlowSchemaStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return ValidateFlowSchema(obj.(*flowcontrolv1.FlowSchema))
}

func (PriorityLevelStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	pl := obj.(*flowcontrolv1.PriorityLevelConfiguration)
	pl.Status = flowcontrolv1.PriorityLevelConfigurationStatus{}
	DefaultPriorityLevel(pl)
}

func (PriorityLevelStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	pl := obj.(*flowcontrolv1.PriorityLevelConfiguration)
	pl.Status = old.(*flowcontrolv1.PriorityLevelConfiguration).Status
	DefaultPriorityLevel(pl)
}

func (PriorityLevelStrategy) PrepareForStatusUpdate(ctx context.Context, obj, old runtime.Object) {
	obj.(*flowcontrolv1.PriorityLevelConfiguration).Spec = old.(*flowcontrolv1.PriorityLevelConfiguration).Spec
}

func (PriorityLevelStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return ValidatePriorityLevel(obj.(*flowcontrolv1.PriorityLevelConfiguration))
}

func (PriorityLevelStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return ValidatePriorityLevel(obj.(*flowcontrolv1.PriorityLevelConfiguration))
}

var (
	supportedVerbs        = sets.New("get", "list", "create", "update", "delete", "deletecollection", "patch", "watch", "proxy", "*")
	supportedSubjectKinds = []string{string(flowcontrolv1.SubjectKindServiceAccount), string(flowcontrolv1.SubjectKindGroup), string(flowcontrolv1.SubjectKindUser)}
)

// ValidateFlowSchema checks a flow schema as upstream does, for what a
// client can see: precedence, its priority level's name, the distinguisher
// and each rule's subjects, verbs, groups, resources, scopes and URLs.
func ValidateFlowSchema(fs *flowcontrolv1.FlowSchema) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if p := fs.Spec.MatchingPrecedence; p <= 0 || p > 10000 {
		errs = append(errs, field.Invalid(spec.Child("matchingPrecedence"), p, "must be between 1 and 10000, inclusive"))
	}
	if fs.Spec.PriorityLevelConfiguration.Name == "" {
		errs = append(errs, field.Required(spec.Child("priorityLevelConfiguration", "name"), "must reference a priority level"))
	}
	if d := fs.Spec.DistinguisherMethod; d != nil {
		if d.Type != flowcontrolv1.FlowDistinguisherMethodByUserType && d.Type != flowcontrolv1.FlowDistinguisherMethodByNamespaceType {
			errs = append(errs, field.NotSupported(spec.Child("distinguisherMethod", "type"), d.Type,
				[]string{string(flowcontrolv1.FlowDistinguisherMethodByNamespaceType), string(flowcontrolv1.FlowDistinguisherMethodByUserType)}))
		}
	}
	for i, rule := range fs.Spec.Rules {
		rp := spec.Child("rules").Index(i)
		if len(rule.Subjects) == 0 {
			errs = append(errs, field.Required(rp.Child("subjects"), "subjects must contain at least one value"))
		}
		for j, s := range rule.Subjects {
			errs = append(errs, validateSubject(s, rp.Child("subjects").Index(j))...)
		}
		if len(rule.ResourceRules) == 0 && len(rule.NonResourceRules) == 0 {
			errs = append(errs, field.Required(rp, "at least one of resourceRules and nonResourceRules has to be non-empty"))
		}
		for j, r := range rule.ResourceRules {
			p := rp.Child("resourceRules").Index(j)
			errs = append(errs, validateVerbs(r.Verbs, p.Child("verbs"), true)...)
			if len(r.APIGroups) == 0 {
				errs = append(errs, field.Required(p.Child("apiGroups"), "resource rules must supply at least one api group"))
			}
			if len(r.Resources) == 0 {
				errs = append(errs, field.Required(p.Child("resources"), "resource rules must supply at least one resource"))
			}
			if len(r.Namespaces) == 0 && !r.ClusterScope {
				errs = append(errs, field.Required(p.Child("namespaces"), "resource rules that are not cluster scoped must supply at least one namespace"))
			}
		}
		for j, r := range rule.NonResourceRules {
			p := rp.Child("nonResourceRules").Index(j)
			errs = append(errs, validateVerbs(r.Verbs, p.Child("verbs"), false)...)
			if len(r.NonResourceURLs) == 0 {
				errs = append(errs, field.Required(p.Child("nonResourceURLs"), "must contain at least one value"))
			}
			for k, u := range r.NonResourceURLs {
				if u != "*" && !strings.HasPrefix(u, "/") {
					errs = append(errs, field.Invalid(p.Child("nonResourceURLs").Index(k), u, "must start with slash"))
				}
			}
		}
	}
	return errs
}

// validateVerbs: at least one, and for resource rules the API verbs only.
func validateVerbs(verbs []string, p *field.Path, resource bool) field.ErrorList {
	if len(verbs) == 0 {
		return field.ErrorList{field.Required(p, "verbs must contain at least one value")}
	}
	var errs field.ErrorList
	for _, v := range verbs {
		if resource && !supportedVerbs.Has(v) {
			errs = append(errs, field.NotSupported(p, v, sets.List(supportedVerbs)))
		}
	}
	return errs
}

func validateSubject(s flowcontrolv1.Subject, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch s.Kind {
	case flowcontrolv1.SubjectKindUser:
		if s.User == nil || s.User.Name == "" {
			errs = append(errs, field.Required(p.Child("user", "name"), "username is required"))
		}
	case flowcontrolv1.SubjectKindGroup:
		if s.Group == nil || s.Group.Name == "" {
			errs = append(errs, field.Required(p.Child("group", "name"), "group name is required"))
		}
	case flowcontrolv1.SubjectKindServiceAccount:
		if s.ServiceAccount == nil || s.ServiceAccount.Name == "" || s.ServiceAccount.Namespace == "" {
			errs = append(errs, field.Required(p.Child("serviceAccount"), "name and namespace are required"))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("kind"), s.Kind, supportedSubjectKinds))
	}
	return errs
}

// ValidatePriorityLevel checks a priority level configuration: its type
// and the matching configuration, shares, percentages and queuing.
func ValidatePriorityLevel(pl *flowcontrolv1.PriorityLevelConfiguration) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	switch pl.Spec.Type {
	case flowcontrolv1.PriorityLevelEnablementExempt:
		if pl.Spec.Limited != nil {
			errs = append(errs, field.Forbidden(spec.Child("limited"), "must be nil if the type is not Limited"))
		}
	case flowcontrolv1.PriorityLevelEnablementLimited:
		l := pl.Spec.Limited
		if l == nil {
			errs = append(errs, field.Required(spec.Child("limited"), "must not be empty when type is Limited"))
			break
		}
		if pl.Spec.Exempt != nil {
			errs = append(errs, field.Forbidden(spec.Child("exempt"), "must be nil if the type is Limited"))
		}
		lp := spec.Child("limited")
		if n := l.NominalConcurrencyShares; n != nil && *n < 0 {
			errs = append(errs, field.Invalid(lp.Child("nominalConcurrencyShares"), *n, "must be a non-negative integer"))
		}
		errs = append(errs, validatePercent(l.LendablePercent, lp.Child("lendablePercent"))...)
		if b := l.BorrowingLimitPercent; b != nil && *b < 0 {
			errs = append(errs, field.Invalid(lp.Child("borrowingLimitPercent"), *b, "if specified, must be a non-negative integer"))
		}
		rp := lp.Child("limitResponse")
		switch l.LimitResponse.Type {
		case flowcontrolv1.LimitResponseTypeReject:
			if l.LimitResponse.Queuing != nil {
				errs = append(errs, field.Forbidden(rp.Child("queuing"), "must be nil if limited.limitResponse.type is not Limited"))
			}
		case flowcontrolv1.LimitResponseTypeQueue:
			q := l.LimitResponse.Queuing
			if q == nil {
				errs = append(errs, field.Required(rp.Child("queuing"), "must not be empty if limited.limitResponse.type is Limited"))
				break
			}
			qp := rp.Child("queuing")
			if q.QueueLengthLimit <= 0 {
				errs = append(errs, field.Invalid(qp.Child("queueLengthLimit"), q.QueueLengthLimit, "must be positive"))
			}
			if q.Queues <= 0 {
				errs = append(errs, field.Invalid(qp.Child("queues"), q.Queues, "must be positive"))
			} else if q.Queues > 1000 {
				errs = append(errs, field.Invalid(qp.Child("queues"), q.Queues, "must not be greater than 1000"))
			}
			if q.HandSize <= 0 {
				errs = append(errs, field.Invalid(qp.Child("handSize"), q.HandSize, "must be positive"))
			} else if q.HandSize > q.Queues {
				errs = append(errs, field.Invalid(qp.Child("handSize"), q.HandSize, fmt.Sprintf("should not be greater than queues (%d)", q.Queues)))
			}
		default:
			errs = append(errs, field.NotSupported(rp.Child("type"), l.LimitResponse.Type,
				[]string{string(flowcontrolv1.LimitResponseTypeQueue), string(flowcontrolv1.LimitResponseTypeReject)}))
		}
	default:
		errs = append(errs, field.NotSupported(spec.Child("type"), pl.Spec.Type,
			[]string{string(flowcontrolv1.PriorityLevelEnablementExempt), string(flowcontrolv1.PriorityLevelEnablementLimited)}))
	}
	if e := pl.Spec.Exempt; e != nil {
		if n := e.NominalConcurrencyShares; n != nil && *n < 0 {
			errs = append(errs, field.Invalid(spec.Child("exempt", "nominalConcurrencyShares"), *n, "must be a non-negative integer"))
		}
		errs = append(errs, validatePercent(e.LendablePercent, spec.Child("exempt", "lendablePercent"))...)
	}
	return errs
}

func validatePercent(v *int32, p *field.Path) field.ErrorList {
	if v != nil && (*v < 0 || *v > 100) {
		return field.ErrorList{field.Invalid(p, *v, "must be between 0 and 100, inclusive")}
	}
	return nil
}

// TableColumns are kubectl's columns for flow schemas.
func (FlowSchemaStrategy) TableColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
		{Name: "PriorityLevel", Type: "string", Description: "priorityLevelConfiguration is the reference to the priority level configuration."},
		{Name: "MatchingPrecedence", Type: "string", Description: "matchingPrecedence is used to choose among the FlowSchemas that match a given request."},
		{Name: "DistinguisherMethod", Type: "string", Description: "distinguisherMethod defines how to compute the flow distinguisher for requests that match this schema."},
		{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
		{Name: "MissingPL", Type: "string", Description: "references a broken or non-existent PriorityLevelConfiguration"},
	}
}

// TableRow renders one flow schema.
func (FlowSchemaStrategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	fs := obj.(*flowcontrolv1.FlowSchema)
	dm := "<none>"
	if fs.Spec.DistinguisherMethod != nil {
		dm = string(fs.Spec.DistinguisherMethod.Type)
	}
	missing := "?"
	for _, c := range fs.Status.Conditions {
		if c.Type == flowcontrolv1.FlowSchemaConditionDangling {
			missing = string(c.Status)
		}
	}
	return []interface{}{fs.Name, fs.Spec.PriorityLevelConfiguration.Name, fmt.Sprint(fs.Spec.MatchingPrecedence), dm, registry.Age(fs.CreationTimestamp), missing}, nil
}

// TableColumns are kubectl's columns for priority levels.
func (PriorityLevelStrategy) TableColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
		{Name: "Type", Type: "string", Description: "type indicates whether this priority level is subject to limitation on request execution."},
		{Name: "NominalConcurrencyShares", Type: "string", Description: "nominalConcurrencyShares (NCS) contributes to the computation of the NominalConcurrencyLimit (NominalCL) of this level."},
		{Name: "Queues", Type: "string", Description: "queues is the number of queues for this priority level."},
		{Name: "HandSize", Type: "string", Description: "handSize is a small positive number that configures the shuffle sharding of requests into queues."},
		{Name: "QueueLengthLimit", Type: "string", Description: "queueLengthLimit is the maximum number of requests allowed to be waiting in a given queue of this priority level at a time."},
		{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
	}
}

// TableRow renders one priority level.
func (PriorityLevelStrategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	pl := obj.(*flowcontrolv1.PriorityLevelConfiguration)
	ncs, queues, hand, qlen := "<none>", "<none>", "<none>", "<none>"
	if l := pl.Spec.Limited; l != nil {
		if l.NominalConcurrencyShares != nil {
			ncs = fmt.Sprint(*l.NominalConcurrencyShares)
		}
		if q := l.LimitResponse.Queuing; q != nil {
			queues, hand, qlen = fmt.Sprint(q.Queues), fmt.Sprint(q.HandSize), fmt.Sprint(q.QueueLengthLimit)
		}
	}
	return []interface{}{pl.Name, string(pl.Spec.Type), ncs, queues, hand, qlen, registry.Age(pl.CreationTimestamp)}, nil
}
