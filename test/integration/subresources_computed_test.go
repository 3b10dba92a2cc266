package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authorizationv1 "k8s.io/api/authorization/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// TestSubresourcesAndComputedResources drives the subresources and computed
// resources of the wider API surface through client-go.
func TestSubresourcesAndComputedResources(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	cs := c.Clientset()
	ctx := testCtx(t, 60*time.Second)
	ns := newNamespace(t, cs)

	t.Run("eviction honours a PodDisruptionBudget", func(t *testing.T) {
		pdb := &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: "guard"},
			Spec: policyv1.PodDisruptionBudgetSpec{
				MinAvailable: ptr.To(intstr.FromInt32(1)),
				Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}},
			},
		}
		if _, err := cs.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "guarded", Labels: map[string]string{"app": "guarded"}},
			Spec:       corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		}
		pod, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
		if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The disruption controller has not counted anything: no disruptions allowed.
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "guarded", Namespace: ns}}
		err = cs.CoreV1().Pods(ns).EvictV1(ctx, ev)
		if !apierrors.IsTooManyRequests(err) {
			t.Fatalf("eviction against a budget allowing none: got %v, want 429 TooManyRequests", err)
		}
		if _, err := cs.CoreV1().Pods(ns).Get(ctx, "guarded", metav1.GetOptions{}); err != nil {
			t.Fatalf("the refused eviction removed the pod: %v", err)
		}
		// Allow one disruption: the eviction goes through and is recorded.
		got, err := cs.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "guard", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got.Status = policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1, CurrentHealthy: 1, DesiredHealthy: 1, ExpectedPods: 1, ObservedGeneration: got.Generation}
		if _, err := cs.PolicyV1().PodDisruptionBudgets(ns).UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := cs.CoreV1().Pods(ns).EvictV1(ctx, ev); err != nil {
			t.Fatalf("eviction allowed by the budget: %v", err)
		}
		after, err := cs.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "guard", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if after.Status.DisruptionsAllowed != 0 || !hasKey(after.Status.DisruptedPods, "guarded") {
			t.Fatalf("budget after eviction: allowed %d, disrupted %v; want 0 and the pod recorded", after.Status.DisruptionsAllowed, after.Status.DisruptedPods)
		}
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "guarded", metav1.GetOptions{})
		if err != nil || p.DeletionTimestamp == nil {
			t.Fatalf("evicted pod: %v, deletionTimestamp %v; want it terminating", err, p)
		}
	})

	t.Run("eviction marks the pod DisruptionTarget before deleting it", func(t *testing.T) {
		// As upstream's: a Job's podFailurePolicy tells an eviction from a
		// failure by this condition (conformance: Job pod failure policy
		// ignoring DisruptionTarget).
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "evictee"},
			Spec:       corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		}
		pod, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
		if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		disruption := func(p *corev1.Pod) *corev1.PodCondition {
			for i := range p.Status.Conditions {
				if p.Status.Conditions[i].Type == corev1.DisruptionTarget {
					return &p.Status.Conditions[i]
				}
			}
			return nil
		}
		dry := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "evictee", Namespace: ns},
			DeleteOptions: &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}}
		if err := cs.CoreV1().Pods(ns).EvictV1(ctx, dry); err != nil {
			t.Fatalf("dry-run eviction: %v", err)
		}
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "evictee", metav1.GetOptions{})
		if err != nil || p.DeletionTimestamp != nil || disruption(p) != nil {
			t.Fatalf("after a dry-run eviction: %v, deletionTimestamp %v, conditions %+v; want the pod untouched", err, p.DeletionTimestamp, p.Status.Conditions)
		}
		if err := cs.CoreV1().Pods(ns).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "evictee", Namespace: ns}}); err != nil {
			t.Fatalf("eviction: %v", err)
		}
		p, err = cs.CoreV1().Pods(ns).Get(ctx, "evictee", metav1.GetOptions{})
		if err != nil || p.DeletionTimestamp == nil {
			t.Fatalf("evicted pod: %v; want it terminating", err)
		}
		c := disruption(p)
		if c == nil || c.Status != corev1.ConditionTrue || c.Reason != "EvictionByEvictionAPI" || c.Message != "Eviction API: evicting" || c.LastTransitionTime.IsZero() {
			t.Fatalf("evicted pod's conditions %+v; want DisruptionTarget True, EvictionByEvictionAPI, \"Eviction API: evicting\"", p.Status.Conditions)
		}
		if p.Status.Phase != corev1.PodRunning || len(p.Status.Conditions) != 2 {
			t.Errorf("evicted pod's status %+v; want the rest of it unchanged", p.Status)
		}
	})

	t.Run("certificate signing request approval", func(t *testing.T) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "alice"}}, key)
		if err != nil {
			t.Fatal(err)
		}
		csr := &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{Name: ns + "-alice"},
			Spec: certificatesv1.CertificateSigningRequestSpec{
				Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
				SignerName: "kubernetes.io/kube-apiserver-client",
				Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth},
			},
		}
		csr, err = cs.CertificatesV1().CertificateSigningRequests().Create(ctx, csr, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if csr.Spec.Username != "system:admin" {
			t.Fatalf("requester: got %q, want the creating user system:admin", csr.Spec.Username)
		}
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "Test", Message: "approved in a test",
		})
		approved, err := cs.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("approve: %v", err)
		}
		if len(approved.Status.Conditions) != 1 || approved.Status.Conditions[0].Type != certificatesv1.CertificateApproved {
			t.Fatalf("conditions after approval: %+v", approved.Status.Conditions)
		}
		// A merge patch of /approval, as the conformance test sends: the
		// metadata and the conditions change, nothing else.
		patched, err := cs.CertificatesV1().CertificateSigningRequests().Patch(ctx, csr.Name, types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"patchedapproval":"true"}},"status":{"conditions":[`+
				`{"type":"Approved","status":"True","reason":"Test","message":"approved in a test"},`+
				`{"type":"ApprovalPatch","status":"True","reason":"e2e"}]}}`), metav1.PatchOptions{}, "approval")
		if err != nil {
			t.Fatalf("patch approval: %v", err)
		}
		if len(patched.Status.Conditions) != 2 || patched.Status.Conditions[1].Type != "ApprovalPatch" || patched.Annotations["patchedapproval"] != "true" {
			t.Fatalf("after the approval patch: conditions %+v annotations %v", patched.Status.Conditions, patched.Annotations)
		}
		approved = patched
		// Approval can't change the spec.
		approved.Spec.SignerName = "example.com/other"
		approved.Status.Conditions = nil
		again, err := cs.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, approved, metav1.UpdateOptions{})
		if err == nil && again.Spec.SignerName != csr.Spec.SignerName {
			t.Fatalf("approval changed spec.signerName to %q", again.Spec.SignerName)
		}
	})

	t.Run("componentstatuses are read-only", func(t *testing.T) {
		list, err := cs.CoreV1().ComponentStatuses().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, c := range list.Items {
			names = append(names, c.Name)
			// The harness runs no scheduler or controller manager: only
			// etcd is healthy (TestOverload checks the others' reports).
			if c.Name == "etcd-0" && (len(c.Conditions) == 0 || c.Conditions[0].Status != corev1.ConditionTrue) {
				t.Errorf("%s not healthy: %+v", c.Name, c.Conditions)
			}
		}
		if diff := cmp.Diff([]string{"controller-manager", "etcd-0", "scheduler"}, sortedCopy(names)); diff != "" {
			t.Errorf("components (-want +got):\n%s", diff)
		}
		_, err = cs.CoreV1().ComponentStatuses().Create(ctx, &corev1.ComponentStatus{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
		if !apierrors.IsMethodNotSupported(err) {
			t.Fatalf("create componentstatus: got %v, want 405", err)
		}
	})

	t.Run("self reviews answer for the caller", func(t *testing.T) {
		sar, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Resource: "pods"}},
		}, metav1.CreateOptions{})
		if err != nil || !sar.Status.Allowed {
			t.Fatalf("can the admin create pods: %v %+v", err, sar)
		}
		ssrr, err := cs.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx, &authorizationv1.SelfSubjectRulesReview{
			Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: ns},
		}, metav1.CreateOptions{})
		if err != nil || len(ssrr.Status.ResourceRules) == 0 {
			t.Fatalf("rules review: %v %+v", err, ssrr)
		}
		err = cs.AuthorizationV1().RESTClient().Get().Resource("selfsubjectaccessreviews").Do(ctx).Error()
		if !apierrors.IsMethodNotSupported(err) {
			t.Fatalf("list selfsubjectaccessreviews: got %v, want 405", err)
		}
	})

	t.Run("HorizontalPodAutoscaler v1 and v2 are one object", func(t *testing.T) {
		h1 := &autoscalingv1.HorizontalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: autoscalingv1.HorizontalPodAutoscalerSpec{
				ScaleTargetRef:                 autoscalingv1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
				MaxReplicas:                    5,
				TargetCPUUtilizationPercentage: ptr.To(int32(60)),
			},
		}
		if _, err := cs.AutoscalingV1().HorizontalPodAutoscalers(ns).Create(ctx, h1, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		h2, err := cs.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
			Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(int32(60))},
		}}}
		if diff := cmp.Diff(want, h2.Spec.Metrics); diff != "" {
			t.Fatalf("v2 metrics of a v1 HPA (-want +got):\n%s", diff)
		}
		if h2.Spec.MinReplicas == nil || *h2.Spec.MinReplicas != 1 {
			t.Fatalf("minReplicas default: %v", h2.Spec.MinReplicas)
		}
	})

	t.Run("deleting a Job orphans its pods by default", func(t *testing.T) {
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: "once"},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "c", Image: "busybox"}},
			}}},
		}
		job, err := cs.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if job.Spec.Selector == nil || job.Spec.Selector.MatchLabels["batch.kubernetes.io/controller-uid"] != string(job.UID) {
			t.Fatalf("generated selector: %+v", job.Spec.Selector)
		}
		if err := cs.BatchV1().Jobs(ns).Delete(ctx, "once", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := cs.BatchV1().Jobs(ns).Get(ctx, "once", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("job gone at once; want it held by the orphan finalizer for the garbage collector: %v", err)
		}
		if got.DeletionTimestamp == nil || !contains(got.Finalizers, metav1.FinalizerOrphanDependents) {
			t.Fatalf("job after delete: deletionTimestamp %v finalizers %v", got.DeletionTimestamp, got.Finalizers)
		}
	})
}

func hasKey(m map[string]metav1.Time, k string) bool {
	_, ok := m[k]
	return ok
}
