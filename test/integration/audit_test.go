package integration

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	kubeapiserver "github.com/skiff-sh/skiff/internal/apiserver"
	"github.com/skiff-sh/skiff/internal/apiserver/audit"
)

const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  resources: [{group: "", resources: ["secrets"]}]
- level: RequestResponse
  resources: [{group: "", resources: ["configmaps"]}]
  verbs: [create, update, patch, delete]
- level: Request
  verbs: [create, update, patch, delete]
`

// readAudit returns the events of the audit log (and its rotated files).
func readAudit(t *testing.T, dir string) []auditv1.Event {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "audit*.log"))
	var evs []auditv1.Event
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(nil, 8<<20)
		for sc.Scan() {
			var ev auditv1.Event
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Fatalf("%s: a line that is not an audit event: %v", f, err)
			}
			if ev.APIVersion != "audit.k8s.io/v1" || ev.Kind != "Event" {
				t.Fatalf("event type %s %s", ev.APIVersion, ev.Kind)
			}
			evs = append(evs, ev)
		}
		fh.Close()
	}
	return evs
}

// TestAuditLog: writes produce audit.k8s.io/v1 events in the log with the
// user, verb, objectRef and response status; the policy's levels decide
// what else is kept; the log rotates at --audit-log-maxsize.
func TestAuditLog(t *testing.T) {
	dir := t.TempDir()
	policy, err := audit.ParsePolicy([]byte(auditPolicy))
	if err != nil {
		t.Fatal(err)
	}
	auditor, err := audit.New(policy, audit.LogOptions{Path: filepath.Join(dir, "audit.log"), MaxSize: 1, MaxBackups: 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { auditor.Close() })
	c := startRBACWith(t, func(cfg *kubeapiserver.Config) { cfg.Audit = auditor })
	admin := c.Clientset()
	ctx := testCtx(t, 90*time.Second)
	ns := newNamespace(t, admin)
	if _, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm1"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s1"}, StringData: map[string]string{"password": "hunter2"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A refused write, by a user impersonated by the admin.
	cfg := rest.CopyConfig(c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "mallory"}
	mallory := kubernetesFor(t, cfg)
	_, err = mallory.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "svc"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
	wantForbidden(t, err, `services is forbidden: User "mallory" cannot create resource "services" in API group "" in the namespace "`+ns+`"`)

	// A pod breaking the namespace's audit level (restricted) is admitted,
	// and its event says why it would not be.
	podNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "audit-psa-", Labels: map[string]string{"pod-security.kubernetes.io/audit": "restricted"}}}
	podNS, err = admin.CoreV1().Namespaces().Create(ctx, podNS, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().Pods(podNS.Name).Create(ctx, privileged("priv"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A write whose token is refused: 401, audited without a user.
	bad := rest.AnonymousClientConfig(c.Config)
	bad.BearerToken = "not-a-token"
	_, err = kubernetesFor(t, bad).CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "by-nobody"}}, metav1.CreateOptions{})
	if !apierrors.IsUnauthorized(err) {
		t.Fatalf("create with a bad token: %v, want 401", err)
	}

	find := func(t *testing.T, verb, resource, name string) auditv1.Event {
		t.Helper()
		for _, ev := range readAudit(t, dir) {
			if ev.Verb == verb && ev.ObjectRef != nil && ev.ObjectRef.Resource == resource && ev.ObjectRef.Name == name && ev.ObjectRef.Namespace == ns {
				return ev
			}
		}
		for _, ev := range readAudit(t, dir) {
			t.Logf("%s %s %v", ev.Verb, ev.RequestURI, ev.ObjectRef)
		}
		t.Fatalf("no audit event for %s %s %s", verb, resource, name)
		return auditv1.Event{}
	}
	type summary struct {
		Level          auditv1.Level
		Stage          auditv1.Stage
		User           string
		Impersonated   string
		ObjectRef      auditv1.ObjectReference
		Code           int32
		HasRequest     bool
		HasResponse    bool
		ResponseStatus string
	}
	sum := func(ev auditv1.Event) summary {
		s := summary{Level: ev.Level, Stage: ev.Stage, User: ev.User.Username, ObjectRef: *ev.ObjectRef,
			HasRequest: ev.RequestObject != nil, HasResponse: ev.ResponseObject != nil}
		if ev.ImpersonatedUser != nil {
			s.Impersonated = ev.ImpersonatedUser.Username
		}
		if ev.ResponseStatus != nil {
			s.Code, s.ResponseStatus = ev.ResponseStatus.Code, ev.ResponseStatus.Message
		}
		return s
	}
	for _, tc := range []struct {
		verb, resource, name string
		want                 summary
	}{
		{"create", "configmaps", "cm1", summary{Level: "RequestResponse", Stage: "ResponseComplete", User: "system:admin",
			ObjectRef: auditv1.ObjectReference{Resource: "configmaps", Namespace: ns, Name: "cm1", APIVersion: "v1"}, Code: 201, HasRequest: true, HasResponse: true}},
		{"create", "secrets", "s1", summary{Level: "Metadata", Stage: "ResponseComplete", User: "system:admin",
			ObjectRef: auditv1.ObjectReference{Resource: "secrets", Namespace: ns, Name: "s1", APIVersion: "v1"}, Code: 201}},
		{"create", "services", "svc", summary{Level: "Request", Stage: "ResponseComplete", User: "system:admin", Impersonated: "mallory",
			ObjectRef: auditv1.ObjectReference{Resource: "services", Namespace: ns, Name: "svc", APIVersion: "v1"}, Code: 403, HasRequest: true,
			ResponseStatus: `services is forbidden: User "mallory" cannot create resource "services" in API group "" in the namespace "` + ns + `"`}},
	} {
		t.Run(tc.verb+" "+tc.resource, func(t *testing.T) {
			ev := find(t, tc.verb, tc.resource, tc.name)
			if diff := cmp.Diff(tc.want, sum(ev)); diff != "" {
				t.Errorf("event (-want +got):\n%s", diff)
			}
			if ev.AuditID == "" || ev.RequestReceivedTimestamp.IsZero() || len(ev.SourceIPs) == 0 || !strings.Contains(ev.RequestURI, "/namespaces/"+ns+"/") {
				t.Errorf("event lacks id, time, source or URI: %+v", ev)
			}
		})
	}
	// Upstream's annotations: the authorization decision on every
	// authorized request, the PodSecurity audit level's violations.
	t.Run("annotations", func(t *testing.T) {
		ev := find(t, "create", "configmaps", "cm1")
		if d := ev.Annotations["authorization.k8s.io/decision"]; d != "allow" {
			t.Errorf("admin's create: decision %q, want allow (annotations %v)", d, ev.Annotations)
		}
		ev = find(t, "create", "services", "svc")
		if d := ev.Annotations["authorization.k8s.io/decision"]; d != "forbid" {
			t.Errorf("mallory's create: decision %q, want forbid (annotations %v)", d, ev.Annotations)
		}
		var pod *auditv1.Event
		for _, ev := range readAudit(t, dir) {
			if ev.Verb == "create" && ev.ObjectRef != nil && ev.ObjectRef.Resource == "pods" && ev.ObjectRef.Namespace == podNS.Name {
				pod = &ev
			}
		}
		if pod == nil {
			t.Fatalf("no audit event for the pod's create")
		}
		want := map[string]string{
			"authorization.k8s.io/decision":               "allow",
			"authorization.k8s.io/reason":                 "",
			"pod-security.kubernetes.io/audit-violations": `would violate PodSecurity "restricted:latest": host namespaces (hostNetwork=true), privileged (container "c" must not set securityContext.privileged=true), allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")`,
			"pod-security.kubernetes.io/enforce-policy":   "privileged:latest",
		}
		if d := cmp.Diff(want, pod.Annotations); d != "" {
			t.Errorf("the pod's annotations (-want +got):\n%s", d)
		}
	})
	t.Run("failed authentication", func(t *testing.T) {
		var got []auditv1.Event
		for _, ev := range readAudit(t, dir) {
			if ev.ResponseStatus != nil && ev.ResponseStatus.Code == 401 {
				got = append(got, ev)
			}
		}
		if len(got) != 1 {
			t.Fatalf("%d events with code 401, want the bad token's one: %+v", len(got), got)
		}
		ev := got[0]
		if ev.Stage != auditv1.StageResponseStarted || ev.Level != auditv1.LevelRequestResponse || ev.User.Username != "" || ev.Verb != "create" ||
			ev.ObjectRef == nil || ev.ObjectRef.Resource != "configmaps" || ev.ObjectRef.Namespace != ns ||
			ev.ResponseStatus.Message != "Authentication failed, attempted: bearer" || ev.RequestObject != nil || ev.AuditID == "" {
			t.Errorf("the 401's event: %+v, status %+v", ev, ev.ResponseStatus)
		}
	})
	t.Run("the secret's data never reaches the log", func(t *testing.T) {
		data, err := os.ReadFile(filepath.Join(dir, "audit.log"))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), "hunter2") {
			t.Errorf("audit log holds the secret's data")
		}
		for _, ev := range readAudit(t, dir) {
			if ev.Stage == auditv1.StageRequestReceived {
				t.Fatalf("RequestReceived logged although omitted: %+v", ev)
			}
			if ev.Verb == "get" || ev.Verb == "list" || ev.Verb == "watch" {
				t.Fatalf("a %s was logged, the policy keeps none: %s", ev.Verb, ev.RequestURI)
			}
		}
	})
	t.Run("rotation at --audit-log-maxsize", func(t *testing.T) {
		big := strings.Repeat("x", 200<<10)
		for i := 0; i < 4; i++ {
			if _, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "big-"}, Data: map[string]string{"k": big}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		files, _ := filepath.Glob(filepath.Join(dir, "audit-*.log"))
		if len(files) == 0 {
			t.Fatalf("no rotated audit file after ~1.6 MB of events")
		}
		info, err := os.Stat(filepath.Join(dir, "audit.log"))
		if err != nil || info.Size() > 1<<20 {
			t.Errorf("live audit log: %v, %v; want under 1 MiB", info, err)
		}
		if n := len(readAudit(t, dir)); n < 7 {
			t.Errorf("%d events across the files, want every write", n)
		}
	})
}

func kubernetesFor(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}
