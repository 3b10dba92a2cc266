package openapi

import (
	"encoding/json"
	"fmt"

	"k8s.io/kube-openapi/pkg/validation/spec"
)

// Definitions returns the schema of every served type, keyed by definition
// name (io.k8s.api.core.v1.Pod), as server-side apply's type converter
// reads them.
func (o *OpenAPI) Definitions() (map[string]*spec.Schema, error) {
	var doc spec.Swagger
	j, err := o.v2.json()
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(j, &doc); err != nil {
		return nil, fmt.Errorf("parse swagger document: %w", err)
	}
	out := make(map[string]*spec.Schema, len(doc.Definitions))
	for name := range doc.Definitions {
		s := doc.Definitions[name]
		out[name] = &s
	}
	return out, nil
}
