package containerd

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// Registries is <data-dir>/agent/registries.yaml, in the shape k3s users
// know: mirrors per registry host ("*" for every registry) and, per
// registry or mirror host, credentials and TLS settings.
type Registries struct {
	Mirrors map[string]Mirror         `json:"mirrors,omitempty"`
	Configs map[string]RegistryConfig `json:"configs,omitempty"`
}

// Mirror lists the endpoints tried, in order, before the registry itself.
// An endpoint is a URL; "http://" makes it plain HTTP.
type Mirror struct {
	Endpoints []string `json:"endpoint,omitempty"`
}

// RegistryConfig holds the settings for one registry or mirror host.
type RegistryConfig struct {
	Auth *Auth `json:"auth,omitempty"`
	TLS  *TLS  `json:"tls,omitempty"`
}

// Auth is registry credentials: a username and password, their base64
// "user:password" form, or an identity token.
type Auth struct {
	Username      string `json:"username,omitempty"`
	Password      string `json:"password,omitempty"`
	Auth          string `json:"auth,omitempty"`
	IdentityToken string `json:"identity_token,omitempty"`
}

// TLS is the client TLS setting for a host.
type TLS struct {
	CAFile             string `json:"ca_file,omitempty"`
	CertFile           string `json:"cert_file,omitempty"`
	KeyFile            string `json:"key_file,omitempty"`
	InsecureSkipVerify bool   `json:"insecure_skip_verify,omitempty"`
}

// readRegistries reads file; a missing file is an empty configuration.
func readRegistries(file string) (Registries, error) {
	var r Registries
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return r, nil
	}
	if err != nil {
		return r, err
	}
	if err := yaml.UnmarshalStrict(b, &r); err != nil {
		return r, fmt.Errorf("%s: %w", file, err)
	}
	for host, m := range r.Mirrors {
		for _, e := range m.Endpoints {
			if _, err := endpointURL(e); err != nil {
				return r, fmt.Errorf("%s: mirror %s: %w", file, host, err)
			}
		}
	}
	return r, nil
}

// endpointURL parses a mirror endpoint; one without a scheme is HTTPS.
func endpointURL(e string) (*url.URL, error) {
	if !strings.Contains(e, "://") {
		e = "https://" + e
	}
	u, err := url.Parse(e)
	if err != nil {
		return nil, fmt.Errorf("endpoint %q: %w", e, err)
	}
	if u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("endpoint %q: want http(s)://host[:port]", e)
	}
	return u, nil
}

// configHost is the host a configs key names (a bare host or a URL).
func configHost(key string) string {
	if u, err := endpointURL(key); err == nil {
		return u.Host
	}
	return key
}

// auths returns the credentials by host, for the CRI plugin's registry
// configs (it asks for them by the host it is talking to).
func (r Registries) auths() map[string]Auth {
	out := map[string]Auth{}
	for key, c := range r.Configs {
		if c.Auth != nil {
			out[configHost(key)] = *c.Auth
		}
	}
	return out
}

// hostsFiles renders containerd's hosts.d: one <host>/hosts.toml per
// registry that has mirrors or settings ("_default" for "*").
func (r Registries) hostsFiles() map[string][]byte {
	tlsFor := func(host string) *TLS {
		for key, c := range r.Configs {
			if configHost(key) == host && c.TLS != nil {
				return c.TLS
			}
		}
		return nil
	}
	writeTLS := func(b *strings.Builder, indent string, t *TLS) {
		if t == nil {
			return
		}
		if t.CAFile != "" {
			fmt.Fprintf(b, "%sca = %s\n", indent, q(t.CAFile))
		}
		if t.CertFile != "" && t.KeyFile != "" {
			fmt.Fprintf(b, "%sclient = [[%s, %s]]\n", indent, q(t.CertFile), q(t.KeyFile))
		}
		if t.InsecureSkipVerify {
			fmt.Fprintf(b, "%sskip_verify = true\n", indent)
		}
	}
	registries := map[string]bool{}
	for host := range r.Mirrors {
		registries[host] = true
	}
	for key := range r.Configs {
		if _, ok := r.Mirrors[key]; !ok {
			registries[configHost(key)] = true
		}
	}
	out := map[string][]byte{}
	for _, reg := range sortedKeys(registries) {
		var b strings.Builder
		dir := reg
		if reg == "*" {
			dir = "_default"
		} else {
			server := "https://" + reg
			if reg == "docker.io" {
				server = "https://registry-1.docker.io"
			}
			fmt.Fprintf(&b, "server = %s\n", q(server))
			writeTLS(&b, "", tlsFor(reg))
		}
		for _, e := range r.Mirrors[reg].Endpoints {
			u, _ := endpointURL(e)
			fmt.Fprintf(&b, "\n[host.%s]\n", q(u.Scheme+"://"+u.Host+strings.TrimSuffix(u.Path, "/")))
			b.WriteString("  capabilities = [\"pull\", \"resolve\"]\n")
			if p := strings.TrimSuffix(u.Path, "/"); p != "" && p != "/v2" {
				// A path other than the API root is used as given.
				b.WriteString("  override_path = true\n")
			}
			writeTLS(&b, "  ", tlsFor(u.Host))
		}
		out[dir] = []byte(b.String())
	}
	return out
}

// writeHostsDir replaces dir's contents with files.
func writeHostsDir(dir string, files map[string][]byte) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for host, data := range files {
		hd := filepath.Join(dir, host)
		if err := os.MkdirAll(hd, 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(hd, "hosts.toml"), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
