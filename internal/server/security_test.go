package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/skiff-sh/skiff/internal/apiserver/audit"
	"github.com/skiff-sh/skiff/internal/etcd"
	"github.com/skiff-sh/skiff/internal/pki"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestRunSecurity: `skiff server` with a token file and an audit policy, and
// no encryption flag: it writes the default encryption configuration in the
// data dir, keeps Secrets encrypted in etcd, accepts the static token and
// audits the write.
func TestRunSecurity(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.csv")
	policy := filepath.Join(dir, "audit-policy.yaml")
	for path, data := range map[string]string{
		tokens: "tok-123,token-admin,42,system:masters\n",
		policy: "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n  verbs: [create]\n",
	} {
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	etcdPort := freePort(t)
	cfg := Config{DataDir: dir, BindAddress: "127.0.0.1", DisableAgent: true, Services: ServicesConfig{DisableDNS: true},
		EtcdClientPort: etcdPort, EtcdPeerPort: freePort(t), AuthorizationModes: []string{"Node", "RBAC"},
		Security: SecurityConfig{TokenAuthFile: tokens, AuditPolicyFile: policy, AuditLog: audit.LogOptions{Path: filepath.Join(dir, "audit.log")}}}
	stop := runServer(t, cfg)
	defer func() {
		if err := stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	st, err := os.Stat(filepath.Join(dir, "encryption-config.yaml"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("default encryption config: %v %v, want a 0600 file", st, err)
	}
	admin, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "admin.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	tokenCfg := &rest.Config{Host: admin.Host, BearerToken: "tok-123", TLSClientConfig: rest.TLSClientConfig{CAData: admin.CAData}}
	cs, err := kubernetes.NewForConfig(tokenCfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"p": "hunter2"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create a secret with the static token: %v", err)
	}
	// The embedded etcd answers only to a certificate from its own CA.
	etcdDir := filepath.Join(PKIDir(dir), pki.EtcdDir)
	etcdTLS, err := etcd.ClientTLS{
		CAFile:   filepath.Join(etcdDir, pki.EtcdCACertFile),
		CertFile: filepath.Join(etcdDir, pki.EtcdClientCertFile),
		KeyFile:  filepath.Join(etcdDir, pki.EtcdClientKeyFile),
	}.Config()
	if err != nil {
		t.Fatal(err)
	}
	etcdc, err := clientv3.New(clientv3.Config{Endpoints: []string{"https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(etcdPort))}, DialTimeout: 5 * time.Second, TLS: etcdTLS})
	if err != nil {
		t.Fatal(err)
	}
	defer etcdc.Close()
	resp, err := etcdc.Get(ctx, "/registry/secrets/default/s")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("etcd: %v %v", resp, err)
	}
	if v := resp.Kvs[0].Value; !bytes.HasPrefix(v, []byte("k8s:enc:aescbc:v1:skiff-default:")) || bytes.Contains(v, []byte("hunter2")) {
		t.Errorf("secret in etcd begins %q; want the default key's prefix and no clear text", v[:24])
	}
	// Controllers write as their own service accounts: the pod of this
	// Deployment is created by kube-system/replicaset-controller.
	labels := map[string]string{"app": "web"}
	if _, err := cs.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	podCreator := ""
	for podCreator == "" && ctx.Err() == nil {
		log, _ := os.ReadFile(filepath.Join(dir, "audit.log"))
		for _, l := range strings.Split(string(log), "\n") {
			if strings.Contains(l, `"verb":"create"`) && strings.Contains(l, `"resource":"pods"`) && strings.Contains(l, `"code":201`) {
				var ev struct {
					User struct{ Username string } `json:"user"`
				}
				if err := json.Unmarshal([]byte(l), &ev); err == nil {
					podCreator = ev.User.Username
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if podCreator != "system:serviceaccount:kube-system:replicaset-controller" {
		t.Errorf("pods created by %q, want system:serviceaccount:kube-system:replicaset-controller", podCreator)
	}
	crbs, err := cs.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range crbs.Items {
		for _, s := range b.Subjects {
			if s.Name == pki.ControllerManagerUser && b.RoleRef.Name != "system:kube-controller-manager" {
				t.Errorf("%s is bound to %s by %s; it should hold only system:kube-controller-manager", s.Name, b.RoleRef.Name, b.Name)
			}
		}
	}

	log, err := os.ReadFile(filepath.Join(dir, "audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, l := range strings.Split(string(log), "\n") {
		if strings.Contains(l, `"verb":"create"`) && strings.Contains(l, `"username":"token-admin"`) && strings.Contains(l, `"resource":"secrets"`) && strings.Contains(l, `"code":201`) {
			found = true
		}
	}
	if !found {
		t.Errorf("no audit line for the token user's secret create:\n%s", log)
	}
}
