package volume

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// fakeRequester issues numbered tokens and records the requests.
type fakeRequester struct {
	clock *clocktesting.FakeClock
	asked []authenticationv1.TokenRequest
	fail  bool
}

func (f *fakeRequester) RequestToken(_ context.Context, ns, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	if f.fail {
		return nil, errors.New("API server unreachable")
	}
	f.asked = append(f.asked, *tr.DeepCopy())
	out := tr.DeepCopy()
	out.Status.Token = fmt.Sprintf("%s/%s/token-%d", ns, name, len(f.asked))
	out.Status.ExpirationTimestamp = metav1.NewTime(f.clock.Now().Add(time.Duration(*tr.Spec.ExpirationSeconds) * time.Second))
	return out, nil
}

func TestProjectedServiceAccountToken(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	req := &fakeRequester{clock: clk}
	m := NewManager(t.TempDir(), &fakeGetter{cms: map[string]*corev1.ConfigMap{
		"kube-root-ca.crt": {Data: map[string]string{"ca.crt": "CA"}},
	}})
	m.Tokens = NewTokens(req, clk)
	m.Tokens.jitter = func() time.Duration { return 0 }
	t.Cleanup(func() { _ = m.Teardown("pod-1") }) // projected volumes are tmpfs mounts
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "pod-1"},
		Spec: corev1.PodSpec{ServiceAccountName: "robot", Volumes: []corev1.Volume{
			{Name: "kube-api-access-abcde", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				DefaultMode: ptr.To[int32](0o644),
				Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
					{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
				},
			}}},
			{Name: "vault", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "vault/token", Audience: "vault", ExpirationSeconds: ptr.To[int64](48 * 3600)}},
			}}}},
		}},
	}
	setup := func() map[string]string {
		t.Helper()
		paths, err := m.Setup(context.Background(), pod)
		if err != nil {
			t.Fatal(err)
		}
		got := read(t, paths["kube-api-access-abcde"])
		for k, v := range read(t, paths["vault"]+"/vault") {
			got["vault/"+k] = v
		}
		return got
	}

	want := map[string]string{"token": "ns/robot/token-1", "ca.crt": "CA", "namespace": "ns", "vault/token": "ns/robot/token-2"}
	if d := cmp.Diff(want, setup()); d != "" {
		t.Fatalf("first setup (-want +got):\n%s", d)
	}
	bound := &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: "web", UID: "pod-1"}
	wantAsked := []authenticationv1.TokenRequest{
		{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3607), BoundObjectRef: bound}},
		{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"vault"}, ExpirationSeconds: ptr.To[int64](48 * 3600), BoundObjectRef: bound}},
	}
	if d := cmp.Diff(wantAsked, req.asked); d != "" {
		t.Fatalf("token requests (-want +got):\n%s", d)
	}

	// Before 80% of the hour: the same tokens, nothing asked.
	clk.Step(47 * time.Minute)
	if d := cmp.Diff(want, setup()); d != "" || len(req.asked) != 2 {
		t.Fatalf("at 47 min: %d requests, (-want +got):\n%s", len(req.asked), d)
	}
	// Past 80%: a new token reaches the file.
	clk.Step(2 * time.Minute)
	want["token"] = "ns/robot/token-3"
	if d := cmp.Diff(want, setup()); d != "" {
		t.Fatalf("at 49 min (-want +got):\n%s", d)
	}
	// The API server is away: the still valid token stays.
	req.fail = true
	clk.Step(55 * time.Minute)
	if d := cmp.Diff(want, setup()); d != "" {
		t.Fatalf("API down, token valid (-want +got):\n%s", d)
	}
	req.fail = false
	// The 48 h token is replaced after 24 h.
	clk.Step(23 * time.Hour)
	got := setup()
	if got["vault/token"] == "ns/robot/token-2" {
		t.Errorf("after 24 h the vault token is still the first one")
	}
	// Expired and the API server away: the volume fails.
	req.fail = true
	clk.Step(2 * time.Hour)
	if _, err := m.Setup(context.Background(), pod); err == nil {
		t.Errorf("setup with an expired token and no API server: no error")
	}
	m.Tokens.Forget("pod-1")
	if len(m.Tokens.cache) != 0 {
		t.Errorf("tokens kept after Forget: %v", m.Tokens.cache)
	}
}
