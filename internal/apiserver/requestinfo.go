package apiserver

import (
	"net/http"
	"strings"
)

// RequestInfo is what a request path and method say about the request.
type RequestInfo struct {
	IsResourceRequest bool
	Path              string
	// Verb is the Kubernetes verb: get, list, watch, create, update, patch,
	// delete, deletecollection (lower case, as RBAC names them).
	Verb        string
	APIPrefix   string // "api" or "apis"
	APIGroup    string
	APIVersion  string
	Namespace   string
	Resource    string
	Subresource string
	Name        string
}

// parseRequestInfo follows upstream's layout:
//
//	/api/v1/namespaces/{ns}/{resource}/{name}/{subresource}
//	/apis/{group}/{version}/namespaces/{ns}/{resource}/{name}/{subresource}
//
// and /api/v1/namespaces/{name}[/status|/finalize] for namespaces themselves.
func parseRequestInfo(r *http.Request) RequestInfo {
	info := RequestInfo{Path: r.URL.Path, Verb: strings.ToLower(r.Method)}
	parts := splitPath(r.URL.Path)
	if len(parts) < 3 || (parts[0] != "api" && parts[0] != "apis") {
		return info
	}
	info.APIPrefix = parts[0]
	parts = parts[1:]
	if info.APIPrefix == "apis" {
		if len(parts) < 3 {
			return info
		}
		info.APIGroup = parts[0]
		parts = parts[1:]
	}
	info.APIVersion = parts[0]
	parts = parts[1:]
	info.IsResourceRequest = true

	switch r.Method {
	case http.MethodPost:
		info.Verb = "create"
	case http.MethodGet, http.MethodHead:
		info.Verb = "get"
	case http.MethodPut:
		info.Verb = "update"
	case http.MethodPatch:
		info.Verb = "patch"
	case http.MethodDelete:
		info.Verb = "delete"
	default:
		info.Verb = ""
	}
	if parts[0] == "namespaces" {
		if len(parts) > 1 {
			info.Namespace = parts[1]
			// /namespaces/{name}/status|finalize address the namespace itself.
			if len(parts) > 2 && parts[2] != "status" && parts[2] != "finalize" {
				parts = parts[2:]
			} else {
				info.Resource = "namespaces"
				info.Name = parts[1]
				info.Namespace = ""
				if len(parts) > 2 {
					info.Subresource = parts[2]
				}
				parts = nil
			}
		}
	}
	if parts != nil {
		info.Resource = parts[0]
		if len(parts) > 1 {
			info.Name = parts[1]
		}
		if len(parts) > 2 {
			info.Subresource = parts[2]
		}
	}
	q := r.URL.Query()
	if info.Name == "" && info.Verb == "get" {
		if q.Get("watch") == "true" || q.Get("watch") == "1" {
			info.Verb = "watch"
		} else {
			info.Verb = "list"
		}
	} else if info.Name != "" && info.Subresource == "" && info.Verb == "get" && (q.Get("watch") == "true" || q.Get("watch") == "1") {
		// (Not of a subresource: a query for pods/NAME/proxy/... is the
		// backend's, and a GET there is get pods/proxy whatever it says.)
		info.Verb = "watch"
	}
	if info.Name == "" && info.Verb == "delete" {
		info.Verb = "deletecollection"
	}
	return info
}

func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}
