package authz

import (
	"context"
	"errors"
	"testing"

	"github.com/skiff-sh/skiff/internal/apiserver/authn"
)

func TestAlwaysAllowAuthenticated(t *testing.T) {
	tests := []struct {
		name string
		user *authn.User
		want Decision
	}{
		{name: "no user", want: NoOpinion},
		{name: "empty name", user: &authn.User{}, want: NoOpinion},
		{name: "anonymous", user: &authn.User{Name: "system:anonymous", Groups: []string{"system:unauthenticated"}}, want: NoOpinion},
		{name: "authenticated", user: &authn.User{Name: "alice", Groups: []string{"system:authenticated"}}, want: Allow},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := AlwaysAllowAuthenticated.Authorize(context.Background(), Attributes{User: tc.user, Verb: "get", Resource: "pods", ResourceRequest: true})
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("decision = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestUnion(t *testing.T) {
	fixed := func(d Decision, reason string, err error) Authorizer {
		return AuthorizerFunc(func(context.Context, Attributes) (Decision, string, error) { return d, reason, err })
	}
	tests := []struct {
		name       string
		auths      []Authorizer
		want       Decision
		wantReason string
		wantErr    bool
	}{
		{name: "empty", want: NoOpinion},
		{name: "first decides allow", auths: []Authorizer{fixed(NoOpinion, "", nil), fixed(Allow, "ok", nil), fixed(Deny, "no", nil)}, want: Allow, wantReason: "ok"},
		{name: "deny wins when first", auths: []Authorizer{fixed(Deny, "no", nil), fixed(Allow, "ok", nil)}, want: Deny, wantReason: "no"},
		{name: "error then allow", auths: []Authorizer{fixed(NoOpinion, "", errors.New("boom")), fixed(Allow, "", nil)}, want: Allow},
		{name: "nobody decides", auths: []Authorizer{fixed(NoOpinion, "", errors.New("boom"))}, want: NoOpinion, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, reason, err := Union(tc.auths...).Authorize(context.Background(), Attributes{})
			if d != tc.want || reason != tc.wantReason || (err != nil) != tc.wantErr {
				t.Errorf("got (%v, %q, %v), want (%v, %q, err=%v)", d, reason, err, tc.want, tc.wantReason, tc.wantErr)
			}
		})
	}
}

func TestDecisionString(t *testing.T) {
	for d, want := range map[Decision]string{Allow: "Allow", Deny: "Deny", NoOpinion: "NoOpinion", Decision(7): "Decision(7)"} {
		if got := d.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(d), got, want)
		}
	}
}
