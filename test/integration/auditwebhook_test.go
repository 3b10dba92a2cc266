package integration

import (
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	kubeapiserver "github.com/skiff-sh/skiff/internal/apiserver"
	"github.com/skiff-sh/skiff/internal/apiserver/audit"
	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

// TestAuditWebhook: with --audit-webhook-config-file (batch mode) the
// audit events of a write reach a service the test serves, as
// audit.k8s.io/v1 EventLists.
func TestAuditWebhook(t *testing.T) {
	var (
		mu     sync.Mutex
		events []auditv1.Event
	)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var list auditv1.EventList
		if err := json.NewDecoder(r.Body).Decode(&list); err != nil || list.Kind != "EventList" {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		mu.Lock()
		events = append(events, list.Items...)
		mu.Unlock()
	}))
	defer srv.Close()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["audit"] = &clientcmdapi.Cluster{Server: srv.URL + "/audit", CertificateAuthorityData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})}
	kc.Contexts["audit"] = &clientcmdapi.Context{Cluster: "audit"}
	kc.CurrentContext = "audit"
	kubeconfig := filepath.Join(t.TempDir(), "audit.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}
	policy, err := audit.ParsePolicy([]byte(auditPolicy))
	if err != nil {
		t.Fatal(err)
	}
	auditor, err := audit.New(policy, audit.LogOptions{Webhook: audit.WebhookOptions{ConfigFile: kubeconfig, BatchMaxWait: 200 * time.Millisecond}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = auditor.Close() })
	c := testapiserver.StartWithOptions(t, testapiserver.Options{Configure: func(cfg *kubeapiserver.Config) { cfg.Audit = auditor }})
	ctx := testCtx(t, 30*time.Second)
	ns := newNamespace(t, c.Clientset())
	if _, err := c.Clientset().CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "audited"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the create's ResponseComplete event reaches the webhook", func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range events {
			if ev.Verb == "create" && ev.ObjectRef != nil && ev.ObjectRef.Resource == "configmaps" && ev.ObjectRef.Name == "audited" &&
				ev.Stage == auditv1.StageResponseComplete && ev.ResponseStatus != nil && ev.ResponseStatus.Code == 201 {
				return true, nil
			}
		}
		return false, nil
	})
}
