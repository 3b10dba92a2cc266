package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/internal/testing/images"
)

// TestKubeletPullsWithImagePullSecrets: an image that exists only in a
// registry on loopback behind basic authentication is pulled for a pod
// through its imagePullSecrets (a kubernetes.io/dockerconfigjson Secret)
// and runs; the same pod without the secret fails with ErrImagePull.
func TestKubeletPullsWithImagePullSecrets(t *testing.T) {
	c := cluster(t)
	t.Parallel()
	ns := c.namespace(t, "kubelet-pull")
	const user, password = "puller", "s3cret"
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	reg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != user || p != password {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(reg.Close)
	host := strings.TrimPrefix(reg.URL, "http://")

	tar, _ := images.Busybox(t)
	img, err := tarball.ImageFromPath(tar, nil)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(host+"/private/busybox:pulled", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithAuth(&authn.Basic{Username: user, Password: password})); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}

	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	cfg, _ := json.Marshal(map[string]any{"auths": map[string]any{host: map[string]string{"username": user, "password": password, "auth": auth}}})
	if _, err := c.client.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "regcred"}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: cfg}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	image := ref.String()

	p := busyboxPod(ns, "with-secret", image, "sleep", "3600")
	p.Spec.Containers[0].ImagePullPolicy = corev1.PullAlways
	p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}}
	c.create(t, p)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("events of with-secret:\n%s", c.events(ns, "with-secret"))
		}
	})
	c.waitPod(t, ns, "with-secret", 60*time.Second, "Running", podRunningReady)
	waitFor(t, 10*time.Second, "a Pulled event", func() bool {
		return c.hasEvent(ns, "with-secret", "Pulled", fmt.Sprintf("Successfully pulled image %q", image))
	})

	p = busyboxPod(ns, "without-secret", image, "sleep", "3600")
	p.Spec.Containers[0].ImagePullPolicy = corev1.PullAlways
	c.create(t, p)
	c.waitPod(t, ns, "without-secret", 60*time.Second, "ErrImagePull", func(p *corev1.Pod) bool {
		return waiting(p, "ErrImagePull") || waiting(p, "ImagePullBackOff")
	})
}
