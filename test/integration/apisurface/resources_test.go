package apisurface

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	resourcev1 "k8s.io/api/resource/v1"
	svmv1 "k8s.io/api/storagemigration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

// TestInformersSync starts the informers upstream kube-scheduler and
// kube-controller-manager v1.37 wait for on the types this issue adds,
// and waits until every one has synced (list, then watch-list).
func TestInformersSync(t *testing.T) {
	c := testapiserver.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := informers.NewSharedInformerFactory(c.Clientset(), 0)
	synced := map[string]cache.InformerSynced{
		"deviceclasses":            f.Resource().V1().DeviceClasses().Informer().HasSynced,
		"resourceclaims":           f.Resource().V1().ResourceClaims().Informer().HasSynced,
		"resourceclaimtemplates":   f.Resource().V1().ResourceClaimTemplates().Informer().HasSynced,
		"resourceslices":           f.Resource().V1().ResourceSlices().Informer().HasSynced,
		"devicetaintrules":         f.Resource().V1().DeviceTaintRules().Informer().HasSynced,
		"servicecidrs":             f.Networking().V1().ServiceCIDRs().Informer().HasSynced,
		"ipaddresses":              f.Networking().V1().IPAddresses().Informer().HasSynced,
		"clustertrustbundles":      f.Certificates().V1().ClusterTrustBundles().Informer().HasSynced,
		"podcertificaterequests":   f.Certificates().V1().PodCertificateRequests().Informer().HasSynced,
		"storageversionmigrations": f.Storagemigration().V1().StorageVersionMigrations().Informer().HasSynced,
		"volumeattributesclasses":  f.Storage().V1().VolumeAttributesClasses().Informer().HasSynced,
	}
	f.Start(ctx.Done())
	defer f.Shutdown()
	for name, fn := range synced {
		if !cache.WaitForCacheSync(ctx.Done(), fn) {
			t.Errorf("%s informer did not sync", name)
		}
	}
	// A change reaches a synced informer.
	slices := f.Resource().V1().ResourceSlices().Lister()
	if _, err := c.Clientset().ResourceV1().ResourceSlices().Create(ctx, gpuSlice("node-1", 2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := slices.Get("node-1-gpus"); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the informer never saw the new ResourceSlice")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func gpuSlice(node string, n int) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-gpus"},
		Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.example.com", NodeName: ptr.To(node),
			Pool: resourcev1.ResourcePool{Name: node, ResourceSliceCount: 1}}}
	for i := 0; i < n; i++ {
		s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{Name: "gpu-" + string(rune('0'+i))})
	}
	return s
}

// TestDRAResources drives resource.k8s.io/v1 as the scheduler and a
// driver would: slices selected by node, a claim from a template's spec
// with defaults, status written through /status (and only there), the
// spec immutable.
func TestDRAResources(t *testing.T) {
	c := testapiserver.Start(t)
	cs := c.Clientset()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := cs.ResourceV1()

	if _, err := r.DeviceClasses().Create(ctx, &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu.example.com"},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "gpu.example.com"`}}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, node := range []string{"node-1", "node-2"} {
		if _, err := r.ResourceSlices().Create(ctx, gpuSlice(node, 8), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bad := gpuSlice("node-3", 1)
	bad.Spec.NodeName = nil
	if _, err := r.ResourceSlices().Create(ctx, bad, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("slice without node selection: %v, want 422", err)
	}
	onNode2, err := r.ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=node-2"})
	if err != nil {
		t.Fatal(err)
	}
	if len(onNode2.Items) != 1 || onNode2.Items[0].Name != "node-2-gpus" || onNode2.Items[0].Generation != 1 {
		t.Errorf("slices on node-2 = %+v", onNode2.Items)
	}

	spec := resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu",
		Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.example.com"}}}}}
	if _, err := r.ResourceClaimTemplates("default").Create(ctx, &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "one-gpu"},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: spec}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	claim, err := r.ResourceClaims("default").Create(ctx, &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "pod-gpu"}, Spec: spec,
		Status: resourcev1.ResourceClaimStatus{ReservedFor: []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "x", UID: "1"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := []any{claim.Spec.Devices.Requests[0].Exactly.AllocationMode, claim.Spec.Devices.Requests[0].Exactly.Count, len(claim.Status.ReservedFor)}
	if diff := cmp.Diff([]any{resourcev1.DeviceAllocationModeExactCount, int64(1), 0}, got); diff != "" {
		t.Errorf("created claim: defaults and cleared status (-want +got):\n%s", diff)
	}

	claim.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
		{Request: "gpu", Driver: "gpu.example.com", Pool: "node-1", Device: "gpu-0"}}}}
	claim.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: "11111111-1111-1111-1111-111111111111"}}
	claim, err = r.ResourceClaims("default").UpdateStatus(ctx, claim, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("allocate through /status: %v", err)
	}
	claim.Status.Allocation.Devices.Results[0].Device = "gpu-1"
	if _, err := r.ResourceClaims("default").UpdateStatus(ctx, claim, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("changing an allocation: %v, want 422", err)
	}
	claim, err = r.ResourceClaims("default").Get(ctx, "pod-gpu", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claim.Spec.Devices.Requests[0].Name = "other"
	if _, err := r.ResourceClaims("default").Update(ctx, claim, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("changing a claim's spec: %v, want 422", err)
	}

	table := &metav1.Table{}
	if err := cs.ResourceV1().RESTClient().Get().AbsPath("/apis/resource.k8s.io/v1/namespaces/default/resourceclaims").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").Do(ctx).Into(table); err != nil {
		t.Fatal(err)
	}
	if len(table.Rows) != 1 || table.Rows[0].Cells[1] != "allocated,reserved" {
		t.Errorf("claims table = %+v", table.Rows)
	}

	rule, err := r.DeviceTaintRules().Create(ctx, &resourcev1.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: "broken-gpu"},
		Spec: resourcev1.DeviceTaintRuleSpec{DeviceSelector: &resourcev1.DeviceTaintSelector{Driver: ptr.To("gpu.example.com"), Device: ptr.To("gpu-3")},
			Taint: resourcev1.DeviceTaint{Key: "example.com/broken", Effect: resourcev1.DeviceTaintEffectNoSchedule}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rule.Spec.Taint.TimeAdded == nil {
		t.Errorf("taint rule without the defaulted timeAdded")
	}
}

// TestNetworkingCertificatesMigration: ServiceCIDR and IPAddress rules,
// a ClusterTrustBundle's signer-prefixed name, a StorageVersionMigration
// with status.
func TestNetworkingCertificatesMigration(t *testing.T) {
	c := testapiserver.Start(t)
	cs := c.Clientset()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	cidrs := cs.NetworkingV1().ServiceCIDRs()
	extra, err := cidrs.Create(ctx, &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "extra"},
		Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.44.0.0/24"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	extra.Spec.CIDRs = []string{"10.45.0.0/24"}
	if _, err := cidrs.Update(ctx, extra, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("changing a ServiceCIDR's range: %v, want 422", err)
	}
	if _, err := cidrs.Create(ctx, &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "two-v4"},
		Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.46.0.0/24", "10.47.0.0/24"}}}, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("two IPv4 ranges: %v, want 422", err)
	}
	ips := cs.NetworkingV1().IPAddresses()
	ref := &networkingv1.ParentReference{Resource: "services", Namespace: "default", Name: "web"}
	if _, err := ips.Create(ctx, &networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "10.44.0.010"},
		Spec: networkingv1.IPAddressSpec{ParentRef: ref}}, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("IPAddress named by a non-canonical address: %v, want 422", err)
	}
	if _, err := ips.Create(ctx, &networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "10.44.0.10"},
		Spec: networkingv1.IPAddressSpec{ParentRef: ref}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	ctbs := cs.CertificatesV1().ClusterTrustBundles()
	if _, err := ctbs.Create(ctx, &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: "wrong-name"},
		Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: "example.com/signer", TrustBundle: string(c.PKI.CAPEM)}}, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("bundle not named for its signer: %v, want 422", err)
	}
	if _, err := ctbs.Create(ctx, &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: "example.com:signer:root"},
		Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: "example.com/signer", TrustBundle: string(c.PKI.CAPEM)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bySigner, err := ctbs.List(ctx, metav1.ListOptions{FieldSelector: "spec.signerName=example.com/signer"})
	if err != nil || len(bySigner.Items) != 1 {
		t.Errorf("bundles by signer: %v, %v", bySigner, err)
	}

	svms := cs.StoragemigrationV1().StorageVersionMigrations()
	m, err := svms.Create(ctx, &svmv1.StorageVersionMigration{ObjectMeta: metav1.ObjectMeta{Name: "deployments"},
		Spec: svmv1.StorageVersionMigrationSpec{Resource: metav1.GroupResource{Group: "apps", Resource: "deployments"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m.Status.Conditions = []metav1.Condition{{Type: string(svmv1.MigrationSucceeded), Status: metav1.ConditionTrue, Reason: "Done", LastTransitionTime: metav1.Now()}}
	if m, err = svms.UpdateStatus(ctx, m, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	m.Status.Conditions[0].Status = metav1.ConditionFalse
	if _, err := svms.UpdateStatus(ctx, m, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("un-succeeding a migration: %v, want 422", err)
	}
}

// TestBindingsAndServiceDeleteCollection: POST to the top-level bindings
// resource binds a pod; deletecollection on services deletes them all.
func TestBindingsAndServiceDeleteCollection(t *testing.T) {
	c := testapiserver.Start(t)
	cs := c.Clientset()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cs.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}
	status := &metav1.Status{}
	err := cs.CoreV1().RESTClient().Post().Namespace("default").Resource("bindings").Body(b).Do(ctx).Into(status)
	if err != nil {
		t.Fatal(err)
	}
	pod, err := cs.CoreV1().Pods("default").Get(ctx, "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.NodeName != "node-1" || status.Status != metav1.StatusSuccess {
		t.Errorf("after POST bindings: nodeName %q, status %q", pod.Spec.NodeName, status.Status)
	}
	err = cs.CoreV1().RESTClient().Post().Namespace("default").Resource("bindings").Body(b).Do(ctx).Error()
	if !apierrors.IsConflict(err) {
		t.Errorf("binding a bound pod again: %v, want 409", err)
	}

	for _, name := range []string{"a", "b"} {
		if _, err := cs.CoreV1().Services("default").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "x"}},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cs.CoreV1().RESTClient().Delete().Namespace("default").Resource("services").Param("labelSelector", "app=x").Do(ctx).Error(); err != nil {
		t.Fatalf("deletecollection services: %v", err)
	}
	left, err := cs.CoreV1().Services("default").List(ctx, metav1.ListOptions{LabelSelector: "app=x"})
	if err != nil || len(left.Items) != 0 {
		t.Errorf("services left after deletecollection: %v %v", left, err)
	}
}
