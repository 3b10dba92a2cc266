package satoken

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"os"

	jose "github.com/go-jose/go-jose/v4"
)

// KeyID is upstream's key id for a public key: the unpadded base64url
// SHA-256 of its PKIX DER encoding.
func KeyID(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("encode public key: %w", err)
	}
	sum := sha256.Sum256(der)
	return base64.RawURLEncoding.EncodeToString(sum[:]), nil
}

// Algorithm is the JWS algorithm a key signs with: RS256 for RSA, ES256,
// ES384 or ES512 for the ECDSA curves P-256, P-384, P-521.
func Algorithm(pub crypto.PublicKey) (jose.SignatureAlgorithm, error) {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		return jose.RS256, nil
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256():
			return jose.ES256, nil
		case elliptic.P384():
			return jose.ES384, nil
		case elliptic.P521():
			return jose.ES512, nil
		}
		return "", errors.New("unknown ECDSA curve, must be P-256, P-384 or P-521")
	}
	return "", fmt.Errorf("unsupported key type %T", pub)
}

// ParsePrivateKey reads the first private key in PEM data (PKCS#1 RSA,
// SEC 1 EC or PKCS#8).
func ParsePrivateKey(data []byte) (crypto.Signer, error) {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, errors.New("no private key found in PEM data")
		}
		switch block.Type {
		case "RSA PRIVATE KEY":
			return x509.ParsePKCS1PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			return x509.ParseECPrivateKey(block.Bytes)
		case "PRIVATE KEY":
			k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
			if err != nil {
				return nil, err
			}
			s, ok := k.(crypto.Signer)
			if !ok {
				return nil, fmt.Errorf("unsupported private key type %T", k)
			}
			return s, nil
		}
	}
}

// ParsePublicKeys reads every public key in PEM data, as upstream's
// --service-account-key-file accepts them: public keys (PKIX or PKCS#1),
// private keys (their public half) and certificates.
func ParsePublicKeys(data []byte) ([]crypto.PublicKey, error) {
	var keys []crypto.PublicKey
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		var (
			pub crypto.PublicKey
			err error
		)
		switch block.Type {
		case "PUBLIC KEY":
			pub, err = x509.ParsePKIXPublicKey(block.Bytes)
		case "RSA PUBLIC KEY":
			pub, err = x509.ParsePKCS1PublicKey(block.Bytes)
		case "CERTIFICATE":
			var c *x509.Certificate
			if c, err = x509.ParseCertificate(block.Bytes); err == nil {
				pub = c.PublicKey
			}
		case "RSA PRIVATE KEY", "EC PRIVATE KEY", "PRIVATE KEY":
			var s crypto.Signer
			if s, err = ParsePrivateKey(pem.EncodeToMemory(block)); err == nil {
				pub = s.Public()
			}
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", block.Type, err)
		}
		keys = append(keys, pub)
	}
	if len(keys) == 0 {
		return nil, errors.New("no public keys found in PEM data")
	}
	return keys, nil
}

// LoadPrivateKey reads a private key file.
func LoadPrivateKey(path string) (crypto.Signer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	k, err := ParsePrivateKey(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// LoadPublicKeys reads the public keys of every file.
func LoadPublicKeys(paths ...string) ([]crypto.PublicKey, error) {
	var out []crypto.PublicKey
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		keys, err := ParsePublicKeys(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		out = append(out, keys...)
	}
	return out, nil
}

// JWKS is the JSON Web Key Set of the public keys, as the issuer publishes
// it at /openid/v1/jwks: each key with its kid, alg and use "sig".
func JWKS(keys []crypto.PublicKey) (jose.JSONWebKeySet, error) {
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{}}
	for _, k := range keys {
		kid, err := KeyID(k)
		if err != nil {
			return set, err
		}
		alg, err := Algorithm(k)
		if err != nil {
			return set, err
		}
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: k, KeyID: kid, Algorithm: string(alg), Use: "sig"})
	}
	return set, nil
}
