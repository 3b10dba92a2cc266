// Package authn authenticates API requests: it turns an *http.Request into a
// User (name, UID, groups, extra). It is Skiff's own small contract, shaped
// like upstream's authenticator.Request: an Authenticator answers
// (user, true, nil) when it recognises the request, (nil, false, nil) when it
// has no opinion, and an error when the credentials it recognises are bad.
//
// The handler chain in internal/apiserver runs the configured Authenticator,
// stores the User in the request context with WithUser, and answers 401 to
// requests nobody authenticated (except the public health and version paths).
package authn

import (
	"context"
	"errors"
	"net/http"
)

// Well-known group names, as upstream spells them.
const (
	// AllAuthenticated is added to every authenticated user's groups.
	AllAuthenticated = "system:authenticated"
	// AllUnauthenticated is the group of the anonymous user.
	AllUnauthenticated = "system:unauthenticated"
	// SystemMasters is the group that bypasses authorization upstream.
	SystemMasters = "system:masters"
	// NodesGroup is the group of kubelet client certificates.
	NodesGroup = "system:nodes"
	// Anonymous is the name of the unauthenticated user.
	Anonymous = "system:anonymous"
)

// User is an authenticated identity.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// InGroup reports whether the user belongs to group g.
func (u *User) InGroup(g string) bool {
	if u == nil {
		return false
	}
	for _, have := range u.Groups {
		if have == g {
			return true
		}
	}
	return false
}

// Authenticator authenticates one request.
type Authenticator interface {
	// Authenticate returns the user and true when the request carries
	// credentials this authenticator accepts; nil, false, nil when it carries
	// none it knows about; and an error when it carries credentials of its
	// kind that are invalid.
	Authenticate(r *http.Request) (*User, bool, error)
}

// AuthenticatorFunc adapts a function to Authenticator.
type AuthenticatorFunc func(r *http.Request) (*User, bool, error)

// Authenticate calls f(r).
func (f AuthenticatorFunc) Authenticate(r *http.Request) (*User, bool, error) { return f(r) }

// Union tries each authenticator in order; the first that authenticates the
// request wins. If none does, the errors of those that failed are joined and
// returned (nil when all simply had no opinion).
func Union(auths ...Authenticator) Authenticator {
	return AuthenticatorFunc(func(r *http.Request) (*User, bool, error) {
		var errs []error
		for _, a := range auths {
			u, ok, err := a.Authenticate(r)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if ok {
				return u, true, nil
			}
		}
		return nil, false, errors.Join(errs...)
	})
}

type userKey struct{}

// WithUser returns a copy of ctx that carries u.
func WithUser(ctx context.Context, u *User) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

// UserFrom returns the user stored in ctx by WithUser.
func UserFrom(ctx context.Context) (*User, bool) {
	u, ok := ctx.Value(userKey{}).(*User)
	return u, ok && u != nil
}
