package integration

import (
	"crypto/tls"
	"crypto/x509"
	"net/url"
	"testing"

	kubeapiserver "github.com/skiff-sh/skiff/internal/apiserver"
	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

// TestTLSOptions: --tls-min-version refuses older clients and
// --tls-cipher-suites limits TLS 1.2 to the listed suites.
func TestTLSOptions(t *testing.T) {
	c := testapiserver.StartWithOptions(t, testapiserver.Options{SkipBootstrap: true, Configure: func(cfg *kubeapiserver.Config) {
		cfg.TLSMinVersion = tls.VersionTLS12
		cfg.TLSCipherSuites = []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}
	}})
	u, err := url.Parse(c.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.PKI.CAPEM)
	for _, tc := range []struct {
		name    string
		cfg     *tls.Config
		wantErr bool
	}{
		{"TLS 1.3", &tls.Config{MinVersion: tls.VersionTLS13}, false},
		{"TLS 1.2 with the listed suite", &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}}, false},
		{"TLS 1.2 with another suite", &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384}}, true},
		{"TLS 1.1", &tls.Config{MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg.Clone()
			cfg.RootCAs, cfg.ServerName = pool, "127.0.0.1"
			conn, err := tls.Dial("tcp", u.Host, cfg)
			if err == nil {
				conn.Close()
			}
			if (err != nil) != tc.wantErr {
				t.Errorf("handshake error = %v, want error %v", err, tc.wantErr)
			}
		})
	}
	// TLS 1.3 only.
	c2 := testapiserver.StartWithOptions(t, testapiserver.Options{SkipBootstrap: true, Configure: func(cfg *kubeapiserver.Config) {
		cfg.TLSMinVersion = tls.VersionTLS13
	}})
	u2, _ := url.Parse(c2.Config.Host)
	if conn, err := tls.Dial("tcp", u2.Host, &tls.Config{RootCAs: pool, MaxVersion: tls.VersionTLS12}); err == nil {
		conn.Close()
		t.Errorf("TLS 1.2 client accepted by a --tls-min-version=VersionTLS13 server")
	}
	if conn, err := tls.Dial("tcp", u2.Host, &tls.Config{RootCAs: x509PoolOf(c2.PKI.CAPEM)}); err != nil {
		t.Errorf("TLS 1.3 client: %v", err)
	} else {
		conn.Close()
	}
}

func x509PoolOf(pem []byte) *x509.CertPool {
	p := x509.NewCertPool()
	p.AppendCertsFromPEM(pem)
	return p
}
