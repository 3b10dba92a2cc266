package apiserver

import (
	"net/http"

	"k8s.io/apimachinery/pkg/api/validation/path"
	"k8s.io/apimachinery/pkg/fields"
)

// listedName is the object name a list or watch is limited to by a
// `metadata.name=<name>` field selector, or "". Authorization sees it as
// the request's name, as upstream's RequestInfo does, so that a rule with
// resourceNames allows an informer of that one object (kube-scheduler's
// and kube-controller-manager's of kube-system/extension-apiserver-
// authentication).
func listedName(r *http.Request, info RequestInfo) string {
	if !info.IsResourceRequest || info.Name != "" || (info.Verb != "list" && info.Verb != "watch") {
		return ""
	}
	raw := r.URL.Query().Get("fieldSelector")
	if raw == "" {
		return ""
	}
	sel, err := fields.ParseSelector(raw)
	if err != nil {
		return ""
	}
	name, ok := sel.RequiresExactMatch("metadata.name")
	if !ok || len(path.IsValidPathSegmentName(name)) > 0 {
		return ""
	}
	return name
}
