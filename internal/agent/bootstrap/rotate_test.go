package bootstrap_test

import (
	"context"
	"os"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/skiff-sh/skiff/internal/agent/bootstrap"
)

// TestRotate renews a joined node's client certificate through CSRs: not
// before RenewAt, then with the lifetime asked for (10 minutes, the
// shortest the signer gives), and again when that short-lived one is due;
// each new certificate authenticates as the node.
func TestRotate(t *testing.T) {
	c, token := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	id, err := bootstrap.Join(ctx, bootstrap.Options{Server: c.Config.Host, Token: token.String(), NodeName: "node-r", Dir: dir, ServingAddresses: []string{"127.0.0.1"}, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	first := readCert(t, id.ClientCertFile)
	clk := testingclock.NewFakeClock(time.Now())
	r := &bootstrap.Rotator{Dir: dir, Node: "node-r", Config: id.RESTConfig, Lifetime: 10 * time.Minute, Clock: clk}

	// Not due: nothing changes.
	next, err := r.RenewIfDue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !next.Equal(bootstrap.RenewAt(first)) || readCert(t, id.ClientCertFile).SerialNumber.Cmp(first.SerialNumber) != 0 {
		t.Fatalf("renewed before it was due (next %v, want %v)", next, bootstrap.RenewAt(first))
	}

	serials := map[string]bool{first.SerialNumber.String(): true}
	for round, at := range []func() time.Time{
		func() time.Time { return bootstrap.RenewAt(first).Add(time.Second) },
		func() time.Time { return next.Add(time.Second) },
	} {
		clk.SetTime(at())
		if next, err = r.RenewIfDue(ctx); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		renewed := readCert(t, id.ClientCertFile)
		if serials[renewed.SerialNumber.String()] {
			t.Fatalf("round %d: the certificate was not replaced", round)
		}
		serials[renewed.SerialNumber.String()] = true
		if life := time.Until(renewed.NotAfter); life > 10*time.Minute || life < 9*time.Minute {
			t.Errorf("round %d: the renewed certificate expires in %v, want about 10m", round, life)
		}
		if !next.Equal(bootstrap.RenewAt(renewed)) {
			t.Errorf("round %d: next renewal %v, want %v", round, next, bootstrap.RenewAt(renewed))
		}
		// The files now hold a pair the API server takes as the node.
		certPEM, _ := os.ReadFile(id.ClientCertFile)
		keyPEM, _ := os.ReadFile(id.ClientKeyFile)
		cfg := rest.AnonymousClientConfig(id.RESTConfig)
		cfg.CertData, cfg.KeyData = certPEM, keyPEM
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		who, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil || who.Status.UserInfo.Username != "system:node:node-r" {
			t.Errorf("round %d: the renewed certificate authenticates as %v (%v), want system:node:node-r", round, who, err)
		}
	}
}
