// Package apiregistration serves apiregistration.k8s.io/v1 apiservices:
// which server answers a group version, Local (this API server) or a
// Service (an extension API server the aggregator proxies to). Rules as
// upstream's kube-aggregator: names, priorities, TLS settings, the status
// kept apart from the spec, and kubectl's columns.
package apiregistration

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	apiregv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Resources lists apiregistration.k8s.io/v1 apiservices.
func Resources(registry.Deps) []registry.Resource {
	return []registry.Resource{Resource()}
}

// Resource describes apiregistration.k8s.io/v1 apiservices (cluster
// scoped, category api-extensions, etcd key
// /registry/apiregistration.k8s.io/apiservices/<name>).
func Resource() registry.Resource {
	return registry.Resource{
		GroupVersion:  apiregv1.SchemeGroupVersion,
		Resource:      "apiservices",
		Kind:          "APIService",
		ListKind:      "APIServiceList",
		SingularName:  "apiservice",
		Categories:    []string{"api-extensions"},
		StoragePrefix: "apiregistration.k8s.io/apiservices",
		New:           func() runtime.Object { return &apiregv1.APIService{} },
		NewList:       func() runtime.Object { return &apiregv1.APIServiceList{} },
		Strategy:      Strategy{},
		Subresources:  map[string]registry.Subresource{"status": registry.StatusSubresource()},
	}
}

// Strategy is the apiservices strategy.
type Strategy struct {
	registry.DefaultStrategy
}

var _ registry.Strategy = Strategy{}

// LocalAvailable is the condition of a Local APIService: always
// available, as upstream writes it on create.
func LocalAvailable(now metav1.Time) apiregv1.APIServiceCondition {
	return apiregv1.APIServiceCondition{
		Type: apiregv1.Available, Status: apiregv1.ConditionTrue, LastTransitionTime: now,
		Reason: "Local", Message: "Local APIServices are always available",
	}
}

// PrepareForCreate defaults service.port to 443 and clears the status; a
// Local APIService (no service) is Available at once.
func (Strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	a := obj.(*apiregv1.APIService)
	apiregv1.SetObjectDefaults_APIService(a)
	a.Status = apiregv1.APIServiceStatus{}
	if a.Spec.Service == nil {
		SetCondition(a, LocalAvailable(metav1.Now()))
	}
}

// PrepareForUpdate defaults the port and keeps the status.
func (Strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	a := obj.(*apiregv1.APIService)
	apiregv1.SetObjectDefaults_APIService(a)
	a.Status = old.(*apiregv1.APIService).Status
}

// PrepareForStatusUpdate keeps the spec, labels, annotations, finalizers
// and owner references.
func (Strategy) PrepareForStatusUpdate(ctx context.Context, obj, old runtime.Object) {
	a, o := obj.(*apiregv1.APIService), old.(*apiregv1.APIService)
	a.Spec = o.Spec
	a.Labels, a.Annotations, a.Finalizers, a.OwnerReferences = o.Labels, o.Annotations, o.Finalizers, o.OwnerReferences
}

// ValidateName: a path segment name (the version.group rule needs the
// spec and is checked in Validate).
func (Strategy) ValidateName(name string, prefix bool) []string {
	return path.IsValidPathSegmentName(name)
}

// Validate applies upstream's rules: the name is version.group, only v1
// may have an empty group, the group a DNS subdomain, the version a
// DNS-1035 label, groupPriorityMinimum in (0, 20000], versionPriority in
// (0, 1000]; a Local APIService has neither caBundle nor
// insecureSkipTLSVerify; a service reference names a namespace, a name
// and a valid port, and insecureSkipTLSVerify excludes a caBundle.
func (Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return validate(obj.(*apiregv1.APIService))
}

func validate(a *apiregv1.APIService) field.ErrorList {
	var errs field.ErrorList
	spec, sp := a.Spec, field.NewPath("spec")
	if want := spec.Version + "." + spec.Group; a.Name != want {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), a.Name, fmt.Sprintf("must be `spec.version+\".\"+spec.group`: %q", want)))
	}
	if spec.Group == "" && spec.Version != "v1" {
		errs = append(errs, field.Required(sp.Child("group"), "only v1 may have an empty group and it better be legacy kube"))
	}
	if spec.Group != "" {
		for _, msg := range validation.IsDNS1123Subdomain(spec.Group) {
			errs = append(errs, field.Invalid(sp.Child("group"), spec.Group, msg))
		}
	}
	for _, msg := range validation.IsDNS1035Label(spec.Version) {
		errs = append(errs, field.Invalid(sp.Child("version"), spec.Version, msg))
	}
	if spec.GroupPriorityMinimum <= 0 || spec.GroupPriorityMinimum > 20000 {
		errs = append(errs, field.Invalid(sp.Child("groupPriorityMinimum"), spec.GroupPriorityMinimum, "must be positive and less than 20000"))
	}
	if spec.VersionPriority <= 0 || spec.VersionPriority > 1000 {
		errs = append(errs, field.Invalid(sp.Child("versionPriority"), spec.VersionPriority, "must be positive and less than 1000"))
	}
	if spec.Service == nil {
		if len(spec.CABundle) > 0 {
			errs = append(errs, field.Invalid(sp.Child("caBundle"), fmt.Sprintf("%d bytes", len(spec.CABundle)), "local APIServices may not have a caBundle"))
		}
		if spec.InsecureSkipTLSVerify {
			errs = append(errs, field.Invalid(sp.Child("insecureSkipTLSVerify"), true, "local APIServices may not have insecureSkipTLSVerify"))
		}
		return errs
	}
	svc := sp.Child("service")
	if spec.Service.Namespace == "" {
		errs = append(errs, field.Required(svc.Child("namespace"), ""))
	}
	if spec.Service.Name == "" {
		errs = append(errs, field.Required(svc.Child("name"), ""))
	}
	port := int32(443)
	if spec.Service.Port != nil {
		port = *spec.Service.Port
	}
	if msgs := validation.IsValidPortNum(int(port)); msgs != nil {
		errs = append(errs, field.Invalid(svc.Child("port"), port, "port is not valid: "+strings.Join(msgs, ", ")))
	}
	if spec.InsecureSkipTLSVerify && len(spec.CABundle) > 0 {
		errs = append(errs, field.Invalid(sp.Child("insecureSkipTLSVerify"), true, "may not be true if caBundle is present"))
	}
	return errs
}

// ValidateUpdate applies the create rules to the new object.
func (Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return validate(obj.(*apiregv1.APIService))
}

// ValidateStatusUpdate: every condition's status is True, False or
// Unknown.
func (Strategy) ValidateStatusUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	var errs field.ErrorList
	cp := field.NewPath("status", "conditions")
	for i, c := range obj.(*apiregv1.APIService).Status.Conditions {
		switch c.Status {
		case apiregv1.ConditionTrue, apiregv1.ConditionFalse, apiregv1.ConditionUnknown:
		default:
			errs = append(errs, field.NotSupported(cp.Index(i).Child("status"), c.Status, []string{"True", "False", "Unknown"}))
		}
	}
	return errs
}

// TableColumns are kubectl's: NAME SERVICE AVAILABLE AGE.
func (Strategy) TableColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
		{Name: "Service", Type: "string", Description: "The reference to the service that hosts this API endpoint."},
		{Name: "Available", Type: "string", Description: "Whether this service is available."},
		{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
	}
}

// TableRow: the service ("Local" or namespace/name) and the Available
// condition ("True", "False (MissingEndpoints)", "Unknown").
func (Strategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	a, ok := obj.(*apiregv1.APIService)
	if !ok {
		return nil, fmt.Errorf("apiservice table: unexpected object %T", obj)
	}
	service := "Local"
	if a.Spec.Service != nil {
		service = a.Spec.Service.Namespace + "/" + a.Spec.Service.Name
	}
	status := string(apiregv1.ConditionUnknown)
	if c := Condition(a, apiregv1.Available); c != nil {
		status = string(c.Status)
		if c.Status != apiregv1.ConditionTrue && c.Reason != "" {
			status = fmt.Sprintf("%s (%s)", c.Status, c.Reason)
		}
	}
	return []interface{}{a.Name, service, status, registry.Age(a.CreationTimestamp)}, nil
}

// Condition returns a's condition of type t, or nil.
func Condition(a *apiregv1.APIService, t apiregv1.APIServiceConditionType) *apiregv1.APIServiceCondition {
	for i := range a.Status.Conditions {
		if a.Status.Conditions[i].Type == t {
			return &a.Status.Conditions[i]
		}
	}
	return nil
}

// SetCondition sets c on a; the transition time moves only when the
// status changes, as upstream's helper.
func SetCondition(a *apiregv1.APIService, c apiregv1.APIServiceCondition) {
	cur := Condition(a, c.Type)
	if cur == nil {
		a.Status.Conditions = append(a.Status.Conditions, c)
		return
	}
	if cur.Status != c.Status {
		cur.Status, cur.LastTransitionTime = c.Status, c.LastTransitionTime
	}
	cur.Reason, cur.Message = c.Reason, c.Message
}
