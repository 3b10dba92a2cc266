// Package bootstrap gives a joining node its identity, by upstream's TLS
// bootstrapping: with a join token (see Token) the agent
//
//  1. checks the server: the TLS handshake must present the cluster CA
//     (the API server sends it after its serving certificate) whose SHA-256
//     is the token's hash, and the serving certificate must verify against
//     it for the server's host name; nothing is sent before that;
//  2. as the bootstrap token user (system:bootstrap:<id>, group
//     system:bootstrappers) creates a CertificateSigningRequest for its
//     client certificate (CN system:node:<name>, O system:nodes, signer
//     kubernetes.io/kube-apiserver-client-kubelet), which the csrapproving
//     controller approves and the csrsigning controller signs;
//  3. as the node, asks the same way for its kubelet serving certificate
//     (signer kubernetes.io/kubelet-serving, SANs: the node name and its
//     addresses);
//  4. only then writes the CA, both key pairs and a kubeconfig under Dir.
//
// A wrong token (unknown, wrong secret, expired) is refused by the API
// server with 401 and nothing is written; so is a server whose CA does not
// match. A node that already has valid credentials for the token's CA
// reuses them without contacting the server.
package bootstrap

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/klog/v2"
)

// Files under Options.Dir.
const (
	CAFile          = "pki/ca.crt"
	ClientCertFile  = "pki/kubelet-client.crt"
	ClientKeyFile   = "pki/kubelet-client.key"
	ServingCertFile = "pki/kubelet.crt"
	ServingKeyFile  = "pki/kubelet.key"
	KubeconfigFile  = "kubelet.kubeconfig"
)

// renewBefore: credentials expiring sooner than this are requested anew.
const renewBefore = 7 * 24 * time.Hour

// Options say how to join.
type Options struct {
	// Server is the API server URL, https://HOST:PORT.
	Server string
	// Token is the join token (the server's <data-dir>/token).
	Token string
	// NodeName is this node's name.
	NodeName string
	// Dir receives the credentials (the agent's <data-dir>/agent).
	Dir string
	// ServingAddresses are the IPs and DNS names of this node, put in the
	// kubelet serving certificate beside NodeName.
	ServingAddresses []string
	// Timeout bounds the whole join (default 2 minutes): the controllers
	// must approve and sign within it.
	Timeout time.Duration
}

// Identity is a node's credentials on disk and a client config using them.
type Identity struct {
	CAFile, ClientCertFile, ClientKeyFile, ServingCertFile, ServingKeyFile, KubeconfigFile string
	// RESTConfig talks to the API server as system:node:<name>.
	RESTConfig *rest.Config
	// Serving is the kubelet serving key pair.
	Serving tls.Certificate
	// Reused is true when existing credentials were kept.
	Reused bool
}

// Join returns the node's identity, obtaining it from the server if the
// node has no valid one for the token's CA.
func Join(ctx context.Context, opts Options) (*Identity, error) {
	token, err := ParseToken(opts.Token)
	if err != nil {
		return nil, err
	}
	if opts.NodeName == "" || opts.Dir == "" {
		return nil, errors.New("join: node name and directory are required")
	}
	u, err := url.Parse(opts.Server)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("join: --server %q: want https://HOST:PORT", opts.Server)
	}
	if opts.Timeout == 0 {
		opts.Timeout = 2 * time.Minute
	}
	id := identityFiles(opts.Dir)
	if ident, ok := reuse(id, token, opts); ok {
		return ident, nil
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	logger := klog.FromContext(ctx)

	caPEM, err := discoverCA(ctx, u, token)
	if err != nil {
		return nil, err
	}
	bootstrapCfg := &rest.Config{
		Host:            opts.Server,
		BearerToken:     token.Bearer(),
		TLSClientConfig: rest.TLSClientConfig{CAData: caPEM},
		UserAgent:       "skiff-agent/bootstrap",
	}
	clientKeyPEM, clientCertPEM, err := requestCertificate(ctx, bootstrapCfg, certificatesv1.KubeAPIServerClientKubeletSignerName, opts.NodeName, nil,
		[]certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth})
	if err != nil {
		return nil, fmt.Errorf("join: node client certificate: %w", err)
	}
	logger.Info("Obtained the node client certificate", "node", opts.NodeName)
	nodeCfg := &rest.Config{
		Host:            opts.Server,
		TLSClientConfig: rest.TLSClientConfig{CAData: caPEM, CertData: clientCertPEM, KeyData: clientKeyPEM},
		UserAgent:       "skiff-agent/bootstrap",
	}
	sans := append([]string{opts.NodeName}, opts.ServingAddresses...)
	servingKeyPEM, servingCertPEM, err := requestCertificate(ctx, nodeCfg, certificatesv1.KubeletServingSignerName, opts.NodeName, sans,
		[]certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth})
	if err != nil {
		return nil, fmt.Errorf("join: kubelet serving certificate: %w", err)
	}
	logger.Info("Obtained the kubelet serving certificate", "node", opts.NodeName, "names", sans)

	kubeconfig, err := nodeKubeconfig(opts.Server, caPEM, filepath.Join(opts.Dir, ClientCertFile), filepath.Join(opts.Dir, ClientKeyFile))
	if err != nil {
		return nil, err
	}
	for _, f := range []struct {
		path string
		data []byte
	}{
		{id.CAFile, caPEM},
		{id.ClientKeyFile, clientKeyPEM}, {id.ClientCertFile, clientCertPEM},
		{id.ServingKeyFile, servingKeyPEM}, {id.ServingCertFile, servingCertPEM},
		{id.KubeconfigFile, kubeconfig},
	} {
		if err := writeFile(f.path, f.data); err != nil {
			return nil, fmt.Errorf("join: %w", err)
		}
	}
	ident, ok := reuse(id, token, opts)
	if !ok {
		return nil, errors.New("join: the credentials just written do not load")
	}
	ident.Reused = false
	return ident, nil
}

func identityFiles(dir string) Identity {
	return Identity{
		CAFile:          filepath.Join(dir, CAFile),
		ClientCertFile:  filepath.Join(dir, ClientCertFile),
		ClientKeyFile:   filepath.Join(dir, ClientKeyFile),
		ServingCertFile: filepath.Join(dir, ServingCertFile),
		ServingKeyFile:  filepath.Join(dir, ServingKeyFile),
		KubeconfigFile:  filepath.Join(dir, KubeconfigFile),
	}
}

// reuse loads existing credentials if they belong to the token's CA, name
// this node, chain to the CA and are not about to expire.
func reuse(id Identity, token Token, opts Options) (*Identity, bool) {
	caPEM, err := os.ReadFile(id.CAFile)
	if err != nil {
		return nil, false
	}
	block, _ := pem.Decode(caPEM)
	if block == nil || CAHash(block.Bytes) != token.CAHash {
		return nil, false
	}
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, false
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	load := func(certFile, keyFile string, usage x509.ExtKeyUsage) (tls.Certificate, bool) {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return pair, false
		}
		leaf, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil || leaf.Subject.CommonName != "system:node:"+opts.NodeName || time.Until(leaf.NotAfter) < renewBefore {
			return pair, false
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			return pair, false
		}
		pair.Leaf = leaf
		return pair, true
	}
	if _, ok := load(id.ClientCertFile, id.ClientKeyFile, x509.ExtKeyUsageClientAuth); !ok {
		return nil, false
	}
	serving, ok := load(id.ServingCertFile, id.ServingKeyFile, x509.ExtKeyUsageServerAuth)
	if !ok {
		return nil, false
	}
	for _, name := range append([]string{opts.NodeName}, opts.ServingAddresses...) {
		if serving.Leaf.VerifyHostname(name) != nil {
			return nil, false
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", id.KubeconfigFile)
	if err != nil || cfg.Host != opts.Server {
		return nil, false
	}
	ident := id
	ident.RESTConfig = cfg
	ident.Serving = serving
	ident.Reused = true
	return &ident, true
}

// discoverCA connects to the server, finds the certificate the token pins
// among those the server presents, and checks that the serving certificate
// verifies against it for the server's host name.
func discoverCA(ctx context.Context, u *url.URL, token Token) ([]byte, error) {
	host := u.Hostname()
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(host, "443")
	}
	var caPEM []byte
	var refused error // set when the server is not the one the token names: final
	cfg := &tls.Config{
		InsecureSkipVerify: true, // verified below, against the pinned CA
		VerifyConnection: func(cs tls.ConnectionState) (err error) {
			defer func() { refused = err }()
			var ca *x509.Certificate
			for _, c := range cs.PeerCertificates {
				if CAHash(c.Raw) == token.CAHash {
					ca = c
				}
			}
			if ca == nil {
				return fmt.Errorf("the server's CA does not match the join token (sha256 %s): the token is for another cluster, or this is not the server", token.CAHash)
			}
			roots := x509.NewCertPool()
			roots.AddCert(ca)
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			if _, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{DNSName: host, Roots: roots, Intermediates: inter}); err != nil {
				return fmt.Errorf("the server's certificate does not verify against the cluster CA: %w", err)
			}
			caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw})
			return nil
		},
	}
	d := tls.Dialer{Config: cfg, NetDialer: &net.Dialer{Timeout: 10 * time.Second}}
	var lastErr error
	for {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			conn.Close()
			return caPEM, nil
		}
		lastErr = err
		if refused != nil {
			return nil, fmt.Errorf("join %s: %w", u.Host, refused)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("join: cannot reach %s: %w", u.Host, lastErr)
		case <-time.After(time.Second):
		}
	}
}

// requestCertificate makes a key, asks for a certificate for it with a
// CertificateSigningRequest and waits until it is issued.
func requestCertificate(ctx context.Context, cfg *rest.Config, signer, node string, sans []string, usages []certificatesv1.KeyUsage) (keyPEM, certPEM []byte, err error) {
	return requestCertificateFor(ctx, cfg, signer, node, sans, usages, 0)
}

// requestCertificateFor is requestCertificate asking for a lifetime
// (spec.expirationSeconds; 0: the signer's default).
func requestCertificateFor(ctx context.Context, cfg *rest.Config, signer, node string, sans []string, usages []certificatesv1.KeyUsage, lifetime time.Duration) (keyPEM, certPEM []byte, err error) {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}}}
	for _, s := range sans {
		if ip := net.ParseIP(s); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if !slices.Contains(tmpl.DNSNames, s) {
			tmpl.DNSNames = append(tmpl.DNSNames, s)
		}
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		return nil, nil, err
	}
	csr, err := client.CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "node-csr-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: signer,
			Usages:     usages,
			ExpirationSeconds: func() *int32 {
				if lifetime <= 0 {
					return nil
				}
				s := int32(lifetime / time.Second)
				return &s
			}(),
		},
	}, metav1.CreateOptions{})
	if apierrors.IsUnauthorized(err) {
		return nil, nil, fmt.Errorf("the server refused the join token (401 Unauthorized): check --token against the server's <data-dir>/token")
	}
	if err != nil {
		return nil, nil, fmt.Errorf("create certificate request: %w", err)
	}
	for {
		for _, c := range csr.Status.Conditions {
			if c.Type == certificatesv1.CertificateDenied || c.Type == certificatesv1.CertificateFailed {
				return nil, nil, fmt.Errorf("certificate request %s %s: %s %s", csr.Name, c.Type, c.Reason, c.Message)
			}
		}
		if len(csr.Status.Certificate) > 0 {
			break
		}
		select {
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("certificate request %s not signed in time (are the csrapproving and csrsigning controllers running?): %w", csr.Name, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
		csr, err = client.CertificatesV1().CertificateSigningRequests().Get(ctx, csr.Name, metav1.GetOptions{})
		if err != nil {
			return nil, nil, fmt.Errorf("read certificate request: %w", err)
		}
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	certPEM = csr.Status.Certificate
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return nil, nil, fmt.Errorf("certificate request %s: the issued certificate is not PEM", csr.Name)
	}
	if cert, err := x509.ParseCertificate(block.Bytes); err != nil || !cert.PublicKey.(*ecdsa.PublicKey).Equal(&key.PublicKey) {
		return nil, nil, fmt.Errorf("certificate request %s: the issued certificate is not for our key", csr.Name)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), certPEM, nil
}

func nodeKubeconfig(server string, caPEM []byte, certFile, keyFile string) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["skiff"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos["node"] = &clientcmdapi.AuthInfo{ClientCertificate: certFile, ClientKey: keyFile}
	cfg.Contexts["skiff"] = &clientcmdapi.Context{Cluster: "skiff", AuthInfo: "node"}
	cfg.CurrentContext = "skiff"
	return clientcmd.Write(*cfg)
}

// writeFile writes through a temporary file and a rename, mode 0600.
func writeFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// ServingOptions say which kubelet serving certificate a node with
// credentials wants (see Serving).
type ServingOptions struct {
	// NodeName is this node's name (the certificate's CN system:node:<name>).
	NodeName string
	// Dir keeps the key pair (the agent's <data-dir>/agent:
	// pki/kubelet.{crt,key}).
	Dir string
	// Addresses are the node's IPs and DNS names, put in the certificate
	// beside NodeName.
	Addresses []string
}

// Serving returns the kubelet serving certificate of a node that already
// has API credentials (an agent started with --kubeconfig), and the
// cluster CA (from cfg) that verifies the kubelet's clients. A key pair
// under Dir signed by that CA, naming the node and every address and not
// about to expire is reused; otherwise the node asks for a new one with a
// CertificateSigningRequest (signer kubernetes.io/kubelet-serving) and
// waits until it is issued or ctx ends. The csrapproving controller
// approves it when cfg's user is the node itself (system:node:<name>);
// for any other user it waits for `kubectl certificate approve`.
func Serving(ctx context.Context, cfg *rest.Config, opts ServingOptions) (tls.Certificate, *x509.CertPool, error) {
	caPEM := cfg.TLSClientConfig.CAData
	if len(caPEM) == 0 && cfg.TLSClientConfig.CAFile != "" {
		b, err := os.ReadFile(cfg.TLSClientConfig.CAFile)
		if err != nil {
			return tls.Certificate{}, nil, fmt.Errorf("kubelet serving certificate: %w", err)
		}
		caPEM = b
	}
	pool := x509.NewCertPool()
	if len(caPEM) == 0 || !pool.AppendCertsFromPEM(caPEM) {
		return tls.Certificate{}, nil, errors.New("kubelet serving certificate: the kubeconfig names no cluster CA (certificate-authority), so the kubelet could not verify its clients")
	}
	certFile, keyFile := filepath.Join(opts.Dir, ServingCertFile), filepath.Join(opts.Dir, ServingKeyFile)
	names := append([]string{opts.NodeName}, opts.Addresses...)
	if pair, ok := loadServing(certFile, keyFile, pool, opts.NodeName, names); ok {
		return pair, pool, nil
	}
	rc := rest.CopyConfig(cfg)
	rc.UserAgent = "skiff-agent/bootstrap"
	keyPEM, certPEM, err := requestCertificate(ctx, rc, certificatesv1.KubeletServingSignerName, opts.NodeName, names,
		[]certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth})
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("kubelet serving certificate: %w", err)
	}
	for _, f := range []struct {
		path string
		data []byte
	}{{keyFile, keyPEM}, {certFile, certPEM}} {
		if err := writeFile(f.path, f.data); err != nil {
			return tls.Certificate{}, nil, fmt.Errorf("kubelet serving certificate: %w", err)
		}
	}
	pair, ok := loadServing(certFile, keyFile, pool, opts.NodeName, names)
	if !ok {
		return tls.Certificate{}, nil, errors.New("kubelet serving certificate: the certificate just issued does not verify against the kubeconfig's CA")
	}
	klog.FromContext(ctx).Info("Obtained the kubelet serving certificate", "node", opts.NodeName, "names", names)
	return pair, pool, nil
}

// loadServing loads a serving key pair that chains to roots, names the
// node and every name, and has more than renewBefore left.
func loadServing(certFile, keyFile string, roots *x509.CertPool, node string, names []string) (tls.Certificate, bool) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return pair, false
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil || leaf.Subject.CommonName != "system:node:"+node || time.Until(leaf.NotAfter) < renewBefore {
		return pair, false
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return pair, false
	}
	for _, n := range names {
		if leaf.VerifyHostname(n) != nil {
			return pair, false
		}
	}
	pair.Leaf = leaf
	return pair, true
}
