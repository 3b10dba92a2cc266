package component

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/cert"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/pki"
)

// SecureServing are the flags of a component's secure port, named as
// kube-controller-manager's and kube-scheduler's: /healthz and /metrics
// over HTTPS on --bind-address:--secure-port, with the certificate of
// --tls-cert-file/--tls-private-key-file (else a self-signed one made at
// start, as upstream's), and client certificates verified against
// --client-ca-file (else the API server's client CA, read from
// kube-system/extension-apiserver-authentication, as upstream's delegated
// authentication does). Address, when set, serves plain HTTP there
// instead (tests, benchmarks).
type SecureServing struct {
	BindAddress  string
	SecurePort   int
	CertFile     string
	KeyFile      string
	ClientCAFile string
	Address      string
}

// DefaultSecureServing is upstream's default: every interface, the
// component's port (10257, 10259).
func DefaultSecureServing(port int) SecureServing {
	return SecureServing{BindAddress: "0.0.0.0", SecurePort: port}
}

// AddFlags registers the flags, s's values the defaults.
func (s *SecureServing) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&s.BindAddress, "bind-address", s.BindAddress, "address the secure port listens on (0.0.0.0 or :: for every interface)")
	fs.IntVar(&s.SecurePort, "secure-port", s.SecurePort, "port of the HTTPS server of /healthz, /livez, /readyz and /metrics (0 serves nothing)")
	fs.StringVar(&s.CertFile, "tls-cert-file", s.CertFile, "serving certificate of the secure port, PEM (default: a self-signed one made at start)")
	fs.StringVar(&s.KeyFile, "tls-private-key-file", s.KeyFile, "key of --tls-cert-file")
	fs.StringVar(&s.ClientCAFile, "client-ca-file", s.ClientCAFile, "CA bundle that verifies client certificates on the secure port (default: the API server's, from kube-system/extension-apiserver-authentication)")
	fs.StringVar(&s.Address, "address", s.Address, "host:port to serve /healthz and /metrics over plain HTTP instead of the secure port")
}

// Validate checks the flags.
func (s SecureServing) Validate() error {
	var errs []error
	if s.SecurePort < 0 || s.SecurePort > 65535 {
		errs = append(errs, fmt.Errorf("--secure-port %d must be between 0 and 65535", s.SecurePort))
	}
	if net.ParseIP(s.BindAddress) == nil {
		errs = append(errs, fmt.Errorf("--bind-address %q is not an IP address", s.BindAddress))
	}
	if (s.CertFile == "") != (s.KeyFile == "") {
		errs = append(errs, errors.New("--tls-cert-file and --tls-private-key-file go together"))
	}
	return errors.Join(errs...)
}

// Listen is where to serve and, for the secure port, the TLS
// configuration: empty addr serves nothing, nil TLS plain HTTP.
// client reads the API server's client CA when --client-ca-file is not
// given.
func (s SecureServing) Listen(ctx context.Context, client kubernetes.Interface) (addr string, tlsConfig *tls.Config, err error) {
	if s.Address != "" {
		return s.Address, nil, nil
	}
	if s.SecurePort == 0 {
		return "", nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.CertFile != "" {
		files, err := pki.NewCertificateFiles("serving", s.CertFile, s.KeyFile)
		if err != nil {
			return "", nil, fmt.Errorf("--tls-cert-file: %w", err)
		}
		go func() { _ = files.Start(ctx) }() // reloads the files when they change
		cfg.GetCertificate = files.GetCertificate
	} else {
		host := "localhost"
		if ip := net.ParseIP(s.BindAddress); ip != nil && !ip.IsUnspecified() {
			host = s.BindAddress
		}
		certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey(host, []net.IP{net.ParseIP("127.0.0.1")}, []string{"localhost"})
		if err != nil {
			return "", nil, fmt.Errorf("self-signed serving certificate: %w", err)
		}
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return "", nil, fmt.Errorf("self-signed serving certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	caPEM, err := s.clientCA(ctx, client)
	if err != nil {
		return "", nil, err
	}
	if len(caPEM) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return "", nil, errors.New("client CA: no certificate in the bundle")
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.VerifyClientCertIfGiven
	}
	return net.JoinHostPort(s.BindAddress, strconv.Itoa(s.SecurePort)), cfg, nil
}

// clientCA is --client-ca-file, else the client-ca-file the API server
// publishes; without either only bearer tokens authenticate.
func (s SecureServing) clientCA(ctx context.Context, client kubernetes.Interface) ([]byte, error) {
	if s.ClientCAFile != "" {
		b, err := os.ReadFile(s.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("--client-ca-file: %w", err)
		}
		return b, nil
	}
	cm, err := client.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
	if err != nil {
		klog.FromContext(ctx).Info("No client CA for the secure port: client certificates are not accepted, bearer tokens are", "err", err)
		return nil, nil
	}
	return []byte(cm.Data["client-ca-file"]), nil
}
