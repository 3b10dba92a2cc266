package authn

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"k8s.io/klog/v2"
)

// StaticTokens authenticates bearer tokens listed in a file
// (`--token-auth-file`), upstream's CSV format: one token a line,
//
//	token,user,uid,"group1,group2"
//
// with the groups column optional. The user also gets system:authenticated.
// The file is read once, at start, as upstream does.
type StaticTokens struct {
	tokens map[string]*User
}

var _ Authenticator = (*StaticTokens)(nil)

// ReadTokenFile parses a token file. A record with fewer than three
// columns is an error; an empty token is skipped; a repeated token keeps
// the last record (upstream warns, and so does Skiff).
func ReadTokenFile(path string) (*StaticTokens, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseTokens(f, path)
}

// ParseTokens parses token records from r; name is used in messages.
func ParseTokens(r io.Reader, name string) (*StaticTokens, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	tokens := map[string]*User{}
	for n := 1; ; n++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("token file %q: %w", name, err)
		}
		if len(rec) < 3 {
			return nil, fmt.Errorf("token file '%s' must have at least 3 columns (token, user name, user uid), found %d", name, len(rec))
		}
		if rec[0] == "" {
			klog.Warningf("empty token has been found in token file '%s', record number '%d'", name, n)
			continue
		}
		if _, dup := tokens[rec[0]]; dup {
			klog.Warningf("duplicate token has been found in token file '%s', record number '%d'", name, n)
		}
		u := &User{Name: rec[1], UID: rec[2]}
		if len(rec) >= 4 {
			u.Groups = strings.Split(rec[3], ",")
		}
		tokens[rec[0]] = u
	}
	return &StaticTokens{tokens: tokens}, nil
}

// Authenticate implements Authenticator.
func (a *StaticTokens) Authenticate(r *http.Request) (*User, bool, error) {
	token, ok := BearerToken(r)
	if !ok {
		return nil, false, nil
	}
	u, ok := a.tokens[token]
	if !ok {
		return nil, false, nil
	}
	out := &User{Name: u.Name, UID: u.UID, Groups: append([]string(nil), u.Groups...)}
	if !out.InGroup(AllAuthenticated) {
		out.Groups = append(out.Groups, AllAuthenticated)
	}
	return out, true, nil
}

// BearerToken is the token of an "Authorization: Bearer <token>" header,
// read as upstream does (the scheme in any case, the token non-empty).
func BearerToken(r *http.Request) (string, bool) {
	parts := strings.SplitN(strings.TrimSpace(r.Header.Get("Authorization")), " ", 3)
	if len(parts) < 2 || !strings.EqualFold(parts[0], "bearer") || parts[1] == "" {
		return "", false
	}
	return parts[1], true
}
