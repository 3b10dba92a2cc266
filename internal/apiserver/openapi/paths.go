package openapi

import (
	"sort"
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// param is one request parameter (path or query).
type param struct {
	name     string
	in       string // "path" or "query"
	typ      string // "string", "integer", "boolean"
	desc     string
	required bool
}

// operation is one HTTP method on one path.
type operation struct {
	method    string // "get", "post", "put", "patch", "delete"
	id        string
	desc      string
	action    string // x-kubernetes-action
	gvk       schema.GroupVersionKind
	tag       string
	params    []param
	body      string // definition name of the request body
	bodyReq   bool
	patch     bool   // body is a patch: four patch content types
	respond   string // definition name of the success response
	codes     []string
	watchable bool // list: also streams watch events
	connect   bool // a proxy: any body, any response (a string)
}

type pathItem struct {
	path   string
	params []param
	ops    []operation
}

// Parameters, with our own descriptions of upstream's query parameters.
var (
	pNamespace = param{name: "namespace", in: "path", typ: "string", required: true,
		desc: "object name and auth scope, such as for teams and projects"}
	pPretty = param{name: "pretty", in: "query", typ: "string",
		desc: "If 'true', the output is indented for reading."}
	pDryRun = param{name: "dryRun", in: "query", typ: "string",
		desc: "When present, the request is checked but not persisted. The only valid value is All."}
	pFieldManager = param{name: "fieldManager", in: "query", typ: "string",
		desc: "fieldManager names the actor making the change, for field ownership tracking. At most 128 printable characters."}
	pFieldValidation = param{name: "fieldValidation", in: "query", typ: "string",
		desc: "fieldValidation says what the server does with unknown or duplicate fields in the request: Ignore drops them silently, Warn drops them and returns a warning for each, Strict fails the request."}
	pForce = param{name: "force", in: "query", typ: "boolean",
		desc: "Force takes ownership of conflicting fields in an apply request. Only for apply patches."}
	pLabelSelector = param{name: "labelSelector", in: "query", typ: "string",
		desc: "A selector restricting the returned objects by their labels. Defaults to everything."}
	pFieldSelector = param{name: "fieldSelector", in: "query", typ: "string",
		desc: "A selector restricting the returned objects by their fields. Defaults to everything."}
	pLimit = param{name: "limit", in: "query", typ: "integer",
		desc: "The most items to return in one list call; the response carries a continue token when more remain."}
	pContinue = param{name: "continue", in: "query", typ: "string",
		desc: "The continue token of a previous list call, to fetch the next chunk of results."}
	pResourceVersion = param{name: "resourceVersion", in: "query", typ: "string",
		desc: "Constrains which resource versions a request may be served from. Unset means the most recent."}
	pResourceVersionMatch = param{name: "resourceVersionMatch", in: "query", typ: "string",
		desc: "How resourceVersion applies to a list call: Exact or NotOlderThan."}
	pWatch = param{name: "watch", in: "query", typ: "boolean",
		desc: "Watch for changes to the described resources and stream them as add, update and delete events."}
	pAllowWatchBookmarks = param{name: "allowWatchBookmarks", in: "query", typ: "boolean",
		desc: "Asks for BOOKMARK watch events. The server may send them or not."}
	pSendInitialEvents = param{name: "sendInitialEvents", in: "query", typ: "boolean",
		desc: "With watch=true, start the stream with synthetic events for the current state of the objects."}
	pTimeoutSeconds = param{name: "timeoutSeconds", in: "query", typ: "integer",
		desc: "Timeout for the list or watch call, in seconds."}
	pGracePeriodSeconds = param{name: "gracePeriodSeconds", in: "query", typ: "integer",
		desc: "Seconds before the object is deleted; zero means at once. Unset means the default of the kind."}
	pOrphanDependents = param{name: "orphanDependents", in: "query", typ: "boolean",
		desc: "Deprecated: use propagationPolicy. Whether dependents are orphaned instead of garbage collected."}
	pPropagationPolicy = param{name: "propagationPolicy", in: "query", typ: "string",
		desc: "Whether and how garbage collection deletes dependents: Orphan, Background or Foreground."}

	listParams = []param{pAllowWatchBookmarks, pContinue, pFieldSelector, pLabelSelector, pLimit,
		pResourceVersion, pResourceVersionMatch, pSendInitialEvents, pTimeoutSeconds, pWatch}
	writeParams            = []param{pDryRun, pFieldManager, pFieldValidation}
	patchParams            = []param{pDryRun, pFieldManager, pFieldValidation, pForce}
	deleteParams           = []param{pDryRun, pGracePeriodSeconds, pOrphanDependents, pPropagationPolicy}
	deleteCollectionParams = []param{pContinue, pDryRun, pFieldSelector, pGracePeriodSeconds, pLabelSelector,
		pLimit, pOrphanDependents, pPropagationPolicy, pResourceVersion, pResourceVersionMatch,
		pSendInitialEvents, pTimeoutSeconds}
)

func pName(kind string) param {
	return param{name: "name", in: "path", typ: "string", required: true, desc: "name of the " + kind}
}

// operationIDPart turns "rbac.authorization" into "RbacAuthorization" (or
// "rbacAuthorization" with lowerFirst), as upstream names operations.
func operationIDPart(s string, lowerFirst bool) string {
	var b strings.Builder
	capitalize := !lowerFirst
	for i, r := range s {
		if unicode.IsLetter(r) || r == '_' || (i != 0 && unicode.IsDigit(r)) {
			if capitalize {
				r = unicode.ToUpper(r)
				capitalize = false
			}
			b.WriteRune(r)
		} else {
			capitalize = true
		}
	}
	return b.String()
}

func groupName(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "core"
	}
	return strings.TrimSuffix(gv.Group, ".k8s.io")
}

// gvPath is the URL prefix of a group version: api/v1 or apis/apps/v1.
func gvPath(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "api/" + gv.Version
	}
	return "apis/" + gv.Group + "/" + gv.Version
}

var (
	scaleGVK   = schema.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}
	bindingGVK = schema.GroupVersionKind{Version: "v1", Kind: "Binding"}
)

// defNames are the definition names the operations of one resource refer
// to.
type defNames struct {
	kind, list                   string
	status, deleteOptions, patch string
	scale, binding               string
}

// resourcePaths lists upstream's paths and operations for one resource.
func resourcePaths(res registry.Resource, n defNames) []pathItem {
	kindDef, listDef := n.kind, n.list
	gv := res.GroupVersion
	gvk := gv.WithKind(res.Kind)
	idGV := operationIDPart(groupName(gv), false) + operationIDPart(gv.Version, false)
	tag := operationIDPart(groupName(gv), true) + "_" + gv.Version
	scope := ""
	base := "/" + gvPath(gv) + "/" + res.Resource
	collParams := []param{pPretty}
	if res.Namespaced {
		scope = "Namespaced"
		base = "/" + gvPath(gv) + "/namespaces/{namespace}/" + res.Resource
		collParams = []param{pNamespace, pPretty}
	}
	itemParams := append([]param{pName(res.Kind)}, collParams...)
	status, deleteOpts, patchDef := n.status, n.deleteOptions, n.patch
	deleted := status
	if res.ReturnDeletedObject && !res.DeleteDocumentedAsStatus {
		deleted = kindDef
	}
	op := func(method, verb, action, suffix, desc string, params []param) operation {
		return operation{method: method, id: verb + idGV + suffix, desc: desc, action: action, gvk: gvk, tag: tag, params: params}
	}
	kind := res.Kind

	coll := pathItem{path: base, params: collParams}
	list := op("get", "list", "list", scope+kind, "list or watch objects of kind "+kind, listParams)
	list.respond, list.codes, list.watchable = listDef, []string{"200"}, true
	create := op("post", "create", "post", scope+kind, "create a "+kind, writeParams)
	create.body, create.bodyReq, create.respond, create.codes = kindDef, true, kindDef, []string{"200", "201", "202"}
	delColl := op("delete", "delete", "deletecollection", "Collection"+scope+kind, "delete collection of "+kind, deleteCollectionParams)
	delColl.body, delColl.respond, delColl.codes = deleteOpts, status, []string{"200"}
	coll.ops = []operation{delColl, list, create}
	if listDef == "" {
		// A create-only resource (a review): POST on the collection only.
		coll.ops = []operation{create}
		return []pathItem{coll}
	}

	item := pathItem{path: base + "/{name}", params: itemParams}
	read := op("get", "read", "get", scope+kind, "read the specified "+kind, nil)
	read.respond, read.codes = kindDef, []string{"200"}
	replace := op("put", "replace", "put", scope+kind, "replace the specified "+kind, writeParams)
	replace.body, replace.bodyReq, replace.respond, replace.codes = kindDef, true, kindDef, []string{"200", "201"}
	patch := op("patch", "patch", "patch", scope+kind, "partially update the specified "+kind, patchParams)
	patch.body, patch.bodyReq, patch.patch, patch.respond, patch.codes = patchDef, true, true, kindDef, []string{"200", "201"}
	del := op("delete", "delete", "delete", scope+kind, "delete a "+kind, deleteParams)
	del.body, del.respond, del.codes = deleteOpts, deleted, []string{"200", "202"}
	item.ops = []operation{del, read, patch, replace}

	items := []pathItem{coll, item}
	if res.Namespaced {
		all := pathItem{path: "/" + gvPath(gv) + "/" + res.Resource, params: []param{pPretty}}
		l := op("get", "list", "list", kind+"ForAllNamespaces", "list or watch objects of kind "+kind, listParams)
		l.respond, l.codes, l.watchable = listDef, []string{"200"}, true
		all.ops = []operation{l}
		items = append(items, all)
	}

	subs := make([]string, 0, len(res.Subresources))
	for s := range res.Subresources {
		subs = append(subs, s)
	}
	sort.Strings(subs)
	for _, sub := range subs {
		suffix := scope + kind + operationIDPart(sub, false)
		p := pathItem{path: base + "/{name}/" + sub, params: itemParams}
		switch res.Subresources[sub].Handler {
		case registry.HandleStatus, registry.HandleScale:
			def, subGVK := kindDef, gvk
			what := sub + " of the specified " + kind
			if res.Subresources[sub].Handler == registry.HandleScale {
				def, subGVK = n.scale, scaleGVK
			}
			r := op("get", "read", "get", suffix, "read "+what, nil)
			r.respond, r.codes = def, []string{"200"}
			pa := op("patch", "patch", "patch", suffix, "partially update "+what, patchParams)
			pa.body, pa.bodyReq, pa.patch, pa.respond, pa.codes = patchDef, true, true, def, []string{"200", "201"}
			pu := op("put", "replace", "put", suffix, "replace "+what, writeParams)
			pu.body, pu.bodyReq, pu.respond, pu.codes = def, true, def, []string{"200", "201"}
			for _, o := range []*operation{&r, &pa, &pu} {
				o.gvk = subGVK
			}
			p.ops = []operation{r, pa, pu}
		case registry.HandleBinding:
			def := n.binding
			c := op("post", "create", "post", suffix, "create binding of a "+kind, writeParams)
			c.gvk, c.body, c.bodyReq, c.respond, c.codes = bindingGVK, def, true, def, []string{"200", "201", "202"}
			p.ops = []operation{c}
		case registry.HandleFinalize:
			pu := op("put", "replace", "put", suffix, "replace finalize of the specified "+kind, writeParams)
			pu.body, pu.bodyReq, pu.respond, pu.codes = kindDef, true, kindDef, []string{"200", "201"}
			p.ops = []operation{pu}
		case registry.HandleProxy:
			items = append(items, proxyPaths(res, p, gv.WithKind(res.Subresources[sub].Kind.Kind), idGV, tag, scope+kind+operationIDPart(sub, false))...)
			continue
		default:
			continue
		}
		items = append(items, p)
	}
	return items
}

// proxyMethods are the methods a proxy subresource relays.
var proxyMethods = []string{"delete", "get", "head", "options", "patch", "post", "put"}

// proxyPaths are the paths of a proxy subresource: .../{name}/proxy and
// .../{name}/proxy/{path}, each with a connect operation a method, as
// upstream names them (connectCoreV1GetNamespacedPodProxy[WithPath]).
// The options kind names the objects; the rest of the path may also come
// as the query parameter path.
func proxyPaths(res registry.Resource, bare pathItem, optsGVK schema.GroupVersionKind, idGV, tag, suffix string) []pathItem {
	what := strings.ToLower(res.Kind)
	pQueryPath := param{name: "path", in: "query", typ: "string", desc: "The path to relay the request to on the " + what + " (the rest of the URL path when it has one)."}
	pPathPath := param{name: "path", in: "path", typ: "string", required: true, desc: "The path to relay the request to."}
	params := []param{pName(optsGVK.Kind)}
	if res.Namespaced {
		params = append(params, pNamespace)
	}
	withPath := pathItem{path: bare.path + "/{path}", params: append(append([]param(nil), params...), pPathPath, pQueryPath)}
	bare.params = append(params, pQueryPath)
	for _, item := range []*pathItem{&bare, &withPath} {
		idSuffix := suffix
		if item == &withPath {
			idSuffix += "WithPath"
		}
		for _, m := range proxyMethods {
			method := strings.ToUpper(m)
			item.ops = append(item.ops, operation{
				method: m, id: "connect" + idGV + operationIDPart(m, false) + idSuffix,
				desc: "relay " + method + " requests to the " + what + " through the proxy subresource", action: "connect",
				gvk: optsGVK, tag: tag, codes: []string{"200"}, connect: true,
			})
		}
	}
	return []pathItem{bare, withPath}
}

// Content types of responses and request bodies.
var (
	objectMediaTypes = []string{"application/json", "application/vnd.kubernetes.protobuf", "application/yaml"}
	listMediaTypes   = []string{"application/json", "application/json;stream=watch", "application/vnd.kubernetes.protobuf",
		"application/vnd.kubernetes.protobuf;stream=watch", "application/yaml"}
	patchMediaTypes = []string{"application/apply-patch+yaml", "application/json-patch+json",
		"application/merge-patch+json", "application/strategic-merge-patch+json"}
)

func (p param) v2() map[string]any {
	m := map[string]any{"name": p.name, "in": p.in, "type": p.typ, "description": p.desc, "uniqueItems": true}
	if p.required {
		m["required"] = true
	}
	return m
}

func (p param) v3() map[string]any {
	m := map[string]any{"name": p.name, "in": p.in, "description": p.desc,
		"schema": map[string]any{"type": p.typ, "uniqueItems": true}}
	if p.required {
		m["required"] = true
	}
	return m
}

func (o operation) common() map[string]any {
	return map[string]any{
		"operationId":                     o.id,
		"description":                     o.desc,
		"tags":                            []any{o.tag},
		"x-kubernetes-action":             o.action,
		"x-kubernetes-group-version-kind": gvkMap(o.gvk),
	}
}

func (o operation) v2() map[string]any {
	m := o.common()
	params := make([]any, 0, len(o.params)+1)
	if o.body != "" {
		body := map[string]any{"name": "body", "in": "body", "schema": map[string]any{"$ref": refPrefix(false) + o.body}}
		if o.bodyReq {
			body["required"] = true
		}
		params = append(params, body)
	}
	for _, p := range o.params {
		params = append(params, p.v2())
	}
	if len(params) > 0 {
		m["parameters"] = params
	}
	m["consumes"] = []string{"*/*"}
	if o.patch {
		m["consumes"] = patchMediaTypes
	}
	m["produces"] = objectMediaTypes
	if o.watchable {
		m["produces"] = listMediaTypes
	}
	if o.connect {
		m["produces"] = []string{"*/*"}
	}
	m["schemes"] = []string{"https"}
	responses := map[string]any{"401": map[string]any{"description": "Unauthorized"}}
	for _, c := range o.codes {
		responses[c] = map[string]any{"description": codeText[c], "schema": o.responseSchema(false)}
	}
	m["responses"] = responses
	return m
}

func (o operation) v3() map[string]any {
	m := o.common()
	if len(o.params) > 0 {
		params := make([]any, 0, len(o.params))
		for _, p := range o.params {
			params = append(params, p.v3())
		}
		m["parameters"] = params
	}
	if o.body != "" {
		ref := map[string]any{"schema": map[string]any{"$ref": refPrefix(true) + o.body}}
		content := map[string]any{"*/*": ref}
		if o.patch {
			content = map[string]any{}
			for _, t := range patchMediaTypes {
				content[t] = ref
			}
		}
		body := map[string]any{"content": content}
		if o.bodyReq {
			body["required"] = true
		}
		m["requestBody"] = body
	}
	types := objectMediaTypes
	if o.watchable {
		types = listMediaTypes
	}
	if o.connect {
		types = []string{"*/*"}
	}
	responses := map[string]any{"401": map[string]any{"description": "Unauthorized"}}
	for _, c := range o.codes {
		content := map[string]any{}
		for _, t := range types {
			content[t] = map[string]any{"schema": o.responseSchema(true)}
		}
		responses[c] = map[string]any{"description": codeText[c], "content": content}
	}
	m["responses"] = responses
	return m
}

// responseSchema is the schema of a success response: the respond
// definition, or a string for a proxy.
func (o operation) responseSchema(v3 bool) map[string]any {
	if o.connect {
		return map[string]any{"type": "string"}
	}
	return map[string]any{"$ref": refPrefix(v3) + o.respond}
}

var codeText = map[string]string{"200": "OK", "201": "Created", "202": "Accepted"}

func (p pathItem) render(v3 bool) map[string]any {
	m := map[string]any{}
	params := make([]any, 0, len(p.params))
	for _, pa := range p.params {
		if v3 {
			params = append(params, pa.v3())
		} else {
			params = append(params, pa.v2())
		}
	}
	if len(params) > 0 {
		m["parameters"] = params
	}
	for _, o := range p.ops {
		if v3 {
			m[o.method] = o.v3()
		} else {
			m[o.method] = o.v2()
		}
	}
	return m
}

// scaleSubresource and bindingSubresource name the subresource of res
// served by that handler ("" when none).
func scaleSubresource(res registry.Resource) string {
	return subresourceServedBy(res, registry.HandleScale)
}

func bindingSubresource(res registry.Resource) string {
	return subresourceServedBy(res, registry.HandleBinding)
}

func subresourceServedBy(res registry.Resource, h registry.SubresourceHandler) string {
	for name, sub := range res.Subresources {
		if sub.Handler == h {
			return name
		}
	}
	return ""
}
