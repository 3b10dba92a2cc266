package storage

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// EncryptionConfiguration is upstream's apiserver.config.k8s.io/v1
// EncryptionConfiguration (the file of --encryption-provider-config), read
// into Skiff's own types. KMS providers are refused.
type EncryptionConfiguration struct {
	APIVersion string                  `json:"apiVersion"`
	Kind       string                  `json:"kind"`
	Resources  []ResourceConfiguration `json:"resources"`
}

// ResourceConfiguration lists resources ("secrets", "deployments.apps",
// "*.apps", "*." for the core group, "*.*") and their providers in order.
type ResourceConfiguration struct {
	Resources []string                `json:"resources"`
	Providers []ProviderConfiguration `json:"providers"`
}

// ProviderConfiguration holds exactly one provider.
type ProviderConfiguration struct {
	AESGCM    *KeysConfiguration `json:"aesgcm,omitempty"`
	AESCBC    *KeysConfiguration `json:"aescbc,omitempty"`
	Secretbox *KeysConfiguration `json:"secretbox,omitempty"`
	Identity  *struct{}          `json:"identity,omitempty"`
	KMS       *struct {
		Name string `json:"name"`
	} `json:"kms,omitempty"`
}

// KeysConfiguration are a provider's keys; the first encrypts.
type KeysConfiguration struct {
	Keys []Key `json:"keys"`
}

// Key is a named base64-encoded secret.
type Key struct {
	Name   string `json:"name"`
	Secret string `json:"secret"`
}

// Encryption maps resources to their transformers.
type Encryption struct {
	byResource map[string]Transformer // "secrets", "deployments.apps", "*.apps", "*.", "*.*"
}

// For is the transformer of a resource in an API group ("" for core), or
// nil (stored as is). An exact entry wins over "*.<group>", which wins over
// "*.*".
func (e *Encryption) For(group, resource string) Transformer {
	if e == nil {
		return nil
	}
	for _, k := range []string{resource + "." + group, "*." + group, "*.*"} {
		if group == "" && k == resource+"." {
			k = resource
		}
		if t, ok := e.byResource[k]; ok {
			return t
		}
	}
	return nil
}

// LoadEncryptionConfig reads and checks an EncryptionConfiguration file.
func LoadEncryptionConfig(path string) (*Encryption, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	e, err := ParseEncryptionConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return e, nil
}

// ParseEncryptionConfig parses and checks an EncryptionConfiguration.
func ParseEncryptionConfig(data []byte) (*Encryption, error) {
	var c EncryptionConfiguration
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, err
	}
	if c.Kind != "EncryptionConfiguration" || (c.APIVersion != "apiserver.config.k8s.io/v1" && c.APIVersion != "apiserver.config.k8s.io/v1beta1") {
		return nil, fmt.Errorf("got %s %q, want apiserver.config.k8s.io/v1 EncryptionConfiguration", c.APIVersion, c.Kind)
	}
	e := &Encryption{byResource: map[string]Transformer{}}
	var errs []error
	for i, rc := range c.Resources {
		path := fmt.Sprintf("resources[%d]", i)
		if len(rc.Resources) == 0 {
			errs = append(errs, fmt.Errorf("%s.resources: Required value: at least one resource is required", path))
		}
		if len(rc.Providers) == 0 {
			errs = append(errs, fmt.Errorf("%s.providers: Required value: at least one provider is required", path))
			continue
		}
		t, err := buildTransformer(rc.Providers, path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for j, r := range rc.Resources {
			if err := checkResource(r); err != nil {
				errs = append(errs, fmt.Errorf("%s.resources[%d]: Invalid value: %q: %v", path, j, r, err))
				continue
			}
			if _, dup := e.byResource[r]; dup {
				errs = append(errs, fmt.Errorf("%s.resources[%d]: Invalid value: %q: the same resource cannot be specified multiple times", path, j, r))
				continue
			}
			e.byResource[r] = t
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return e, nil
}

func checkResource(r string) error {
	switch {
	case r == "*":
		return errors.New("use '*.' to encrypt all the resources from core API group or *.* to encrypt all resources")
	case r != strings.ToLower(r):
		return errors.New("resource name should not contain capital letters")
	case strings.HasSuffix(r, ".extensions"):
		return errors.New("'extensions' group has been removed and cannot be used for encryption")
	case strings.HasSuffix(r, ".events.k8s.io"):
		return errors.New("'*.events.k8s.io' objects are stored using the 'events' API group in etcd. Use 'events' instead in the config file")
	case strings.HasPrefix(r, "*") && !strings.HasPrefix(r, "*."):
		return errors.New("use '*.' to encrypt all the resources from core API group or *.* to encrypt all resources")
	}
	return nil
}

func buildTransformer(providers []ProviderConfiguration, path string) (Transformer, error) {
	t := &prefixTransformer{}
	for i, p := range providers {
		ppath := fmt.Sprintf("%s.providers[%d]", path, i)
		n := 0
		for _, set := range []bool{p.AESGCM != nil, p.AESCBC != nil, p.Secretbox != nil, p.Identity != nil, p.KMS != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			return nil, fmt.Errorf("%s: Invalid value: more than one provider specified in a single element, should split into different list elements", ppath)
		}
		var (
			name  string
			keys  []Key
			build func([]byte) (sealer, error)
			sizes []int
		)
		switch {
		case p.Identity != nil:
			t.keys = append(t.keys, providerKey{})
			continue
		case p.KMS != nil:
			return nil, fmt.Errorf("%s.kms: Unsupported value: Skiff does not support KMS providers; use aescbc, aesgcm or secretbox", ppath)
		case p.AESGCM != nil:
			name, keys, build, sizes = "aesgcm", p.AESGCM.Keys, newAESGCM, []int{16, 24, 32}
		case p.AESCBC != nil:
			name, keys, build, sizes = "aescbc", p.AESCBC.Keys, newAESCBC, []int{16, 24, 32}
		case p.Secretbox != nil:
			name, keys, build, sizes = "secretbox", p.Secretbox.Keys, newSecretbox, []int{32}
		}
		if len(keys) == 0 {
			return nil, fmt.Errorf("%s.%s.keys: Required value: at least one key is required", ppath, name)
		}
		for j, k := range keys {
			kpath := fmt.Sprintf("%s.%s.keys[%d]", ppath, name, j)
			if k.Name == "" {
				return nil, fmt.Errorf("%s.name: Required value: key name is required", kpath)
			}
			if strings.Contains(k.Name, ":") {
				return nil, fmt.Errorf("%s.name: Invalid value: %q: must not contain ':'", kpath, k.Name)
			}
			secret, err := base64.StdEncoding.DecodeString(k.Secret)
			if err != nil || k.Secret == "" {
				return nil, fmt.Errorf("%s.secret: Invalid value: \"REDACTED\": secrets must be base64 encoded", kpath)
			}
			ok := false
			for _, s := range sizes {
				ok = ok || len(secret) == s
			}
			if !ok {
				return nil, fmt.Errorf("%s.secret: Invalid value: \"REDACTED\": secret is not of the expected length, got %d, expected one of %v", kpath, len(secret), sizes)
			}
			s, err := build(secret)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", kpath, err)
			}
			t.keys = append(t.keys, providerKey{prefix: []byte(encPrefix + name + ":v1:" + k.Name + ":"), sealer: s})
		}
	}
	return t, nil
}

// DefaultEncryptionConfigFile is the configuration Skiff writes in the
// data directory when none is given.
const DefaultEncryptionConfigFile = "encryption-config.yaml"

// EnsureDefaultEncryptionConfig returns the path of dir's default
// configuration, writing it the first time: Secrets encrypted with aescbc
// and a new random 32-byte key, identity second so values written before
// encryption was on stay readable (and are rewritten on their next update).
func EnsureDefaultEncryptionConfig(dir string) (string, error) {
	path := filepath.Join(dir, DefaultEncryptionConfigFile)
	if _, err := os.Stat(path); err == nil {
		return path, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return "", err
	}
	c := EncryptionConfiguration{
		APIVersion: "apiserver.config.k8s.io/v1", Kind: "EncryptionConfiguration",
		Resources: []ResourceConfiguration{{
			Resources: []string{"secrets"},
			Providers: []ProviderConfiguration{
				{AESCBC: &KeysConfiguration{Keys: []Key{{Name: "skiff-default", Secret: base64.StdEncoding.EncodeToString(secret)}}}},
				{Identity: &struct{}{}},
			},
		}},
	}
	data, err := yaml.Marshal(c)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return "", err
	}
	return path, os.Rename(tmp, path)
}
