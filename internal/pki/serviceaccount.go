package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// The service-account key pair, named as kubeadm names it: sa.key signs
// tokens (--service-account-signing-key-file), sa.pub verifies them
// (--service-account-key-file) and is published in the issuer's JWKS.
const (
	ServiceAccountKeyFile    = "sa.key"
	ServiceAccountPubKeyFile = "sa.pub"
)

// EnsureServiceAccountKey loads sa.key from dir, creating sa.key (ECDSA
// P-256, like every Skiff key) and sa.pub when the key is missing, and
// rewriting sa.pub when it is missing. Unlike a certificate the key never
// expires and is never replaced: every token issued depends on it.
func EnsureServiceAccountKey(dir string) (crypto.Signer, error) {
	keyPath := filepath.Join(dir, ServiceAccountKeyFile)
	pubPath := filepath.Join(dir, ServiceAccountPubKeyFile)
	var key crypto.Signer
	data, err := os.ReadFile(keyPath)
	switch {
	case err == nil:
		block, _ := pem.Decode(data)
		if block == nil {
			return nil, fmt.Errorf("%s: no PEM data", keyPath)
		}
		var k any
		switch block.Type {
		case "EC PRIVATE KEY":
			k, err = x509.ParseECPrivateKey(block.Bytes)
		case "RSA PRIVATE KEY":
			k, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		default:
			k, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", keyPath, err)
		}
		var ok bool
		if key, ok = k.(crypto.Signer); !ok {
			return nil, fmt.Errorf("%s: unsupported key type %T", keyPath, k)
		}
	case errors.Is(err, fs.ErrNotExist):
		ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("generate service-account key: %w", err)
		}
		pemKey, err := encodeKey(ec)
		if err != nil {
			return nil, err
		}
		if err := writeFile(keyPath, pemKey); err != nil {
			return nil, err
		}
		key = ec
		_ = os.Remove(pubPath) // a public key of an older key must go
	default:
		return nil, fmt.Errorf("read %s: %w", keyPath, err)
	}
	if _, err := os.Stat(pubPath); errors.Is(err, fs.ErrNotExist) {
		der, err := x509.MarshalPKIXPublicKey(key.Public())
		if err != nil {
			return nil, fmt.Errorf("encode service-account public key: %w", err)
		}
		if err := writeFile(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})); err != nil {
			return nil, err
		}
	}
	return key, nil
}
