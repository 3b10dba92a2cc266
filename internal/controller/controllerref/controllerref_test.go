package controllerref

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/utils/ptr"
)

var rsKind = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}

func pod(name string, app string, controller types.UID) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name), Labels: map[string]string{"app": app}}}
	if controller != "" {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "x", UID: controller, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	}
	return p
}

// patcher applies patches for real (strategic merge on the pod), so the
// test sees the owner references a user would see, and fails the pods
// named in fail with the given error.
type patcher struct {
	fail    map[string]error
	patched []string
}

func (p *patcher) patch(_ context.Context, obj *corev1.Pod, data []byte) (*corev1.Pod, error) {
	p.patched = append(p.patched, obj.Name)
	if err := p.fail[obj.Name]; err != nil {
		return nil, err
	}
	out := &corev1.Pod{}
	orig, err := strategicpatch.StrategicMergePatch(mustJSON(obj), data, corev1.Pod{})
	if err != nil {
		return nil, err
	}
	if err := jsonUnmarshal(orig, out); err != nil {
		return nil, err
	}
	return out, nil
}

func TestClaim(t *testing.T) {
	const owner = types.UID("rs-uid")
	notFound := apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "gone")
	cases := []struct {
		name          string
		ownerDeleting bool
		canAdopt      error
		pods          []*corev1.Pod
		fail          map[string]error
		wantClaimed   []string
		wantPatched   []string
		wantErr       string
		wantAsked     int
	}{{
		name:        "controlled and matching pods are kept, no patch",
		pods:        []*corev1.Pod{pod("a", "web", owner), pod("b", "web", owner)},
		wantClaimed: []string{"a", "b"},
	}, {
		name:        "a controlled pod that no longer matches is released",
		pods:        []*corev1.Pod{pod("a", "web", owner), pod("b", "db", owner)},
		wantClaimed: []string{"a"},
		wantPatched: []string{"b"},
	}, {
		name:          "an owner being deleted neither releases nor adopts",
		ownerDeleting: true,
		pods:          []*corev1.Pod{pod("a", "web", owner), pod("b", "db", owner), pod("c", "web", "")},
		wantClaimed:   []string{"a"},
	}, {
		name: "another controller's pod is left alone",
		pods: []*corev1.Pod{pod("a", "web", "other")},
	}, {
		name:        "matching orphans are adopted after one live check",
		pods:        []*corev1.Pod{pod("a", "web", ""), pod("b", "web", ""), pod("c", "db", "")},
		wantClaimed: []string{"a", "b"},
		wantPatched: []string{"a", "b"},
		wantAsked:   1,
	}, {
		name:      "no orphan is adopted when the live check fails",
		canAdopt:  errors.New("replica set ns/x is being deleted"),
		pods:      []*corev1.Pod{pod("a", "web", ""), pod("b", "web", "")},
		wantAsked: 1,
	}, {
		name:        "an orphan that vanished is skipped, another error is reported",
		pods:        []*corev1.Pod{pod("a", "web", ""), pod("b", "web", ""), pod("c", "web", "")},
		fail:        map[string]error{"a": notFound, "b": errors.New("boom")},
		wantClaimed: []string{"c"},
		wantPatched: []string{"a", "b", "c"},
		wantErr:     "adopt pod b: boom",
		wantAsked:   1,
	}, {
		name:        "a released pod that vanished is fine",
		pods:        []*corev1.Pod{pod("a", "db", owner)},
		fail:        map[string]error{"a": notFound},
		wantPatched: []string{"a"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rs := &metav1.ObjectMeta{Name: "x", Namespace: "ns", UID: owner}
			if tc.ownerDeleting {
				rs.DeletionTimestamp = &metav1.Time{}
			}
			p := &patcher{fail: tc.fail}
			asked := 0
			got, err := Claimer[*corev1.Pod]{
				Owner:    rs,
				GVK:      rsKind,
				Match:    func(pod *corev1.Pod) bool { return pod.Labels["app"] == "web" },
				CanAdopt: func(context.Context) error { asked++; return tc.canAdopt },
				Patch:    p.patch,
				Kind:     "pod",
			}.Claim(context.Background(), tc.pods)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			var names []string
			for _, pod := range got {
				names = append(names, pod.Name)
				ref := metav1.GetControllerOf(pod)
				if ref == nil || ref.UID != owner || ref.Kind != "ReplicaSet" || ref.Name != "x" || !ptr.Deref(ref.BlockOwnerDeletion, false) {
					t.Errorf("claimed pod %s has controller %+v, want the ReplicaSet x", pod.Name, ref)
				}
			}
			if diff := cmp.Diff(tc.wantClaimed, names); diff != "" {
				t.Errorf("claimed (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantPatched, p.patched); diff != "" {
				t.Errorf("patched (-want +got):\n%s", diff)
			}
			if asked != tc.wantAsked {
				t.Errorf("live checks = %d, want %d", asked, tc.wantAsked)
			}
		})
	}
}

func TestReleasePatchRemovesOnlyTheOwner(t *testing.T) {
	p := pod("a", "web", "rs-uid")
	p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "keep", UID: "cm-uid"})
	out, err := strategicpatch.StrategicMergePatch(mustJSON(p), ReleasePatch("rs-uid", p.UID), corev1.Pod{})
	if err != nil {
		t.Fatal(err)
	}
	got := &corev1.Pod{}
	if err := jsonUnmarshal(out, got); err != nil {
		t.Fatal(err)
	}
	if len(got.OwnerReferences) != 1 || got.OwnerReferences[0].UID != "cm-uid" {
		t.Errorf("owner references after release = %+v, want only the ConfigMap", got.OwnerReferences)
	}
}

func mustJSON(p *corev1.Pod) []byte {
	b, err := json.Marshal(p)
	if err != nil {
		panic(err)
	}
	return b
}

func jsonUnmarshal(b []byte, p *corev1.Pod) error { return json.Unmarshal(b, p) }
