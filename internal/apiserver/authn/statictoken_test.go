package authn

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestStaticTokens(t *testing.T) {
	file := `tok-alice,alice,1001,"devs,ops"
tok-bob,bob,1002
,nobody,0
tok-carol,carol,1003,
`
	a, err := ParseTokens(strings.NewReader(file), "tokens.csv")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		header string
		want   *User
	}{
		{"groups from the fourth column", "Bearer tok-alice", &User{Name: "alice", UID: "1001", Groups: []string{"devs", "ops", AllAuthenticated}}},
		{"no groups column", "Bearer tok-bob", &User{Name: "bob", UID: "1002", Groups: []string{AllAuthenticated}}},
		{"scheme in any case", "bearer tok-bob", &User{Name: "bob", UID: "1002", Groups: []string{AllAuthenticated}}},
		{"an empty groups column is one empty group, as upstream", "Bearer tok-carol", &User{Name: "carol", UID: "1003", Groups: []string{"", AllAuthenticated}}},
		{"unknown token", "Bearer nope", nil},
		{"empty token is never accepted", "Bearer ", nil},
		{"basic auth", "Basic dG9rLWFsaWNl", nil},
		{"no header", "", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/api", nil)
			if tc.header != "" {
				r.Header.Set("Authorization", tc.header)
			}
			got, ok, err := a.Authenticate(r)
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

func TestStaticTokensBadFile(t *testing.T) {
	for _, tc := range []struct{ name, file, want string }{
		{"two columns", "tok,alice\n", "token file 'f' must have at least 3 columns (token, user name, user uid), found 2"},
		{"bad quoting", "tok,\"alice,1\n", `token file "f": parse error on line 1, column 14: extraneous or missing " in quoted-field`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseTokens(strings.NewReader(tc.file), "f")
			if err == nil || err.Error() != tc.want {
				t.Errorf("error = %v, want %s", err, tc.want)
			}
		})
	}
}
