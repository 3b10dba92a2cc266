// Package componentstatus serves the read-only, deprecated core/v1
// componentstatuses: synthetic objects for etcd-0, the scheduler and the
// controller manager, never stored.
package componentstatus

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Resource describes core/v1 componentstatuses (cluster-scoped, get and
// list only). Nothing is kept under StoragePrefix: the strategy computes
// them, with etcd healthy when checkEtcd returns nil and the scheduler and
// controller manager when checkComponent does (nil: always).
func Resource(checkEtcd func(ctx context.Context) error, checkComponent func(ctx context.Context, name string) error) registry.Resource {
	return registry.Resource{
		GroupVersion:  corev1.SchemeGroupVersion,
		Resource:      "componentstatuses",
		Kind:          "ComponentStatus",
		ListKind:      "ComponentStatusList",
		SingularName:  "componentstatus",
		ShortNames:    []string{"cs"},
		Namespaced:    false,
		StoragePrefix: "componentstatuses",
		New:           func() runtime.Object { return &corev1.ComponentStatus{} },
		NewList:       func() runtime.Object { return &corev1.ComponentStatusList{} },
		Strategy:      Strategy{checkEtcd: checkEtcd, checkComponent: checkComponent},
	}
}

// Strategy is the registry strategy of component statuses: it computes
// them on every read and refuses every write.
type Strategy struct {
	registry.DefaultStrategy
	checkEtcd      func(ctx context.Context) error
	checkComponent func(ctx context.Context, name string) error
}

var (
	_ registry.Strategy      = Strategy{}
	_ registry.VirtualReader = Strategy{}
)

func (s Strategy) all(ctx context.Context) []corev1.ComponentStatus {
	var etcd func() error
	if s.checkEtcd != nil {
		etcd = func() error { return s.checkEtcd(ctx) }
	}
	var component func(string) error
	if s.checkComponent != nil {
		component = func(name string) error { return s.checkComponent(ctx, name) }
	}
	return ComponentStatuses(etcd, component)
}

// GetVirtual returns one component's status.
func (s Strategy) GetVirtual(ctx context.Context, name string) (runtime.Object, error) {
	for _, cs := range s.all(ctx) {
		if cs.Name == name {
			return &cs, nil
		}
	}
	return nil, apierrors.NewNotFound(corev1.Resource("componentstatuses"), name)
}

// ListVirtual returns every component's status.
func (s Strategy) ListVirtual(ctx context.Context) (runtime.Object, error) {
	return &corev1.ComponentStatusList{Items: s.all(ctx)}, nil
}

// Verbs are the only verbs served: get and list.
func (Strategy) Verbs() []string { return []string{"get", "list"} }

const readOnly = "componentstatuses are read-only"

// Validate refuses every create.
func (Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return field.ErrorList{field.Forbidden(field.NewPath(""), readOnly)}
}

// ValidateUpdate refuses every update.
func (Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return field.ErrorList{field.Forbidden(field.NewPath(""), readOnly)}
}

// ValidateStatusUpdate refuses every status update.
func (Strategy) ValidateStatusUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return field.ErrorList{field.Forbidden(field.NewPath(""), readOnly)}
}

// ComponentStatuses reports the control plane's components the way
// upstream does: etcd-0 is healthy when etcdHealthy returns nil, the
// scheduler and controller manager when component(name) does (the API
// server asks the in-process components, or probes their healthz); a nil
// func counts as healthy.
func ComponentStatuses(etcdHealthy func() error, component func(name string) error) []corev1.ComponentStatus {
	healthy := func(name string) corev1.ComponentStatus {
		return corev1.ComponentStatus{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ComponentStatus"},
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Conditions: []corev1.ComponentCondition{{Type: corev1.ComponentHealthy, Status: corev1.ConditionTrue, Message: "ok"}},
		}
	}
	etcd := healthy("etcd-0")
	if etcdHealthy != nil {
		if err := etcdHealthy(); err != nil {
			etcd.Conditions[0] = corev1.ComponentCondition{Type: corev1.ComponentHealthy, Status: corev1.ConditionFalse, Error: err.Error()}
		}
	}
	out := []corev1.ComponentStatus{healthy("controller-manager"), healthy("scheduler"), etcd}
	if component != nil {
		for i := range out[:2] {
			if err := component(out[i].Name); err != nil {
				out[i].Conditions[0] = corev1.ComponentCondition{Type: corev1.ComponentHealthy, Status: corev1.ConditionFalse, Error: err.Error()}
			}
		}
	}
	return out
}

// TableColumns are the columns of `kubectl get cs`.
func (Strategy) TableColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
		{Name: "Status", Type: "string", Description: "Status of the component conditions"},
		{Name: "Message", Type: "string", Description: "Message of the component conditions"},
		{Name: "Error", Type: "string", Description: "Error of the component conditions"},
	}
}

// TableRow renders one component from its Healthy condition.
func (Strategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	cs, ok := obj.(*corev1.ComponentStatus)
	if !ok {
		return nil, fmt.Errorf("componentstatus table: unexpected object %T", obj)
	}
	status, message, errText := "Unknown", "", ""
	for _, c := range cs.Conditions {
		if c.Type != corev1.ComponentHealthy {
			continue
		}
		status = "Unhealthy"
		if c.Status == corev1.ConditionTrue {
			status = "Healthy"
		}
		message, errText = c.Message, c.Error
		break
	}
	return []interface{}{cs.Name, status, message, errText}, nil
}
