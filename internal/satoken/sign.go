package satoken

import (
	"crypto"
	"fmt"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Signer signs tokens with one private key under one issuer.
type Signer struct {
	issuer string
	kid    string
	signer jose.Signer
}

// NewSigner signs as issuer with key (RSA or ECDSA); the JWS header carries
// upstream's kid of the key.
func NewSigner(issuer string, key crypto.Signer) (*Signer, error) {
	kid, err := KeyID(key.Public())
	if err != nil {
		return nil, err
	}
	alg, err := Algorithm(key.Public())
	if err != nil {
		return nil, err
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: key, KeyID: kid, Algorithm: string(alg), Use: "sig"}}, nil)
	if err != nil {
		return nil, fmt.Errorf("service-account signer: %w", err)
	}
	return &Signer{issuer: issuer, kid: kid, signer: s}, nil
}

// Issuer is the iss the signer writes into bound tokens.
func (s *Signer) Issuer() string { return s.issuer }

// KeyID is the kid of the signing key.
func (s *Signer) KeyID() string { return s.kid }

// Sign serializes and signs c. Bound claims get the signer's issuer; legacy
// claims keep theirs.
func (s *Signer) Sign(c Claims) (string, error) {
	if c.Issuer == "" {
		c.Issuer = s.issuer
	}
	tok, err := jwt.Signed(s.signer).Claims(c.Private).Claims(c.Claims).Serialize()
	if err != nil {
		return "", fmt.Errorf("sign service-account token: %w", err)
	}
	return tok, nil
}
