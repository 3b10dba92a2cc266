package serviceaccount

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestValidate(t *testing.T) {
	sa := &corev1.ServiceAccount{ImagePullSecrets: []corev1.LocalObjectReference{{Name: "ok"}, {}}}
	errs := Strategy{}.Validate(context.Background(), sa)
	if len(errs) != 1 || errs[0].Field != "imagePullSecrets[1].name" {
		t.Errorf("errors: %v", errs)
	}
}

func TestTableRow(t *testing.T) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", CreationTimestamp: metav1.NewTime(time.Now().Add(-5 * time.Second))},
		Secrets: []corev1.ObjectReference{{Name: "t"}}}
	got, err := Strategy{}.TableRow(sa)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]interface{}{"default", int64(1), "5s"}, got); diff != "" {
		t.Error(diff)
	}
}
