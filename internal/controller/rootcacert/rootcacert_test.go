package rootcacert

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

const pem = "-----BEGIN CERTIFICATE-----\nabc\n-----END CERTIFICATE-----\n"

func TestNewDisabledWithoutCA(t *testing.T) {
	cs := fake.NewClientset()
	ctrl, err := New(context.Background(), controllercontext.Context{Client: cs, Informers: informers.NewSharedInformerFactory(cs, 0)})
	if err != nil || ctrl != nil {
		t.Fatalf("New without CA = %v, %v; want nil, nil", ctrl, err)
	}
}

func TestSync(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}
	good := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName, Namespace: "a", Annotations: map[string]string{DescriptionAnnotation: description}},
		Data:       map[string]string{DataKey: pem},
	}
	tampered := good.DeepCopy()
	tampered.Data = map[string]string{DataKey: "nope", "extra": "x"}
	tests := []struct {
		name    string
		objects []runtime.Object
		want    []string
	}{
		{name: "missing is created", objects: []runtime.Object{ns}, want: []string{"create"}},
		{name: "correct is left alone", objects: []runtime.Object{ns, good}},
		{name: "changed is restored", objects: []runtime.Object{ns, tampered}, want: []string{"update"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			cs := fake.NewClientset(tc.objects...)
			f := informers.NewSharedInformerFactory(cs, 0)
			ctrl, err := New(ctx, controllercontext.Context{Client: cs, Informers: f, Clock: clocktesting.NewFakeClock(time.Now()),
				Options: controllercontext.Options{RootCAPEM: []byte(pem)}})
			if err != nil {
				t.Fatal(err)
			}
			f.Start(ctx.Done())
			f.WaitForCacheSync(ctx.Done())
			cs.ClearActions()
			if err := ctrl.(*Controller).sync(ctx, "a"); err != nil {
				t.Fatalf("sync: %v", err)
			}
			var got []string
			for _, a := range cs.Actions() {
				if a.GetVerb() != "list" && a.GetVerb() != "watch" {
					got = append(got, a.GetVerb())
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
			cm, err := cs.CoreV1().ConfigMaps("a").Get(ctx, ConfigMapName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(map[string]string{DataKey: pem}, cm.Data); diff != "" {
				t.Errorf("data (-want +got):\n%s", diff)
			}
		})
	}
}
