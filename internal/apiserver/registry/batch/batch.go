// Package batch holds the registry rules of batch/v1 jobs and cronjobs:
// upstream's defaults, the generated selector and controller-uid labels of
// a job, validation with upstream's field paths and messages, generation
// and status rules, the status.successful field selector and kubectl's
// table columns.
package batch

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Resources lists the batch/v1 resources: jobs and cronjobs.
func Resources(registry.Deps) []registry.Resource {
	return []registry.Resource{JobResource(), CronJobResource()}
}

const (
	msgNonNegative = "must be greater than or equal to 0"
	msgImmutable   = "field is immutable"
)

func nonNegative(v int64, path *field.Path) field.ErrorList {
	if v < 0 {
		return field.ErrorList{field.Invalid(path, v, msgNonNegative)}
	}
	return nil
}

func nonNegative32(v *int32, path *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	return nonNegative(int64(*v), path)
}

// containerCells are the wide CONTAINERS and IMAGES cells.
func containerCells(spec *corev1.PodSpec) (string, string) {
	names := make([]string, len(spec.Containers))
	images := make([]string, len(spec.Containers))
	for i, c := range spec.Containers {
		names[i] = c.Name
		images[i] = c.Image
	}
	return strings.Join(names, ","), strings.Join(images, ",")
}

// selectorString renders a selector as kubectl's SELECTOR column does.
func selectorString(sel *metav1.LabelSelector) string {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return "<error>"
	}
	if str := s.String(); str != "" {
		return str
	}
	return "<none>"
}
