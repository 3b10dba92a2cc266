package bootstrap

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/big"
	"regexp"
	"strings"
)

// TokenPrefix starts every join token (k3s's format version marker).
const TokenPrefix = "K10"

// Token is a join token: "K10<ca-hash>::<id>.<secret>". The hash (SHA-256
// of the cluster CA certificate's DER, hex) lets the agent check the server
// before it sends anything; "<id>.<secret>" is a bootstrap token the API
// server accepts (kube-system Secret bootstrap-token-<id>).
type Token struct {
	CAHash string
	ID     string
	Secret string
}

var tokenPattern = regexp.MustCompile(`^K10([0-9a-f]{64})::([a-z0-9]{6})\.([a-z0-9]{16})$`)

// ParseToken parses a join token.
func ParseToken(s string) (Token, error) {
	m := tokenPattern.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return Token{}, fmt.Errorf("invalid join token: want K10<64 hex digits>::<6 chars>.<16 chars> (the contents of the server's <data-dir>/token)")
	}
	return Token{CAHash: m[1], ID: m[2], Secret: m[3]}, nil
}

// String is the token's text form.
func (t Token) String() string {
	return TokenPrefix + t.CAHash + "::" + t.ID + "." + t.Secret
}

// Bearer is the bootstrap token part, sent as a bearer token.
func (t Token) Bearer() string { return t.ID + "." + t.Secret }

// CAHash is the hash a join token pins: SHA-256 of the CA certificate's DER.
func CAHash(caDER []byte) string {
	sum := sha256.Sum256(caDER)
	return hex.EncodeToString(sum[:])
}

// NewToken makes a random token for the CA whose certificate is caDER.
func NewToken(caDER []byte) (Token, error) {
	id, err := randomString(6)
	if err != nil {
		return Token{}, err
	}
	secret, err := randomString(16)
	if err != nil {
		return Token{}, err
	}
	return Token{CAHash: CAHash(caDER), ID: id, Secret: secret}, nil
}

func randomString(n int) (string, error) {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	for i := range b {
		v, err := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		if err != nil {
			return "", err
		}
		b[i] = alphabet[v.Int64()]
	}
	return string(b), nil
}
