package authn_test

import (
	"crypto/rand"
	"crypto/rsa"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/skiff-sh/skiff/internal/apiserver/authn"
	"github.com/skiff-sh/skiff/internal/testing/oidcissuer"
)

func TestOIDC(t *testing.T) {
	is := oidcissuer.Start(t)
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	claims := func(extra map[string]any) map[string]any {
		c := map[string]any{"iss": is.URL, "aud": "skiff", "sub": "u-123", "exp": now.Add(time.Hour).Unix(), "iat": now.Add(-time.Minute).Unix(),
			"email": "jane@example.com", "email_verified": true, "groups": []string{"devs", "ops"}, "tier": "gold"}
		for k, v := range extra {
			if v == nil {
				delete(c, k)
				continue
			}
			c[k] = v
		}
		return c
	}
	otherKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	dash, corp := "-", "corp:"
	cases := []struct {
		name    string
		opts    authn.OIDCOptions
		token   string
		want    *authn.User
		wantErr string // a substring; "" with want nil means no opinion
	}{
		{name: "sub with the issuer prefix by default", token: is.Sign(t, claims(nil)),
			want: &authn.User{Name: is.URL + "#u-123", Groups: []string{authn.AllAuthenticated}}},
		{name: "email claim has no prefix by default; groups prefixed", opts: authn.OIDCOptions{UsernameClaim: "email", GroupsClaim: "groups", GroupsPrefix: "oidc:"},
			token: is.Sign(t, claims(nil)),
			want:  &authn.User{Name: "jane@example.com", Groups: []string{"oidc:devs", "oidc:ops", authn.AllAuthenticated}}},
		{name: "a groups claim that is one string", opts: authn.OIDCOptions{UsernamePrefix: &dash, GroupsClaim: "groups"},
			token: is.Sign(t, claims(map[string]any{"groups": "admins"})),
			want:  &authn.User{Name: "u-123", Groups: []string{"admins", authn.AllAuthenticated}}},
		{name: "explicit prefix, jti as credential id", opts: authn.OIDCOptions{UsernamePrefix: &corp},
			token: is.Sign(t, claims(map[string]any{"jti": "abc"})),
			want:  &authn.User{Name: "corp:u-123", Groups: []string{authn.AllAuthenticated}, Extra: map[string][]string{"authentication.kubernetes.io/credential-id": {"JTI=abc"}}}},
		{name: "required claim present", opts: authn.OIDCOptions{UsernamePrefix: &dash, RequiredClaims: map[string]string{"tier": "gold"}},
			token: is.Sign(t, claims(nil)), want: &authn.User{Name: "u-123", Groups: []string{authn.AllAuthenticated}}},
		{name: "required claim differs", opts: authn.OIDCOptions{RequiredClaims: map[string]string{"tier": "silver"}},
			token: is.Sign(t, claims(nil)), wantErr: "required claim tier value does not match"},
		{name: "wrong audience", token: is.Sign(t, claims(map[string]any{"aud": "other"})), wantErr: "expected audience"},
		{name: "expired", token: is.Sign(t, claims(map[string]any{"exp": now.Add(-time.Minute).Unix()})), wantErr: "token is expired"},
		{name: "wrongly signed", token: oidcissuer.SignWith(t, otherKey, "test-key", claims(nil)), wantErr: "failed to verify signature"},
		{name: "unverified email", opts: authn.OIDCOptions{UsernameClaim: "email"},
			token: is.Sign(t, claims(map[string]any{"email_verified": false})), wantErr: "email not verified"},
		{name: "missing username claim", opts: authn.OIDCOptions{UsernameClaim: "preferred_username"},
			token: is.Sign(t, claims(nil)), wantErr: "claim not present: preferred_username"},
		{name: "another issuer's JWT: no opinion", token: is.Sign(t, claims(map[string]any{"iss": "https://elsewhere"}))},
		{name: "not a JWT: no opinion", token: "abcdef.0123456789abcdef"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			opts.IssuerURL, opts.ClientID, opts.CAFile = is.URL, "skiff", is.CAFile
			opts.Now = func() time.Time { return now }
			a, err := authn.NewOIDC(opts)
			if err != nil {
				t.Fatal(err)
			}
			r := httptest.NewRequest("GET", "/api", nil)
			r.Header.Set("Authorization", "Bearer "+tc.token)
			got, ok, err := a.Authenticate(r)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ok != (tc.want != nil) {
				t.Fatalf("ok = %v, want %v", ok, tc.want != nil)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("user (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOIDCOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts authn.OIDCOptions
		want string
	}{
		{"http issuer", authn.OIDCOptions{IssuerURL: "http://x", ClientID: "c"}, `--oidc-issuer-url ("http://x") must use https scheme`},
		{"no client id", authn.OIDCOptions{IssuerURL: "https://x"}, "--oidc-client-id must be set when --oidc-issuer-url is"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.opts.Validate(); err == nil || err.Error() != tc.want {
				t.Errorf("Validate() = %v, want %s", err, tc.want)
			}
		})
	}
}
