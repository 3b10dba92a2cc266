package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/skiff-sh/skiff/internal/apiserver"
	"github.com/skiff-sh/skiff/internal/apiserver/audit"
	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

// env is the cluster and the webhook server the subtests share.
type env struct {
	c     *testapiserver.Cluster
	cs    kubernetes.Interface
	hooks *hooks
	addr  string // host:port of the webhook server on 127.0.0.1
	ca    []byte
}

func (e *env) url(path string) admissionregistrationv1.WebhookClientConfig {
	u := "https://" + e.addr + path
	return admissionregistrationv1.WebhookClientConfig{URL: &u, CABundle: e.ca}
}

func (e *env) mutating(t *testing.T, ctx context.Context, name string, whs ...admissionregistrationv1.MutatingWebhook) {
	t.Helper()
	for i := range whs {
		if whs[i].SideEffects == nil {
			whs[i].SideEffects = ptr(admissionregistrationv1.SideEffectClassNone)
		}
		if whs[i].AdmissionReviewVersions == nil {
			whs[i].AdmissionReviewVersions = []string{"v1"}
		}
	}
	api := e.cs.AdmissionregistrationV1().MutatingWebhookConfigurations()
	if _, err := api.Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}, Webhooks: whs}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create MutatingWebhookConfiguration %s: %v", name, err)
	}
	t.Cleanup(func() { _ = api.Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

func (e *env) validating(t *testing.T, ctx context.Context, name string, whs ...admissionregistrationv1.ValidatingWebhook) {
	t.Helper()
	for i := range whs {
		if whs[i].SideEffects == nil {
			whs[i].SideEffects = ptr(admissionregistrationv1.SideEffectClassNone)
		}
		if whs[i].AdmissionReviewVersions == nil {
			whs[i].AdmissionReviewVersions = []string{"v1"}
		}
	}
	api := e.cs.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	if _, err := api.Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}, Webhooks: whs}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ValidatingWebhookConfiguration %s: %v", name, err)
	}
	t.Cleanup(func() { _ = api.Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

func configMap(ns, name string, labels map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}}
}

// waitMutated creates (for real, or as a dry run) ConfigMaps named
// <prefix>-<n> until one comes back labelled mutated=yes: the webhook
// configuration is then in effect.
func (e *env) waitMutated(t *testing.T, ctx context.Context, ns, prefix string, labels map[string]string) {
	t.Helper()
	n := 0
	eventually(t, 10*time.Second, "the mutating webhook in effect in "+ns, func() (bool, error) {
		n++
		cm, err := e.cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, fmt.Sprintf("%s-%d", prefix, n), labels), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && cm.Labels["mutated"] == "yes", err
	})
}

// TestAdmissionWebhooks: mutating and validating webhooks served by the
// test over TLS (its own CA in caBundle) on 127.0.0.1, called through the
// admission chain, seen through client-go and kubectl.
func TestAdmissionWebhooks(t *testing.T) {
	// An audit log of configmap writes: the webhooks' annotations land there.
	policy, err := audit.ParsePolicy([]byte(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  resources: [{group: "", resources: [configmaps]}]
- level: None
`))
	if err != nil {
		t.Fatal(err)
	}
	auditLog := filepath.Join(t.TempDir(), "audit.log")
	auditor, err := audit.New(policy, audit.LogOptions{Path: auditLog}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = auditor.Close() })
	c := testapiserver.StartWithOptions(t, testapiserver.Options{Configure: func(cfg *apiserver.Config) { cfg.Audit = auditor }})
	crt := newCerts(t, []net.IP{net.IPv4(127, 0, 0, 1)})
	h := &hooks{t: t}
	e := &env{c: c, cs: c.Clientset(), hooks: h, ca: crt.caPEM}
	e.addr = serveTLS(t, "127.0.0.1:0", crt.tls, h)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	t.Run("a mutating webhook labels and a validating one refuses", func(t *testing.T) {
		ns := "wh-basic"
		namespace(t, ctx, e.cs, ns, nil)
		e.mutating(t, ctx, "label", admissionregistrationv1.MutatingWebhook{
			Name: "label.webhooks.skiff.sh", ClientConfig: e.url("/label"), NamespaceSelector: inNamespace(ns),
			Rules: rule("configmaps", admissionregistrationv1.Create)})
		e.validating(t, ctx, "deny",
			admissionregistrationv1.ValidatingWebhook{Name: "deny.webhooks.skiff.sh", ClientConfig: e.url("/deny"),
				NamespaceSelector: inNamespace(ns), Rules: rule("configmaps", admissionregistrationv1.Create, admissionregistrationv1.Update)},
			admissionregistrationv1.ValidatingWebhook{Name: "v1beta1.webhooks.skiff.sh", ClientConfig: e.url("/observe"),
				NamespaceSelector: inNamespace(ns), Rules: rule("configmaps", admissionregistrationv1.Create),
				AdmissionReviewVersions: []string{"v1beta1"}})
		e.waitMutated(t, ctx, ns, "probe", nil)

		w := &warnings{}
		cs := clientWithWarnings(t, c, w)
		created, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, "plain", map[string]string{"app": "x"}), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		if diff := cmp.Diff(map[string]string{"app": "x", "mutated": "yes"}, created.Labels); diff != "" {
			t.Errorf("labels of the created ConfigMap (-want +got):\n%s", diff)
		}
		if got := w.take(); !contains(got, "labelled by the test webhook") {
			t.Errorf("warnings %q, want the webhook's", got)
		}
		stored, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "plain", metav1.GetOptions{})
		if err != nil || stored.Labels["mutated"] != "yes" {
			t.Errorf("stored: %v %v", stored.Labels, err)
		}
		calls := h.received("/label", "plain")
		if len(calls) != 1 {
			t.Fatalf("the mutating webhook got %d reviews of plain, want 1", len(calls))
		}
		r := calls[0]
		if r.version != "admission.k8s.io/v1" || r.req.Operation != "CREATE" || r.req.Namespace != ns ||
			r.req.Kind != (metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}) || r.req.UserInfo.Username == "" || r.req.DryRun == nil || *r.req.DryRun {
			t.Errorf("review: version %s op %s ns %s kind %v user %q dryRun %v", r.version, r.req.Operation, r.req.Namespace, r.req.Kind, r.req.UserInfo.Username, r.req.DryRun)
		}
		if beta := h.received("/observe", "plain"); len(beta) != 1 || beta[0].version != "admission.k8s.io/v1beta1" {
			t.Errorf("the v1beta1-only webhook got %+v, want one admission.k8s.io/v1beta1 review", beta)
		}
		// The validating webhook sees the mutated object.
		if v := h.received("/deny", "plain"); len(v) != 1 || !strings.Contains(string(v[0].req.Object.Raw), `"mutated":"yes"`) {
			t.Errorf("the validating webhook did not see the mutated object: %+v", v)
		}

		_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, "refused", map[string]string{"deny": "true"}), metav1.CreateOptions{})
		want := `admission webhook "deny.webhooks.skiff.sh" denied the request: objects labelled deny=true are refused by the test`
		if !apierrors.IsForbidden(err) || err.Error() != want {
			t.Errorf("create refused: %v, want 403 %q", err, want)
		}
		if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "refused", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the refused ConfigMap was stored: %v", err)
		}
		// Updates too: the validating webhook has UPDATE.
		stored.Labels["deny"] = "true"
		if _, err := cs.CoreV1().ConfigMaps(ns).Update(ctx, stored, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("update to deny=true: %v, want 403", err)
		}

		// The audit event of the create carries the webhook's annotation
		// (named after the webhook) and upstream's mutation annotation.
		eventually(t, 5*time.Second, "the audit event of plain", func() (bool, error) {
			data, err := os.ReadFile(auditLog)
			if err != nil {
				return false, err
			}
			for _, line := range strings.Split(string(data), "\n") {
				var ev auditv1.Event
				if json.Unmarshal([]byte(line), &ev) != nil || ev.Verb != "create" || ev.ObjectRef == nil || ev.ObjectRef.Name != "plain" {
					continue
				}
				if ev.Annotations["label.webhooks.skiff.sh/labelled"] == "yes" &&
					strings.Contains(ev.Annotations["mutation.webhook.admission.k8s.io/round_0_index_0"], `"mutated":true`) {
					return true, nil
				}
				return false, fmt.Errorf("annotations %v", ev.Annotations)
			}
			return false, nil
		})

		// Upstream's metrics, on the API server's /metrics.
		raw, err := e.cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		if err != nil {
			t.Fatalf("/metrics: %v", err)
		}
		for _, m := range []string{
			`apiserver_admission_webhook_admission_duration_seconds_count{name="label.webhooks.skiff.sh",operation="CREATE",rejected="false",type="admit"}`,
			`apiserver_admission_webhook_rejection_count{error_type="no_error",name="deny.webhooks.skiff.sh",operation="CREATE",rejection_code="403",type="validating"}`,
		} {
			if !strings.Contains(string(raw), m) {
				t.Errorf("/metrics lacks %s; has:\n%s", m, grepLines(string(raw), "apiserver_admission_webhook_"))
			}
		}

		// kubectl: the warning is printed, the label is there, the refusal
		// names the webhook.
		out, err := runKubectl(t, c, "", "-n", ns, "create", "configmap", "from-kubectl")
		if err != nil || !strings.Contains(out, "Warning: labelled by the test webhook") {
			t.Errorf("kubectl create: %v\n%s", err, out)
		}
		out, err = runKubectl(t, c, "", "-n", ns, "get", "configmap", "from-kubectl", "-o", "jsonpath={.metadata.labels.mutated}")
		if err != nil || out != "yes" {
			t.Errorf("kubectl get label: %q %v", out, err)
		}
		out, err = runKubectl(t, c, `apiVersion: v1
kind: ConfigMap
metadata:
  name: refused-by-kubectl
  namespace: `+ns+`
  labels: {deny: "true"}
`, "apply", "-f", "-")
		if err == nil || !strings.Contains(out, want) {
			t.Errorf("kubectl apply of a refused object: %v\n%s", err, out)
		}
	})

	t.Run("failurePolicy decides within timeoutSeconds when a webhook times out or refuses TLS", func(t *testing.T) {
		other := newCerts(t, []net.IP{net.IPv4(127, 0, 0, 1)}) // a certificate the caBundle does not trust
		untrusted := serveTLS(t, "127.0.0.1:0", other.tls, h)
		badTLS := "https://" + untrusted + "/label"
		cases := []struct {
			name    string
			policy  admissionregistrationv1.FailurePolicyType
			cc      admissionregistrationv1.WebhookClientConfig
			wantErr []string // substrings; none: the create succeeds
		}{
			{name: "slow-fail", policy: admissionregistrationv1.Fail, cc: e.url("/slow"),
				wantErr: []string{`Internal error occurred: failed calling webhook "slow-fail.webhooks.skiff.sh": failed to call webhook: Post "https://` + e.addr + `/slow?timeout=1s"`, "deadline exceeded"}},
			{name: "slow-ignore", policy: admissionregistrationv1.Ignore, cc: e.url("/slow")},
			{name: "tls-fail", policy: admissionregistrationv1.Fail, cc: admissionregistrationv1.WebhookClientConfig{URL: &badTLS, CABundle: e.ca},
				wantErr: []string{`failed calling webhook "tls-fail.webhooks.skiff.sh"`, "certificate signed by unknown authority"}},
			{name: "tls-ignore", policy: admissionregistrationv1.Ignore, cc: admissionregistrationv1.WebhookClientConfig{URL: &badTLS, CABundle: e.ca}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				ns := "wh-" + tc.name
				namespace(t, ctx, e.cs, ns, nil)
				// The label webhook comes first in the same configuration: once
				// it labels, the configuration (and the failing webhook) is in
				// effect.
				e.mutating(t, ctx, tc.name,
					admissionregistrationv1.MutatingWebhook{Name: "label.webhooks.skiff.sh", ClientConfig: e.url("/label"),
						NamespaceSelector: inNamespace(ns), Rules: rule("configmaps", admissionregistrationv1.Create),
						FailurePolicy: ptr(admissionregistrationv1.Ignore)},
					admissionregistrationv1.MutatingWebhook{Name: tc.name + ".webhooks.skiff.sh", ClientConfig: tc.cc,
						NamespaceSelector: inNamespace(ns), Rules: rule("configmaps", admissionregistrationv1.Create),
						FailurePolicy: ptr(tc.policy), TimeoutSeconds: ptr(int32(1))})
				var took time.Duration
				var last error
				n := 0
				eventually(t, 20*time.Second, "the configuration in effect", func() (bool, error) {
					n++
					start := time.Now()
					cm, err := e.cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, fmt.Sprintf("%s-%d", tc.name, n), nil), metav1.CreateOptions{})
					took, last = time.Since(start), err
					if len(tc.wantErr) > 0 {
						return err != nil, nil
					}
					return err == nil && cm.Labels["mutated"] == "yes", err
				})
				if len(tc.wantErr) == 0 {
					if name := fmt.Sprintf("%s-%d", tc.name, n); tc.name == "slow-ignore" && len(h.received("/slow", name)) != 1 {
						t.Errorf("the slow webhook was not called for %s", name)
					}
					if took > 4*time.Second {
						t.Errorf("the create took %v with timeoutSeconds 1", took)
					}
					return
				}
				if !apierrors.IsInternalError(last) {
					t.Errorf("error %v is not a 500", last)
				}
				for _, s := range tc.wantErr {
					if !strings.Contains(last.Error(), s) {
						t.Errorf("error %q lacks %q", last, s)
					}
				}
				if took > 4*time.Second {
					t.Errorf("the refusal took %v with timeoutSeconds 1", took)
				}
			})
		}
	})

	t.Run("namespaceSelector and objectSelector", func(t *testing.T) {
		on, off := "wh-sel-on", "wh-sel-off"
		namespace(t, ctx, e.cs, on, map[string]string{"webhooks": "on"})
		namespace(t, ctx, e.cs, off, nil)
		e.mutating(t, ctx, "selectors", admissionregistrationv1.MutatingWebhook{
			Name: "selectors.webhooks.skiff.sh", ClientConfig: e.url("/label"), Rules: rule("configmaps", admissionregistrationv1.Create),
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"webhooks": "on"}},
			ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "hook", Operator: metav1.LabelSelectorOpIn, Values: []string{"yes"}}}}})
		e.waitMutated(t, ctx, on, "probe", map[string]string{"hook": "yes"})
		for _, tc := range []struct {
			ns     string
			labels map[string]string
			want   string
		}{
			{ns: on, labels: map[string]string{"hook": "yes"}, want: "yes"},
			{ns: on, labels: map[string]string{"hook": "no"}, want: ""},
			{ns: off, labels: map[string]string{"hook": "yes"}, want: ""},
		} {
			name := "sel-" + tc.labels["hook"]
			cm, err := e.cs.CoreV1().ConfigMaps(tc.ns).Create(ctx, configMap(tc.ns, name, tc.labels), metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("create %s/%s: %v", tc.ns, name, err)
			}
			if cm.Labels["mutated"] != tc.want {
				t.Errorf("%s/%s labelled %q, want %q", tc.ns, name, cm.Labels["mutated"], tc.want)
			}
		}
	})

	t.Run("matchConditions", func(t *testing.T) {
		ns := "wh-match"
		namespace(t, ctx, e.cs, ns, nil)
		e.mutating(t, ctx, "match", admissionregistrationv1.MutatingWebhook{
			Name: "match.webhooks.skiff.sh", ClientConfig: e.url("/label"), NamespaceSelector: inNamespace(ns),
			Rules: rule("configmaps", admissionregistrationv1.Create),
			MatchConditions: []admissionregistrationv1.MatchCondition{
				{Name: "name-prefix", Expression: `object.metadata.name.startsWith("match-")`},
				{Name: "not-a-node", Expression: `!("system:nodes" in request.userInfo.groups)`},
				{Name: "may-read-configmaps", Expression: `authorizer.group('').resource('configmaps').namespace(request.namespace).check('get').allowed()`},
			}})
		e.waitMutated(t, ctx, ns, "match-probe", nil)
		other, err := e.cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, "other", nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if other.Labels["mutated"] != "" {
			t.Errorf("a ConfigMap the conditions exclude was mutated")
		}
		if n := len(h.received("/label", "other")); n != 0 {
			t.Errorf("the webhook got %d reviews of an excluded object", n)
		}
	})

	t.Run("matchPolicy Equivalent converts to the webhook's version", func(t *testing.T) {
		ns := "wh-equivalent"
		namespace(t, ctx, e.cs, ns, nil)
		v1Only := []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{"autoscaling"}, APIVersions: []string{"v1"}, Resources: []string{"horizontalpodautoscalers"}}}}
		e.mutating(t, ctx, "equivalent", admissionregistrationv1.MutatingWebhook{
			Name: "equivalent.webhooks.skiff.sh", ClientConfig: e.url("/label"), NamespaceSelector: inNamespace(ns),
			Rules: v1Only, MatchPolicy: ptr(admissionregistrationv1.Equivalent)})
		hpa := func(name string) *autoscalingv2.HorizontalPodAutoscaler {
			return &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MinReplicas: ptr(int32(1)), MaxReplicas: 3,
					ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}}}
		}
		var got *autoscalingv2.HorizontalPodAutoscaler
		n := 0
		eventually(t, 10*time.Second, "the webhook in effect", func() (bool, error) {
			n++
			var err error
			got, err = e.cs.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, hpa(fmt.Sprintf("hpa-%d", n)), metav1.CreateOptions{})
			return err == nil && got.Labels["mutated"] == "yes", err
		})
		if got.Spec.MaxReplicas != 3 || got.Spec.ScaleTargetRef.Name != "web" {
			t.Errorf("the v2 object lost its spec on the way back: %+v", got.Spec)
		}
		calls := h.received("/label", got.Name)
		if len(calls) != 1 {
			t.Fatalf("the webhook got %d reviews of %s", len(calls), got.Name)
		}
		r := calls[0].req
		wantKind := metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "HorizontalPodAutoscaler"}
		if r.Kind != wantKind || r.RequestKind == nil || r.RequestKind.Version != "v2" || !strings.Contains(string(r.Object.Raw), `"apiVersion":"autoscaling/v1"`) {
			t.Errorf("review kind %v requestKind %v object %s: want the object converted to autoscaling/v1", r.Kind, r.RequestKind, r.Object.Raw)
		}
	})

	t.Run("dryRun with sideEffects", func(t *testing.T) {
		ns := "wh-dry"
		namespace(t, ctx, e.cs, ns, nil)
		e.mutating(t, ctx, "dry", admissionregistrationv1.MutatingWebhook{
			Name: "dry.webhooks.skiff.sh", ClientConfig: e.url("/label"), NamespaceSelector: inNamespace(ns),
			Rules: rule("configmaps", admissionregistrationv1.Create), SideEffects: ptr(admissionregistrationv1.SideEffectClassNoneOnDryRun)})
		e.waitMutated(t, ctx, ns, "dry", nil) // dry runs: the webhook is called, nothing is written
		calls := h.received("/label", "")
		last := calls[len(calls)-1]
		if last.req.DryRun == nil || !*last.req.DryRun || !strings.Contains(string(last.req.Options.Raw), `"dryRun":["All"]`) {
			t.Errorf("the webhook's review does not say dryRun: %v %s", last.req.DryRun, last.req.Options.Raw)
		}
		list, err := e.cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, cm := range list.Items {
			if strings.HasPrefix(cm.Name, "dry-") {
				t.Errorf("a dry run wrote %s", cm.Name)
			}
		}
		// sideEffects Some and Unknown (which make upstream refuse dry runs)
		// cannot be stored in v1, as upstream.
		_, err = e.cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: "side-effects"},
			Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "some.webhooks.skiff.sh", ClientConfig: e.url("/label"),
				SideEffects: ptr(admissionregistrationv1.SideEffectClassSome), AdmissionReviewVersions: []string{"v1"}}},
		}, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "webhooks[0].sideEffects: Unsupported value") {
			t.Errorf("sideEffects Some: %v, want 422", err)
		}
	})

	t.Run("reinvocationPolicy IfNeeded", func(t *testing.T) {
		ns := "wh-reinvoke"
		namespace(t, ctx, e.cs, ns, nil)
		e.mutating(t, ctx, "reinvoke",
			admissionregistrationv1.MutatingWebhook{Name: "first.webhooks.skiff.sh", ClientConfig: e.url("/reinvoke-first"),
				NamespaceSelector: inNamespace(ns), Rules: rule("configmaps", admissionregistrationv1.Create),
				ReinvocationPolicy: ptr(admissionregistrationv1.IfNeededReinvocationPolicy)},
			admissionregistrationv1.MutatingWebhook{Name: "second.webhooks.skiff.sh", ClientConfig: e.url("/reinvoke-second"),
				NamespaceSelector: inNamespace(ns), Rules: rule("configmaps", admissionregistrationv1.Create)})
		var cm *corev1.ConfigMap
		n := 0
		eventually(t, 10*time.Second, "the configuration in effect", func() (bool, error) {
			n++
			var err error
			cm, err = e.cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, fmt.Sprintf("cm-%d", n), nil), metav1.CreateOptions{})
			return err == nil && cm.Labels["second"] == "added", err
		})
		if got := cm.Annotations["first-saw-second"]; got != "true" {
			t.Errorf("first-saw-second = %q: the IfNeeded webhook was not called again after the second one changed the object", got)
		}
		if got := len(h.received("/reinvoke-first", cm.Name)); got != 2 {
			t.Errorf("the IfNeeded webhook was called %d times, want 2", got)
		}
		if got := len(h.received("/reinvoke-second", cm.Name)); got != 1 {
			t.Errorf("the Never webhook was called %d times, want 1", got)
		}
	})

	t.Run("webhook configurations are not sent to webhooks", func(t *testing.T) {
		ns := "wh-exempt"
		namespace(t, ctx, e.cs, ns, nil)
		down := "https://127.0.0.1:1/down"
		all := []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*/*"}}}}
		e.validating(t, ctx, "everything", admissionregistrationv1.ValidatingWebhook{
			Name: "down.webhooks.skiff.sh", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &down, CABundle: e.ca},
			Rules: all, FailurePolicy: ptr(admissionregistrationv1.Fail), TimeoutSeconds: ptr(int32(1))})
		eventually(t, 10*time.Second, "the failing webhook in effect", func() (bool, error) {
			_, err := e.cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, "blocked", nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err != nil && strings.Contains(err.Error(), `failed calling webhook "down.webhooks.skiff.sh"`), nil
		})
		e.mutating(t, ctx, "still-possible", admissionregistrationv1.MutatingWebhook{Name: "label.webhooks.skiff.sh",
			ClientConfig: e.url("/label"), Rules: rule("configmaps", admissionregistrationv1.Create), NamespaceSelector: inNamespace("nowhere")})
		if err := e.cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, "everything", metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete the failing configuration: %v", err)
		}
	})

	t.Run("a service reference through a selectorless Service and its EndpointSlice", func(t *testing.T) {
		testServiceReference(t, ctx, e)
	})
}

// testServiceReference: the webhook server listens on an address of a
// link the test creates; a selectorless Service and an EndpointSlice
// name it; a mutating webhook and a CRD conversion webhook refer to the
// Service, and the API server dials the endpoint with the TLS server name
// hook.<ns>.svc.
func testServiceReference(t *testing.T, ctx context.Context, e *env) {
	ip := hostAddress(t)
	ns := "wh-svc"
	crt := newCerts(t, nil, "hook."+ns+".svc")
	mux := http.NewServeMux()
	mux.Handle("/convert", http.HandlerFunc(convertCronTabs))
	mux.Handle("/", e.hooks)
	addr := serveTLS(t, net.JoinHostPort(ip.String(), "0"), crt.tls, mux)
	_, portStr, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portStr)

	namespace(t, ctx, e.cs, ns, nil)
	if _, err := e.cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "hook"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(int32(port))}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatalf("create service: %v", err)
	}
	if _, err := e.cs.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "hook-1", Labels: map[string]string{discoveryv1.LabelServiceName: "hook"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip.String()}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("https"), Port: ptr(int32(port)), Protocol: ptr(corev1.ProtocolTCP)}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create EndpointSlice: %v", err)
	}
	ref := func(path string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{CABundle: crt.caPEM,
			Service: &admissionregistrationv1.ServiceReference{Namespace: ns, Name: "hook", Path: ptr(path), Port: ptr(int32(443))}}
	}
	e.mutating(t, ctx, "by-service", admissionregistrationv1.MutatingWebhook{Name: "service.webhooks.skiff.sh",
		ClientConfig: ref("/label"), NamespaceSelector: inNamespace(ns), Rules: rule("configmaps", admissionregistrationv1.Create)})
	e.waitMutated(t, ctx, ns, "svc", nil)

	// A CRD whose conversion webhook is the same Service.
	ax := apiextensionsclient.NewForConfigOrDie(e.c.Config)
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "crontabs.stable.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "stable.example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "crontabs", Singular: "crontab", Kind: "CronTab", ListKind: "CronTabList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: true, Schema: cronTabSchema("cronSpec")},
				{Name: "v2", Served: true, Schema: cronTabSchema("schedule")},
			},
			Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter,
				Webhook: &apiextensionsv1.WebhookConversion{ConversionReviewVersions: []string{"v1"},
					ClientConfig: &apiextensionsv1.WebhookClientConfig{CABundle: crt.caPEM,
						Service: &apiextensionsv1.ServiceReference{Namespace: ns, Name: "hook", Path: ptr("/convert"), Port: ptr(int32(443))}}}},
		},
	}
	if _, err := ax.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create CRD: %v", err)
	}
	t.Cleanup(func() {
		_ = ax.ApiextensionsV1().CustomResourceDefinitions().Delete(context.Background(), crd.Name, metav1.DeleteOptions{})
	})
	dyn := dynamic.NewForConfigOrDie(e.c.Config)
	v1 := dyn.Resource(schema.GroupVersionResource{Group: "stable.example.com", Version: "v1", Resource: "crontabs"}).Namespace(ns)
	v2 := dyn.Resource(schema.GroupVersionResource{Group: "stable.example.com", Version: "v2", Resource: "crontabs"}).Namespace(ns)
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "stable.example.com/v2", "kind": "CronTab",
		"metadata": map[string]any{"name": "nightly"}, "spec": map[string]any{"schedule": "0 3 * * *"}}}
	eventually(t, 10*time.Second, "a CronTab written through v2", func() (bool, error) {
		_, err := v2.Create(ctx, obj, metav1.CreateOptions{})
		return err == nil, err
	})
	got, err := v1.Get(ctx, "nightly", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("read through v1: %v", err)
	}
	if s, _, _ := unstructured.NestedString(got.Object, "spec", "cronSpec"); s != "0 3 * * *" {
		t.Errorf("v1 object %v, want spec.cronSpec converted by the webhook", got.Object)
	}
}

func cronTabSchema(field string) *apiextensionsv1.CustomResourceValidation {
	return &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": {Type: "object",
			Properties: map[string]apiextensionsv1.JSONSchemaProps{field: {Type: "string"}}}}}}
}

// convertCronTabs is a conversion webhook: v1 keeps the schedule in
// spec.cronSpec, v2 in spec.schedule.
func convertCronTabs(w http.ResponseWriter, r *http.Request) {
	var review apiextensionsv1.ConversionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "bad review", http.StatusBadRequest)
		return
	}
	resp := &apiextensionsv1.ConversionResponse{UID: review.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
	for _, raw := range review.Request.Objects {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw.Raw); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		spec, _, _ := unstructured.NestedMap(u.Object, "spec")
		if spec == nil {
			spec = map[string]any{}
		}
		from, to := "schedule", "cronSpec"
		if review.Request.DesiredAPIVersion == "stable.example.com/v2" {
			from, to = to, from
		}
		if v, ok := spec[from]; ok {
			spec[to] = v
			delete(spec, from)
		}
		u.Object["spec"] = spec
		u.SetAPIVersion(review.Request.DesiredAPIVersion)
		data, _ := u.MarshalJSON()
		resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: data})
	}
	review.Response, review.Request = resp, nil
	_ = json.NewEncoder(w).Encode(&review)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// grepLines keeps the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
