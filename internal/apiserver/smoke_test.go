package apiserver_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/skiff-sh/skiff/internal/apiserver"
	"github.com/skiff-sh/skiff/internal/etcd"
	"github.com/skiff-sh/skiff/internal/pki"
)

func TestSmoke(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := etcd.New(etcd.Options{Dir: dir + "/etcd", UnsafeNoFsync: true})
	go e.Start(ctx)
	<-e.Ready()
	b, err := pki.Ensure(dir+"/pki", pki.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := apiserver.New(apiserver.Config{Etcd: e.Client(), ClientCA: b.CAPool, ServingCert: b.Serving})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start(ctx)
	select {
	case <-s.Ready():
	case <-time.After(20 * time.Second):
		t.Fatal("not ready")
	}
	cfg := b.AdminRESTConfig("https://" + s.Addr())
	cs := kubernetes.NewForConfigOrDie(cfg)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("created %s rv=%s", cm.Name, cm.ResourceVersion)
	l, err := cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 1 {
		t.Fatalf("items %d", len(l.Items))
	}
	p, err := cs.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pod %+v", p.Spec)
}
