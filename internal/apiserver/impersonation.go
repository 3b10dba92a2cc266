package apiserver

// Impersonation: the Impersonate-User, -Group, -Uid and -Extra-<key>
// headers, decided as upstream v1.37 decides them (its constrained
// impersonation, beta and on by default, with the legacy `impersonate`
// verb as the last mode).
//
// The modes are tried in order; the first whose filter fits the wanted user
// and whose checks all pass gives the user the request then acts as. A
// constrained mode <m> asks two things of the authorizer: may the requestor
// do this very request on someone else's behalf (verb
// `impersonate-on:<m>:<verb>` with the request's own resource or path), and
// may it become this user (verb `impersonate:<m>` on users, groups, uids,
// userextras/<key>, serviceaccounts or nodes in authentication.k8s.io).
// The legacy mode asks `impersonate` on users, groups and serviceaccounts
// in the core group, uids and userextras in authentication.k8s.io. When no
// mode allows, the 403 is the first refusal met, in upstream's wording.

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/authn"
	"github.com/skiff-sh/skiff/internal/apiserver/authz"
)

// The impersonation headers, as upstream spells them (http.Header's
// canonical form).
const (
	impersonateUserHeader        = "Impersonate-User"
	impersonateUIDHeader         = "Impersonate-Uid"
	impersonateGroupHeader       = "Impersonate-Group"
	impersonateExtraHeaderPrefix = "Impersonate-Extra-"
)

const (
	serviceAccountPrefix = "system:serviceaccount:"
	nodeUserPrefix       = "system:node:"
	// nodeNameExtraKey is the extra a service-account token bound to a pod
	// carries: the pod's node.
	nodeNameExtraKey = "authentication.kubernetes.io/node-name"
	// manyChecks: from this many groups or extra values on, a constrained
	// mode first asks once for "*".
	manyChecks = 4
)

// wantedUserFromHeaders reads (and removes) the impersonation headers. It
// returns nil when the request impersonates nobody, and 400 when it asks for
// groups, a UID or extras without a user name.
func wantedUserFromHeaders(h http.Header) (*authn.User, error) {
	want := &authn.User{Name: h.Get(impersonateUserHeader), UID: h.Get(impersonateUIDHeader)}
	want.Groups = append(want.Groups, h.Values(impersonateGroupHeader)...)
	hasExtra := false
	for name, values := range h {
		if !strings.HasPrefix(name, impersonateExtraHeaderPrefix) {
			continue
		}
		hasExtra = true
		if len(values) == 0 {
			continue
		}
		key := strings.ToLower(name[len(impersonateExtraHeaderPrefix):])
		if k, err := url.PathUnescape(key); err == nil {
			key = k
		}
		if want.Extra == nil {
			want.Extra = map[string][]string{}
		}
		want.Extra[key] = append(want.Extra[key], values...)
	}
	if want.Name == "" {
		if want.UID != "" || len(want.Groups) > 0 || hasExtra {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("requested &user.DefaultInfo{Name:%q, UID:%q, Groups:%#v, Extra:%#v} without impersonating a user name",
				want.Name, want.UID, want.Groups, want.Extra))
		}
		return nil, nil
	}
	h.Del(impersonateUserHeader)
	h.Del(impersonateUIDHeader)
	h.Del(impersonateGroupHeader)
	for name := range h {
		if strings.HasPrefix(name, impersonateExtraHeaderPrefix) {
			h.Del(name)
		}
	}
	return want, nil
}

// impersonation is the outcome: the user the request acts as, and the verb
// that allowed it ("" for the legacy `impersonate`), which the audit log
// records.
type impersonation struct {
	User       *authn.User
	Constraint string
}

// impersonate decides a request that carries impersonation headers. attrs
// describe the request itself, made by the requestor. It returns nil when
// the request impersonates nobody.
func impersonate(r *http.Request, a authz.Authorizer, attrs authz.Attributes) (*impersonation, error) {
	want, err := wantedUserFromHeaders(r.Header)
	if err != nil || want == nil {
		return nil, err
	}
	ctx := r.Context()
	check := func(at authz.Attributes) error {
		d, reason, err := a.Authorize(ctx, at)
		if d == authz.Allow {
			return nil
		}
		msg := reason
		switch {
		case err != nil && reason != "":
			msg = fmt.Sprintf("%v: %s", err, reason)
		case err != nil:
			msg = err.Error()
		}
		return forbidden(at, msg)
	}
	var firstErr error
	for _, m := range impersonationModes {
		got, err := m.check(check, want, attrs)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		if got != nil {
			return got, nil
		}
	}
	if firstErr == nil {
		firstErr = apierrors.NewForbidden(schema.GroupResource{}, "", fmt.Errorf("all impersonation modes failed"))
	}
	return nil, firstErr
}

// forbidden is upstream's 403 for attributes and a reason.
func forbidden(at authz.Attributes, reason string) error {
	msg := authz.ForbiddenMessage(at)
	if reason != "" {
		msg += ": " + reason
	}
	return apierrors.NewForbidden(schema.GroupResource{Group: at.APIGroup, Resource: at.Resource}, at.Name, fmt.Errorf("%s", msg))
}

// impersonationMode is one way to be allowed to impersonate.
type impersonationMode struct {
	// name is the constrained mode ("" for legacy).
	name string
	// fits says whether the mode applies to this wanted user.
	fits func(want, requestor *authn.User) bool
}

// impersonationModes are upstream's, in its order.
var impersonationModes = []impersonationMode{
	{name: "associated-node", fits: func(want, requestor *authn.User) bool {
		node, ok := nodeName(want.Name)
		if !ok || !onlyName(want) {
			return false
		}
		if _, _, sa := serviceAccountName(requestor.Name); !sa {
			return false
		}
		v := requestor.Extra[nodeNameExtraKey]
		return len(v) == 1 && v[0] == node
	}},
	{name: "arbitrary-node", fits: func(want, _ *authn.User) bool {
		_, ok := nodeName(want.Name)
		return ok && onlyName(want)
	}},
	{name: "serviceaccount", fits: func(want, _ *authn.User) bool {
		_, _, ok := serviceAccountName(want.Name)
		return ok && onlyName(want)
	}},
	{name: "user-info", fits: func(want, _ *authn.User) bool {
		_, node := nodeName(want.Name)
		_, _, sa := serviceAccountName(want.Name)
		return !node && !sa
	}},
	{name: "", fits: func(*authn.User, *authn.User) bool { return true }},
}

func (m impersonationMode) check(check func(authz.Attributes) error, want *authn.User, attrs authz.Attributes) (*impersonation, error) {
	requestor := attrs.User
	if !m.fits(want, requestor) {
		return nil, nil
	}
	constrained := m.name != ""
	verb, gv := "impersonate", schema.GroupVersion{Version: "v1"}
	if constrained {
		verb, gv = "impersonate:"+m.name, schema.GroupVersion{Group: "authentication.k8s.io", Version: "v1"}
	}
	// For a node's own service account, the check is about being such an
	// account (the keys of its extra), for every node name at once.
	asker := requestor
	allNames := false
	if m.name == "associated-node" {
		keys := make([]string, 0, len(requestor.Extra))
		for k := range requestor.Extra {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		asker = &authn.User{Name: requestor.Name, UID: requestor.UID, Groups: requestor.Groups,
			Extra: map[string][]string{"authentication.kubernetes.io/associated-node-keys": keys}}
		allNames = true
	}
	if constrained {
		on := attrs
		on.User = asker
		on.Verb = "impersonate-on:" + m.name + ":" + attrs.Verb
		if err := check(on); err != nil {
			return nil, err
		}
	}
	base := func(resource, name string, g schema.GroupVersion) authz.Attributes {
		return authz.Attributes{User: asker, Verb: verb, APIGroup: g.Group, APIVersion: g.Version, Resource: resource, Name: name, ResourceRequest: true}
	}
	actual := &authn.User{Name: want.Name, UID: want.UID, Groups: slices.Clone(want.Groups), Extra: want.Extra}

	// The user name: a node, a service account, or a user.
	at := base("users", want.Name, gv)
	if node, ok := nodeName(want.Name); ok && constrained {
		at.Resource, at.Name = "nodes", node
		if allNames {
			at.Name = "*"
		}
		if len(want.Groups) > 0 {
			return nil, forbidden(at, fmt.Sprintf("when impersonating a node, cannot impersonate groups %q", want.Groups))
		}
		actual.Groups = []string{authn.NodesGroup}
	}
	if ns, name, ok := serviceAccountName(want.Name); ok {
		at.Resource, at.Namespace, at.Name = "serviceaccounts", ns, name
		if constrained && len(want.Groups) > 0 {
			return nil, forbidden(at, fmt.Sprintf("when impersonating a service account, cannot impersonate groups %q", want.Groups))
		}
		if len(want.Groups) == 0 {
			actual.Groups = []string{"system:serviceaccounts", "system:serviceaccounts:" + ns}
		}
	}
	if err := check(at); err != nil {
		return nil, err
	}

	authnGV := schema.GroupVersion{Group: "authentication.k8s.io", Version: "v1"}
	if want.UID != "" {
		if err := check(base("uids", want.UID, authnGV)); err != nil {
			return nil, err
		}
	}

	if len(want.Groups) > 0 {
		at := base("groups", "", gv)
		if constrained {
			if slices.Contains(want.Groups, "") {
				return nil, forbidden(at, "impersonating the empty string group is not allowed")
			}
			if slices.Contains(want.Groups, authn.SystemMasters) {
				at.Name = authn.SystemMasters
				return nil, forbidden(at, "impersonating the system:masters group is not allowed")
			}
		}
		allowedAll := false
		if constrained && len(want.Groups) >= manyChecks {
			at.Name = "*"
			allowedAll = check(at) == nil
		}
		for _, g := range want.Groups {
			if allowedAll {
				break
			}
			at.Name = g
			if err := check(at); err != nil {
				return nil, err
			}
		}
	}

	if len(want.Extra) > 0 {
		at := base("userextras", "", authnGV)
		if constrained {
			if err := validateImpersonatedExtra(want.Extra); err != nil {
				return nil, forbidden(at, err.Error())
			}
		}
		allowedAll := false
		if constrained && manyExtra(want.Extra) {
			at.Subresource, at.Name = "*", "*"
			allowedAll = check(at) == nil
		}
		keys := make([]string, 0, len(want.Extra))
		for k := range want.Extra {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if allowedAll {
				break
			}
			for _, v := range want.Extra[k] {
				at.Subresource, at.Name = k, v
				if err := check(at); err != nil {
					return nil, err
				}
			}
		}
	}

	if actual.Name == authn.Anonymous {
		actual.Groups = ensureGroup(actual.Groups, authn.AllUnauthenticated)
	} else if !slices.Contains(actual.Groups, authn.AllUnauthenticated) {
		actual.Groups = ensureGroup(actual.Groups, authn.AllAuthenticated)
	}
	constraint := ""
	if constrained {
		constraint = verb
	}
	return &impersonation{User: actual, Constraint: constraint}, nil
}

func ensureGroup(groups []string, g string) []string {
	if slices.Contains(groups, g) {
		return groups
	}
	return append(groups, g)
}

func onlyName(u *authn.User) bool {
	return u.UID == "" && len(u.Groups) == 0 && len(u.Extra) == 0
}

// nodeName is the node of a "system:node:<name>" user with a valid name.
func nodeName(user string) (string, bool) {
	if !strings.HasPrefix(user, nodeUserPrefix) {
		return "", false
	}
	name := strings.TrimPrefix(user, nodeUserPrefix)
	if len(validation.NameIsDNSSubdomain(name, false)) != 0 {
		return "", false
	}
	return name, true
}

// serviceAccountName splits "system:serviceaccount:<ns>:<name>", both parts
// valid names, as upstream's serviceaccount.SplitUsername.
func serviceAccountName(user string) (namespace, name string, ok bool) {
	if !strings.HasPrefix(user, serviceAccountPrefix) {
		return "", "", false
	}
	parts := strings.Split(strings.TrimPrefix(user, serviceAccountPrefix), ":")
	if len(parts) != 2 {
		return "", "", false
	}
	namespace, name = parts[0], parts[1]
	if len(validation.ValidateNamespaceName(namespace, false)) != 0 || len(validation.NameIsDNSSubdomain(name, false)) != 0 {
		return "", "", false
	}
	return namespace, name, true
}

func validateImpersonatedExtra(extra map[string][]string) error {
	p := field.NewPath("extra", "key")
	for key, values := range extra {
		if key == "" {
			return fmt.Errorf("impersonating the empty string key in extra is not allowed")
		}
		if err := utilvalidation.IsDomainPrefixedPath(p, key).ToAggregate(); err != nil {
			return fmt.Errorf("impersonating an invalid key in extra is not allowed: %w", err)
		}
		if key != strings.ToLower(key) {
			return fmt.Errorf("impersonating a non-lowercase key in extra is not allowed: %q", key)
		}
		if len(values) == 0 {
			return fmt.Errorf("impersonating empty values in extra is not allowed")
		}
		if slices.Contains(values, "") {
			return fmt.Errorf("impersonating the empty string value in extra is not allowed")
		}
	}
	return nil
}

func manyExtra(extra map[string][]string) bool {
	if len(extra) >= manyChecks {
		return true
	}
	n := 0
	for _, v := range extra {
		n += len(v)
	}
	return n >= manyChecks
}

// requestAttributes are the authorization attributes of a request made by
// user: the API verb and resource, or the lower-case method and path.
func requestAttributes(r *http.Request, info RequestInfo, user *authn.User) authz.Attributes {
	attrs := authz.Attributes{
		User: user, Verb: info.Verb, APIGroup: info.APIGroup, APIVersion: info.APIVersion,
		Resource: info.Resource, Subresource: info.Subresource, Namespace: info.Namespace, Name: info.Name,
		Path: r.URL.Path, ResourceRequest: info.IsResourceRequest, FieldSelector: r.URL.Query().Get("fieldSelector"),
	}
	if !info.IsResourceRequest {
		attrs.Verb = strings.ToLower(r.Method)
	}
	if name := listedName(r, info); name != "" {
		attrs.Name = name
	}
	return attrs
}
