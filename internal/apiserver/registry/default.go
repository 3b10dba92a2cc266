package registry

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// DefaultStrategy is the no-op strategy: names are DNS-1123 subdomains,
// nothing is defaulted or validated beyond metadata, and a table shows
// NAME and AGE. Embed it and override what a resource needs.
type DefaultStrategy struct{}

var _ Strategy = DefaultStrategy{}

func (DefaultStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object)            {}
func (DefaultStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object)       {}
func (DefaultStrategy) PrepareForStatusUpdate(ctx context.Context, obj, old runtime.Object) {}
func (DefaultStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList    { return nil }
func (DefaultStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return nil
}
func (DefaultStrategy) ValidateStatusUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return nil
}
func (DefaultStrategy) FieldSet(obj runtime.Object) fields.Set { return fields.Set{} }

// ValidateName accepts DNS-1123 subdomains. With prefix set (generateName) a
// trailing dash is allowed.
func (DefaultStrategy) ValidateName(name string, prefix bool) []string {
	return NameIsDNSSubdomain(name, prefix)
}

func (DefaultStrategy) TableColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: "Name must be unique within a namespace."},
		{Name: "Age", Type: "string", Description: "CreationTimestamp is a timestamp representing the server time when this object was created."},
	}
}

func (DefaultStrategy) TableRow(obj runtime.Object) ([]interface{}, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	return []interface{}{m.GetName(), Age(m.GetCreationTimestamp())}, nil
}

// Age renders a creation timestamp the way kubectl does ("5m", "<unknown>").
func Age(t metav1.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(time.Since(t.Time))
}

// NameIsDNSSubdomain validates a DNS-1123 subdomain name (or generateName prefix).
func NameIsDNSSubdomain(name string, prefix bool) []string {
	if prefix {
		name = maskTrailingDash(name)
	}
	return validation.IsDNS1123Subdomain(name)
}

// NameIsDNSLabel validates a DNS-1123 label name (or generateName prefix).
func NameIsDNSLabel(name string, prefix bool) []string {
	if prefix {
		name = maskTrailingDash(name)
	}
	return validation.IsDNS1123Label(name)
}

// NameIsDNS1035Label validates a DNS-1035 label (services).
func NameIsDNS1035Label(name string, prefix bool) []string {
	if prefix {
		name = maskTrailingDash(name)
	}
	return validation.IsDNS1035Label(name)
}

func maskTrailingDash(name string) string {
	if len(name) > 1 && name[len(name)-1] == '-' {
		return name[:len(name)-2] + "a"
	}
	return name
}
