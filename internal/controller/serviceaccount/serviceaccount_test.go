package serviceaccount

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
)

func TestSync(t *testing.T) {
	now := metav1.Now()
	active := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}
	terminating := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "t", DeletionTimestamp: &now}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}}
	existing := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "a"}}
	tests := []struct {
		name    string
		objects []runtime.Object
		ns      string
		want    []string // verb/resource/namespace of the writes
	}{
		{name: "missing account is created", objects: []runtime.Object{active}, ns: "a", want: []string{"create/serviceaccounts/a"}},
		{name: "existing account is left alone", objects: []runtime.Object{active, existing}, ns: "a"},
		{name: "terminating namespace is skipped", objects: []runtime.Object{terminating}, ns: "t"},
		{name: "gone namespace is skipped", ns: "gone"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			cs := fake.NewClientset(tc.objects...)
			f := informers.NewSharedInformerFactory(cs, 0)
			ctrl, err := New(ctx, controllercontext.Context{Client: cs, Informers: f, Clock: clocktesting.NewFakeClock(time.Now())})
			if err != nil {
				t.Fatal(err)
			}
			f.Start(ctx.Done())
			f.WaitForCacheSync(ctx.Done())
			cs.ClearActions()
			if err := ctrl.(*Controller).sync(ctx, tc.ns); err != nil {
				t.Fatalf("sync: %v", err)
			}
			var got []string
			for _, a := range cs.Actions() {
				if a.GetVerb() != "list" && a.GetVerb() != "watch" {
					got = append(got, a.GetVerb()+"/"+a.GetResource().Resource+"/"+a.GetNamespace())
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
			if tc.ns == "a" {
				if _, err := cs.CoreV1().ServiceAccounts("a").Get(ctx, "default", metav1.GetOptions{}); err != nil {
					t.Errorf("default account: %v", err)
				}
			}
		})
	}
}
