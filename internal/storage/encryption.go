package storage

// Encryption at rest: a Transformer sits between an object's encoded bytes
// and what is kept in etcd. The providers are upstream's (aescbc, aesgcm,
// secretbox, identity) with upstream's stored layout, so a store written by
// either can be read by the other with the same keys:
//
//	k8s:enc:<provider>:v1:<key name>:<ciphertext>
//
// aescbc: a random 16-byte IV, then AES-CBC with PKCS#7 padding.
// aesgcm: a random 12-byte nonce, then AES-GCM sealed with the etcd key as
// additional data (so a value cannot be moved to another key).
// secretbox: a random 24-byte nonce, then NaCl secretbox (XSalsa20-Poly1305).
// identity: the bytes as they are.
//
// Writing uses the first provider and its first key; reading finds the
// provider and key by the prefix. A value read with anything but the first
// provider's first key is stale, and an update rewrites it even when the
// object did not change: rotation is "add the new key first, restart,
// rewrite every object" (e.g. kubectl get secrets -A -o json | kubectl
// replace -f -).

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"io"

	"golang.org/x/crypto/nacl/secretbox"
	"k8s.io/apimachinery/pkg/runtime"
)

// Transformer turns an object's encoded bytes into the bytes kept in etcd
// and back. key is the etcd key (authenticated data for aesgcm).
type Transformer interface {
	TransformToStorage(data []byte, key string) ([]byte, error)
	// TransformFromStorage returns the plain bytes, and stale when the
	// value should be rewritten with the current key.
	TransformFromStorage(data []byte, key string) (plain []byte, stale bool, err error)
}

// encPrefix begins every encrypted value.
const encPrefix = "k8s:enc:"

// identity stores bytes as they are; it refuses to read what looks
// encrypted, so a missing key is an error, not garbage.
type identity struct{}

func (identity) TransformToStorage(data []byte, _ string) ([]byte, error) { return data, nil }

func (identity) TransformFromStorage(data []byte, _ string) ([]byte, bool, error) {
	if bytes.HasPrefix(data, []byte(encPrefix)) {
		return nil, false, errors.New("identity transformer tried to read encrypted data")
	}
	return data, false, nil
}

// sealer is one key of one provider.
type sealer interface {
	seal(plain []byte, key string) ([]byte, error)
	open(sealed []byte, key string) ([]byte, error)
}

// providerKey is a sealer with its full prefix, e.g. "k8s:enc:aescbc:v1:key1:".
type providerKey struct {
	prefix []byte
	sealer sealer
}

// prefixTransformer writes with keys[0] and reads with whichever key's
// prefix matches; an identity entry (nil sealer, empty prefix) matches
// values that carry no prefix.
type prefixTransformer struct {
	keys []providerKey
}

func (t *prefixTransformer) TransformToStorage(data []byte, key string) ([]byte, error) {
	k := t.keys[0]
	if k.sealer == nil {
		return data, nil
	}
	sealed, err := k.sealer.seal(data, key)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(k.prefix)+len(sealed))
	return append(append(out, k.prefix...), sealed...), nil
}

func (t *prefixTransformer) TransformFromStorage(data []byte, key string) ([]byte, bool, error) {
	for i, k := range t.keys {
		if k.sealer == nil {
			if bytes.HasPrefix(data, []byte(encPrefix)) {
				continue
			}
			return data, i != 0, nil
		}
		if !bytes.HasPrefix(data, k.prefix) {
			continue
		}
		plain, err := k.sealer.open(data[len(k.prefix):], key)
		if err != nil {
			return nil, false, fmt.Errorf("decrypt with %s: %w", bytes.TrimSuffix(bytes.TrimPrefix(k.prefix, []byte(encPrefix)), []byte(":")), err)
		}
		return plain, i != 0, nil
	}
	return nil, false, errors.New("no matching prefix found")
}

type cbcSealer struct{ block cipher.Block }

func (c cbcSealer) seal(plain []byte, _ string) ([]byte, error) {
	bs := c.block.BlockSize()
	pad := bs - len(plain)%bs
	out := make([]byte, bs+len(plain)+pad)
	if _, err := io.ReadFull(rand.Reader, out[:bs]); err != nil {
		return nil, err
	}
	copy(out[bs:], plain)
	for i := bs + len(plain); i < len(out); i++ {
		out[i] = byte(pad)
	}
	cipher.NewCBCEncrypter(c.block, out[:bs]).CryptBlocks(out[bs:], out[bs:])
	return out, nil
}

func (c cbcSealer) open(sealed []byte, _ string) ([]byte, error) {
	bs := c.block.BlockSize()
	if len(sealed) < 2*bs || len(sealed)%bs != 0 {
		return nil, errors.New("the stored data is not a whole number of blocks")
	}
	out := make([]byte, len(sealed)-bs)
	cipher.NewCBCDecrypter(c.block, sealed[:bs]).CryptBlocks(out, sealed[bs:])
	pad := int(out[len(out)-1])
	if pad == 0 || pad > bs || pad > len(out) {
		return nil, errors.New("invalid PKCS7 data (empty or not padded)")
	}
	for _, b := range out[len(out)-pad:] {
		if int(b) != pad {
			return nil, errors.New("invalid padding on input")
		}
	}
	return out[:len(out)-pad], nil
}

type gcmSealer struct{ aead cipher.AEAD }

func (g gcmSealer) seal(plain []byte, key string) ([]byte, error) {
	ns := g.aead.NonceSize()
	out := make([]byte, ns, ns+len(plain)+g.aead.Overhead())
	if _, err := io.ReadFull(rand.Reader, out); err != nil {
		return nil, err
	}
	return g.aead.Seal(out, out[:ns], plain, []byte(key)), nil
}

func (g gcmSealer) open(sealed []byte, key string) ([]byte, error) {
	ns := g.aead.NonceSize()
	if len(sealed) < ns {
		return nil, errors.New("the stored data was shorter than the required size")
	}
	return g.aead.Open(nil, sealed[:ns], sealed[ns:], []byte(key))
}

type secretboxSealer struct{ key [32]byte }

func (s secretboxSealer) seal(plain []byte, _ string) ([]byte, error) {
	var nonce [24]byte
	if _, err := io.ReadFull(rand.Reader, nonce[:]); err != nil {
		return nil, err
	}
	return secretbox.Seal(nonce[:], plain, &nonce, &s.key), nil
}

func (s secretboxSealer) open(sealed []byte, _ string) ([]byte, error) {
	if len(sealed) < 24 {
		return nil, errors.New("the stored data was shorter than the required size")
	}
	var nonce [24]byte
	copy(nonce[:], sealed[:24])
	plain, ok := secretbox.Open(nil, sealed[24:], &nonce, &s.key)
	if !ok {
		return nil, errors.New("output array was not large enough for encryption")
	}
	return plain, nil
}

// The store's side: everything read from or written to etcd passes here.

// toStorage is what the store writes for an object's encoded bytes.
func (s *Store) toStorage(key string, data []byte) ([]byte, error) {
	if s.transformer == nil {
		return data, nil
	}
	out, err := s.transformer.TransformToStorage(data, key)
	if err != nil {
		return nil, newErr(ErrCodeInvalidObj, key, fmt.Sprintf("transform to storage: %v", err))
	}
	return out, nil
}

// fromStorage is the object's encoded bytes for a stored value.
func (s *Store) fromStorage(key string, value []byte) ([]byte, bool, error) {
	if s.transformer == nil {
		return value, false, nil
	}
	return s.transformer.TransformFromStorage(value, key)
}

// decodeStored decodes a value read from etcd at key.
func (s *Store) decodeStored(key string, value []byte, into runtime.Object, rev int64) error {
	plain, _, err := s.fromStorage(key, value)
	if err != nil {
		if o, ok := s.observer.(DecodeErrorObserver); ok {
			o.ObserveDecodeError(s.resource)
		}
		return newErr(ErrCodeInvalidObj, key, fmt.Sprintf("transform from storage: %v", err))
	}
	return s.decode(plain, into, rev)
}

func newAESCBC(secret []byte) (sealer, error) {
	b, err := aes.NewCipher(secret)
	if err != nil {
		return nil, err
	}
	return cbcSealer{block: b}, nil
}

func newAESGCM(secret []byte) (sealer, error) {
	b, err := aes.NewCipher(secret)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(b)
	if err != nil {
		return nil, err
	}
	return gcmSealer{aead: aead}, nil
}

func newSecretbox(secret []byte) (sealer, error) {
	if len(secret) != 32 {
		return nil, fmt.Errorf("secretbox key must be 32 bytes, got %d", len(secret))
	}
	var k [32]byte
	copy(k[:], secret)
	return secretboxSealer{key: k}, nil
}
