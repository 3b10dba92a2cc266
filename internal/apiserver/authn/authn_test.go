package authn

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestUnion(t *testing.T) {
	alice := &User{Name: "alice"}
	bob := &User{Name: "bob"}
	none := AuthenticatorFunc(func(*http.Request) (*User, bool, error) { return nil, false, nil })
	fails := AuthenticatorFunc(func(*http.Request) (*User, bool, error) { return nil, false, errors.New("bad token") })
	as := func(u *User) Authenticator {
		return AuthenticatorFunc(func(*http.Request) (*User, bool, error) { return u, true, nil })
	}
	tests := []struct {
		name    string
		auths   []Authenticator
		want    *User
		wantOK  bool
		wantErr bool
	}{
		{name: "empty", wantOK: false},
		{name: "first success wins", auths: []Authenticator{none, as(alice), as(bob)}, want: alice, wantOK: true},
		{name: "error then success", auths: []Authenticator{fails, as(bob)}, want: bob, wantOK: true},
		{name: "no opinion", auths: []Authenticator{none, none}},
		{name: "only errors", auths: []Authenticator{none, fails}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, ok, err := Union(tc.auths...).Authenticate(httptest.NewRequest("GET", "/", nil))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if ok != tc.wantOK {
				t.Fatalf("ok = %v, want %v", ok, tc.wantOK)
			}
			if diff := cmp.Diff(tc.want, u); diff != "" {
				t.Errorf("user (-want +got):\n%s", diff)
			}
		})
	}
}

func TestContext(t *testing.T) {
	if _, ok := UserFrom(context.Background()); ok {
		t.Fatal("UserFrom(empty ctx) found a user")
	}
	if _, ok := UserFrom(WithUser(context.Background(), nil)); ok {
		t.Fatal("UserFrom found a nil user")
	}
	u := &User{Name: "alice", Groups: []string{"dev"}}
	got, ok := UserFrom(WithUser(context.Background(), u))
	if !ok || got != u {
		t.Fatalf("UserFrom = %v, %v; want %v, true", got, ok, u)
	}
}

func TestInGroup(t *testing.T) {
	u := &User{Groups: []string{"a", "b"}}
	if !u.InGroup("b") || u.InGroup("c") {
		t.Errorf("InGroup wrong for %v", u.Groups)
	}
	var nilUser *User
	if nilUser.InGroup("a") {
		t.Error("nil user in group")
	}
}
