package apiextensions

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func crd(versions ...apiextensionsv1.CustomResourceDefinitionVersion) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com", ResourceVersion: "1"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Scope: apiextensionsv1.ClusterScoped,
			Names:    apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: versions,
		},
	}
}

func version(name string, storage bool) apiextensionsv1.CustomResourceDefinitionVersion {
	return apiextensionsv1.CustomResourceDefinitionVersion{Name: name, Served: true, Storage: storage,
		Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}}}
}

func TestStrategy(t *testing.T) {
	ctx := context.Background()
	s := Strategy{}
	c := crd(version("v1", true))
	c.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue}}
	s.PrepareForCreate(ctx, c)
	if c.Generation != 1 || len(c.Status.Conditions) != 0 || !cmp.Equal(c.Status.StoredVersions, []string{"v1"}) {
		t.Errorf("after create: generation %d status %+v", c.Generation, c.Status)
	}
	if c.Spec.Conversion == nil || c.Spec.Conversion.Strategy != apiextensionsv1.NoneConverter {
		t.Errorf("conversion not defaulted to None: %+v", c.Spec.Conversion)
	}
	if errs := s.Validate(ctx, c); len(errs) != 0 {
		t.Errorf("valid CRD: %v", errs)
	}

	next := crd(version("v1", false), version("v2", true))
	next.ObjectMeta = c.ObjectMeta
	s.PrepareForUpdate(ctx, next, c)
	if next.Generation != 2 || !cmp.Equal(next.Status.StoredVersions, []string{"v1", "v2"}) {
		t.Errorf("after update: generation %d storedVersions %v", next.Generation, next.Status.StoredVersions)
	}
	if errs := s.ValidateUpdate(ctx, next, c); len(errs) != 0 {
		t.Errorf("valid update: %v", errs)
	}

	// Removing a stored version from spec.versions is refused, as upstream.
	drop := crd(version("v2", true))
	drop.ObjectMeta = next.ObjectMeta
	s.PrepareForUpdate(ctx, drop, next)
	var got []string
	for _, e := range s.ValidateUpdate(ctx, drop, next) {
		got = append(got, e.Field)
	}
	if diff := cmp.Diff([]string{"status.storedVersions[0]"}, got); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}

	// A first delete marks the CRD and adds the cleanup finalizer.
	if !s.SpecFinalizersPending(c) {
		t.Error("a live CRD must be held on delete")
	}
	s.MarkTerminating(c)
	if !cmp.Equal(c.Finalizers, []string{CleanupFinalizer}) || Condition(c, apiextensionsv1.Terminating) == nil {
		t.Errorf("marked CRD: finalizers %v conditions %+v", c.Finalizers, c.Status.Conditions)
	}
}
