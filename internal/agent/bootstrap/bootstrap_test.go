package bootstrap_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/skiff-sh/skiff/internal/agent/bootstrap"
	kubeapiserver "github.com/skiff-sh/skiff/internal/apiserver"
	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/csrapproving"
	"github.com/skiff-sh/skiff/internal/controller/csrsigning"
	"github.com/skiff-sh/skiff/internal/pki"
	"github.com/skiff-sh/skiff/internal/server"
	"github.com/skiff-sh/skiff/internal/server/join"
	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

// startCluster runs an API server that accepts join tokens and serves its
// CA in the handshake, with the csrapproving and csrsigning controllers,
// and returns it with its join token.
func startCluster(t *testing.T) (*testapiserver.Cluster, bootstrap.Token) {
	t.Helper()
	var j *join.Join
	c := testapiserver.StartWithOptions(t, testapiserver.Options{Configure: func(cfg *kubeapiserver.Config) {
		if j != nil {
			cfg.Authenticator = j.Authenticator()
			cfg.ServingCert = j.ServingCert(cfg.ServingCert)
		}
	}})
	// The CA exists once the harness has started; start again with the join
	// hooks in place (the harness applies Configure on every start).
	j = join.New(c.PKI.CA.Raw)
	c.Restart()

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	admin := c.Clientset()
	tokenFile := filepath.Join(c.DataDir, join.TokenFile)
	token, err := j.Ensure(ctx, admin, tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	written, err := os.ReadFile(tokenFile)
	if err != nil || strings.TrimSpace(string(written)) != token.String() {
		t.Fatalf("token file = %q, %v; want %s", written, err, token)
	}

	factory := informers.NewSharedInformerFactory(admin, 0)
	cc := controllercontext.Context{Client: admin, Informers: factory}
	approver, err := csrapproving.New(ctx, cc)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := csrsigning.LoadCA(filepath.Join(server.PKIDir(c.DataDir), pki.CACertFile), filepath.Join(server.PKIDir(c.DataDir), pki.CAKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	signer, err := csrsigning.NewWithCA(cc, ca, csrsigning.DefaultDuration)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	go func() { _ = approver.Start(ctx) }()
	go func() { _ = signer.Start(ctx) }()
	return c, token
}

func TestJoin(t *testing.T) {
	c, token := startCluster(t)
	ctx := context.Background()
	server := c.Config.Host

	t.Run("the right token gives a working node identity", func(t *testing.T) {
		dir := t.TempDir()
		opts := bootstrap.Options{Server: server, Token: token.String(), NodeName: "node-a", Dir: dir, ServingAddresses: []string{"127.0.0.1", "node-a.local"}, Timeout: 30 * time.Second}
		id, err := bootstrap.Join(ctx, opts)
		if err != nil {
			t.Fatalf("Join: %v", err)
		}
		if id.Reused {
			t.Error("first join says it reused credentials")
		}
		// The client certificate is the node's.
		leaf := readCert(t, id.ClientCertFile)
		if diff := cmp.Diff([]string{"system:node:node-a", "system:nodes"}, []string{leaf.Subject.CommonName, strings.Join(leaf.Subject.Organization, ",")}); diff != "" {
			t.Errorf("client certificate subject (-want +got):\n%s", diff)
		}
		// The API server authenticates it as the node: a CSR it creates
		// records the requester.
		nodeClient, err := kubernetes.NewForConfig(id.RESTConfig)
		if err != nil {
			t.Fatal(err)
		}
		probe, err := nodeClient.CertificatesV1().CertificateSigningRequests().Create(ctx, probeCSR(t), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create a CSR as the node: %v", err)
		}
		if probe.Spec.Username != "system:node:node-a" || !slices.Contains(probe.Spec.Groups, "system:nodes") {
			t.Errorf("the server sees the node as %q %v, want system:node:node-a in system:nodes", probe.Spec.Username, probe.Spec.Groups)
		}
		// The serving certificate is signed by the cluster CA for the node's names.
		serving := readCert(t, id.ServingCertFile)
		roots := x509.NewCertPool()
		roots.AddCert(c.PKI.CA)
		for _, name := range []string{"node-a", "127.0.0.1", "node-a.local"} {
			if _, err := serving.Verify(x509.VerifyOptions{Roots: roots, DNSName: name, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
				t.Errorf("serving certificate for %s: %v", name, err)
			}
		}
		// Both requests were approved by the controller.
		csrs, err := c.Clientset().CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, csr := range csrs.Items {
			if csr.Name == probe.Name {
				continue
			}
			for _, cond := range csr.Status.Conditions {
				got = append(got, csr.Spec.SignerName+" "+csr.Spec.Username+" "+string(cond.Type)+" "+cond.Reason)
			}
		}
		slices.Sort(got)
		want := []string{
			"kubernetes.io/kube-apiserver-client-kubelet system:bootstrap:" + token.ID + " Approved AutoApproved",
			"kubernetes.io/kubelet-serving system:node:node-a Approved AutoApproved",
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("certificate requests (-want +got):\n%s", diff)
		}

		// A restarted agent keeps its credentials without asking again.
		again, err := bootstrap.Join(ctx, opts)
		if err != nil || !again.Reused {
			t.Errorf("second Join = reused %v, %v; want the same credentials reused", again != nil && again.Reused, err)
		}
	})

	refused := []struct {
		name    string
		token   string
		wantErr string
	}{
		{name: "wrong secret", token: bootstrap.Token{CAHash: token.CAHash, ID: token.ID, Secret: "0000000000000000"}.String(), wantErr: "the server refused the join token (401 Unauthorized)"},
		{name: "unknown token id", token: bootstrap.Token{CAHash: token.CAHash, ID: "zzzzzz", Secret: token.Secret}.String(), wantErr: "the server refused the join token (401 Unauthorized)"},
		{name: "another cluster's CA", token: bootstrap.Token{CAHash: strings.Repeat("ab", 32), ID: token.ID, Secret: token.Secret}.String(), wantErr: "the server's CA does not match the join token"},
		{name: "not a token", token: "hello", wantErr: "invalid join token"},
	}
	for _, tc := range refused {
		t.Run("refused: "+tc.name, func(t *testing.T) {
			dir := t.TempDir()
			_, err := bootstrap.Join(ctx, bootstrap.Options{Server: server, Token: tc.token, NodeName: "node-b", Dir: dir, Timeout: 20 * time.Second})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Join error = %v, want it to contain %q", err, tc.wantErr)
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 0 {
				t.Errorf("a refused join wrote %d entries in its directory", len(entries))
			}
		})
	}
}

// TestServing: an agent started with --kubeconfig (here the kubeconfig a
// join wrote) gets a kubelet serving certificate signed by the cluster CA
// for its names, approved because the node asked for itself, and keeps it
// across restarts.
func TestServing(t *testing.T) {
	c, token := startCluster(t)
	ctx := context.Background()
	id, err := bootstrap.Join(ctx, bootstrap.Options{Server: c.Config.Host, Token: token.String(), NodeName: "node-k", Dir: t.TempDir(), Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", id.KubeconfigFile)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	opts := bootstrap.ServingOptions{NodeName: "node-k", Dir: dir, Addresses: []string{"10.99.0.2"}}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	pair, pool, err := bootstrap.Serving(sctx, cfg, opts)
	if err != nil {
		t.Fatalf("Serving: %v", err)
	}
	for _, name := range []string{"node-k", "10.99.0.2"} {
		if _, err := pair.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: name, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("serving certificate for %s: %v", name, err)
		}
	}
	roots := x509.NewCertPool()
	roots.AddCert(c.PKI.CA)
	if _, err := pair.Leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("not signed by the cluster CA: %v", err)
	}
	again, _, err := bootstrap.Serving(sctx, cfg, opts)
	if err != nil || !again.Leaf.Equal(pair.Leaf) {
		t.Errorf("second call: %v, same certificate %v; want it reused", err, err == nil && again.Leaf.Equal(pair.Leaf))
	}
	// A new address means a new certificate.
	opts.Addresses = append(opts.Addresses, "10.99.0.3")
	third, _, err := bootstrap.Serving(sctx, cfg, opts)
	if err != nil || third.Leaf.Equal(pair.Leaf) || third.Leaf.VerifyHostname("10.99.0.3") != nil {
		t.Errorf("with a new address: %v; want a new certificate naming it", err)
	}

	noCA := rest.CopyConfig(cfg)
	noCA.TLSClientConfig.CAData, noCA.TLSClientConfig.CAFile, noCA.TLSClientConfig.Insecure = nil, "", true
	if _, _, err := bootstrap.Serving(sctx, noCA, bootstrap.ServingOptions{NodeName: "node-k", Dir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "names no cluster CA") {
		t.Errorf("without a CA: %v, want a clear error", err)
	}
}

func readCert(t *testing.T, file string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("%s: not PEM", file)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// probeCSR is a request no controller acts on (another signer).
func probeCSR(t *testing.T) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "probe"}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: "example.com/probe",
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth},
		},
	}
}
