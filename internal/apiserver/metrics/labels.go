package metrics

import (
	"sort"
	"strings"
)

// RequestLabels are the label values of one request's metrics. Build them
// with LabelsFor, or fill them directly.
type RequestLabels struct {
	// Verb is upstream's reported verb: GET, LIST, WATCH, POST, PUT, PATCH,
	// APPLY, DELETE, CONNECT, ... ("other" for unknown methods).
	Verb string
	// DryRun is the sorted, deduplicated dryRun values ("All"), "" when
	// none, "invalid" when not valid.
	DryRun      string
	Group       string
	Version     string
	Resource    string
	Subresource string // for non-resource requests, the path
	// Scope is "resource" (named object or create), "namespace",
	// "cluster", or "" for non-resource requests.
	Scope     string
	Component string
}

// RequestInfo is what the handler knows about a request, from which
// LabelsFor derives the labels the way upstream does.
type RequestInfo struct {
	// Method is the HTTP method.
	Method string
	// Verb is the API verb in lower case (get, list, watch, create, update,
	// patch, delete, deletecollection, connect...). Only "watch" matters
	// here: it reports WATCH for a GET.
	Verb string
	// ContentType is the request's Content-Type; a PATCH with
	// application/apply-patch+yaml is reported as APPLY.
	ContentType string
	// DryRun holds the dryRun query values.
	DryRun []string

	IsResourceRequest bool
	APIGroup          string
	APIVersion        string
	Resource          string
	Subresource       string
	Namespace         string
	Name              string
	// Path is used as the subresource label of non-resource requests.
	Path string
}

// ComponentAPIServer is the component label of requests the API server
// itself serves.
const ComponentAPIServer = "apiserver"

var knownVerbs = map[string]bool{
	"APPLY": true, "CONNECT": true, "CREATE": true, "DELETE": true, "DELETECOLLECTION": true,
	"GET": true, "LIST": true, "PATCH": true, "POST": true, "PROXY": true, "PUT": true,
	"UPDATE": true, "WATCH": true, "WATCHLIST": true,
}

// LabelsFor derives the metric labels of a request as upstream does: the
// verb comes from the HTTP method (GET of a collection is LIST, with
// watch it is WATCH; PATCH with an apply patch is APPLY), the scope from the
// name and namespace, and non-resource requests put their path in the
// subresource label.
func LabelsFor(info RequestInfo, component string) RequestLabels {
	scope := scopeOf(info)
	l := RequestLabels{
		Verb:      reportedVerb(info, scope),
		DryRun:    cleanDryRun(info.DryRun),
		Scope:     scope,
		Component: component,
	}
	if info.IsResourceRequest {
		l.Group, l.Version, l.Resource, l.Subresource = info.APIGroup, info.APIVersion, info.Resource, info.Subresource
	} else {
		l.Subresource = info.Path
	}
	return l
}

func scopeOf(info RequestInfo) string {
	switch {
	case info.Name != "" || info.Verb == "create":
		return "resource"
	case info.Namespace != "":
		return "namespace"
	case info.IsResourceRequest:
		return "cluster"
	}
	return ""
}

func reportedVerb(info RequestInfo, scope string) string {
	verb := strings.ToUpper(info.Method)
	switch verb {
	case "GET", "HEAD":
		verb = "GET"
		if scope != "resource" && scope != "" {
			verb = "LIST"
		}
		if info.Verb == "watch" || info.Verb == "watchlist" {
			verb = "WATCH"
		}
	case "PATCH":
		if mediaType(info.ContentType) == "application/apply-patch+yaml" {
			verb = "APPLY"
		}
	}
	if !knownVerbs[verb] {
		return "other"
	}
	return verb
}

func mediaType(ct string) string {
	mt, _, _ := strings.Cut(ct, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

func cleanDryRun(values []string) string {
	if len(values) == 0 {
		return ""
	}
	seen := map[string]bool{}
	var out []string
	for _, v := range values {
		if v != "All" {
			return "invalid"
		}
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}
