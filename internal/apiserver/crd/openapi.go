package crd

import (
	"encoding/json"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skiff-sh/skiff/internal/apiserver/openapi"
)

// OpenAPI is what the server publishes for crd's served versions: upstream's
// CRD OpenAPI builder run on each (its paths, the kind and list schemas
// with the version's structural schema), so kubectl explain and
// client-side validation see custom resources as upstream serves them.
func OpenAPI(crd *apiextensionsv1.CustomResourceDefinition) ([]openapi.Custom, error) {
	var out []openapi.Custom
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		v2, err := builder.BuildOpenAPIV2(crd, v.Name, builder.Options{V2: true, IncludeSelectableFields: true})
		if err != nil {
			return nil, fmt.Errorf("openapi v2 of %s/%s: %w", crd.Name, v.Name, err)
		}
		v3, err := builder.BuildOpenAPIV3(crd, v.Name, builder.Options{V2: false, IncludeSelectableFields: true})
		if err != nil {
			return nil, fmt.Errorf("openapi v3 of %s/%s: %w", crd.Name, v.Name, err)
		}
		c := openapi.Custom{GroupVersion: schema.GroupVersion{Group: crd.Spec.Group, Version: v.Name}}
		if c.V2, err = json.Marshal(v2); err != nil {
			return nil, err
		}
		if c.V3, err = json.Marshal(v3); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}
