package servicecidr

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	networkingv1 "k8s.io/api/networking/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/worker"
)

func cidr(name string, deletedAgo time.Duration, now time.Time, cidrs ...string) *networkingv1.ServiceCIDR {
	sc := &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: cidrs}}
	if deletedAgo > 0 {
		sc.DeletionTimestamp = &metav1.Time{Time: now.Add(-deletedAgo)}
		sc.Finalizers = []string{Finalizer}
	}
	return sc
}

func address(ip string) *networkingv1.IPAddress {
	return &networkingv1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Name: ip, Labels: map[string]string{managedByLabel: managedByValue}},
		Spec:       networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Resource: "services", Namespace: "ns", Name: "web"}},
	}
}

func TestSync(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ready := func(status metav1.ConditionStatus, reason, msg string) *metav1.Condition {
		return &metav1.Condition{Type: networkingv1.ServiceCIDRConditionReady, Status: status, Reason: reason, Message: msg}
	}
	tests := []struct {
		name      string
		objects   []runtime.Object
		wantFin   []string
		wantReady *metav1.Condition
		wantAfter time.Duration
	}{
		{name: "a new ServiceCIDR gets the finalizer and is Ready",
			objects: []runtime.Object{cidr("extra", 0, now, "10.44.0.0/24")},
			wantFin: []string{Finalizer}, wantReady: ready(metav1.ConditionTrue, "", readyMessage)},
		{name: "deleting with an address in use: held, Ready False Terminating",
			objects: []runtime.Object{cidr("extra", time.Minute, now, "10.44.0.0/24"), address("10.44.0.7")},
			wantFin: []string{Finalizer}, wantReady: ready(metav1.ConditionFalse, networkingv1.ServiceCIDRReasonTerminating, terminatingMessage)},
		{name: "deleting with an address another ServiceCIDR holds too: released",
			objects: []runtime.Object{cidr("extra", time.Minute, now, "10.44.0.0/24"), cidr("wide", 0, now, "10.44.0.0/16"), address("10.44.0.7")},
			wantFin: nil},
		{name: "deleting with an address in an overlapping ServiceCIDR that does not cover it: held",
			objects: []runtime.Object{cidr("extra", time.Minute, now, "10.44.0.0/24"), cidr("half", 0, now, "10.44.0.128/25"), address("10.44.0.7")},
			wantFin: []string{Finalizer}, wantReady: ready(metav1.ConditionFalse, networkingv1.ServiceCIDRReasonTerminating, terminatingMessage)},
		{name: "deleting with addresses elsewhere only: released",
			objects: []runtime.Object{cidr("extra", time.Minute, now, "10.44.0.0/24"), address("10.43.0.7"), address("10.44.0.0")},
			wantFin: nil},
		{name: "deleting, no address left, within the grace period: looked at again",
			objects: []runtime.Object{cidr("extra", 4*time.Second, now, "10.44.0.0/24")},
			wantFin: []string{Finalizer}, wantAfter: 6 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(tc.objects...)
			inf := informers.NewSharedInformerFactory(client, 0)
			ctrl, err := New(context.Background(), controllercontext.Context{Client: client, Informers: inf, Clock: clocktesting.NewFakeClock(now)})
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range tc.objects {
				switch o := o.(type) {
				case *networkingv1.ServiceCIDR:
					_ = inf.Networking().V1().ServiceCIDRs().Informer().GetIndexer().Add(o)
				case *networkingv1.IPAddress:
					_ = inf.Networking().V1().IPAddresses().Informer().GetIndexer().Add(o)
				}
			}
			err = ctrl.(*Controller).Sync(context.Background(), "extra")
			after, requeued := worker.RequeueDelay(err)
			if err != nil && !requeued {
				t.Fatal(err)
			}
			if after != tc.wantAfter {
				t.Errorf("requeued after %v, want %v", after, tc.wantAfter)
			}
			got, err := client.NetworkingV1().ServiceCIDRs().Get(context.Background(), "extra", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantFin, got.Finalizers, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("finalizers (-want +got):\n%s", diff)
			}
			cond := apimeta.FindStatusCondition(got.Status.Conditions, networkingv1.ServiceCIDRConditionReady)
			if diff := cmp.Diff(tc.wantReady, cond, cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")); diff != "" {
				t.Errorf("Ready condition (-want +got):\n%s", diff)
			}
		})
	}
}
