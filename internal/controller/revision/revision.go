// Package revision holds the ControllerRevision history that the DaemonSet
// and StatefulSet controllers keep, the way upstream's controllers keep it:
// one ControllerRevision per pod template, owned by the workload through a
// controller ownerReference, carrying the template as a strategic merge
// patch (spec.template with "$patch":"replace") so that `kubectl rollout
// undo` can apply it back, and a strictly increasing revision number.
//
// What it offers: the hashes and names upstream gives revisions, the patch
// a workload's revision stores, ordering, and History, which claims
// (adopts and releases) a workload's revisions and creates them, resolving
// name collisions with the workload's collisionCount.
package revision

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/dump"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"

	"github.com/skiff-sh/skiff/internal/controller/controllerref"
)

// HashLabel is the label upstream's history puts on the revisions it
// names (StatefulSet revisions).
const HashLabel = "controller.kubernetes.io/hash"

// Hash is upstream's ControllerRevision hash: FNV-32 over the revision's
// raw data and the decimal collision count, encoded with SafeEncodeString.
func Hash(raw []byte, collisionCount *int32) string {
	h := fnv.New32()
	h.Write(raw)
	if collisionCount != nil {
		h.Write([]byte(strconv.FormatInt(int64(*collisionCount), 10)))
	}
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}

// TemplateHash is upstream's pod template hash (the one DaemonSet revisions
// and pods carry in controller-revision-hash): FNV-32a over the template's
// deep-hash dump and the collision count's 8 little-endian bytes.
func TemplateHash(template *corev1.PodTemplateSpec, collisionCount *int32) string {
	h := fnv.New32a()
	fmt.Fprintf(h, "%v", dump.ForHash(*template))
	if collisionCount != nil {
		b := make([]byte, 8)
		binary.LittleEndian.PutUint32(b, uint32(*collisionCount))
		h.Write(b)
	}
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}

// Name is a revision's name: the owner's name (cut at 223 characters) and
// the hash.
func Name(prefix, hash string) string {
	if len(prefix) > 223 {
		prefix = prefix[:223]
	}
	return prefix + "-" + hash
}

// TemplatePatch is what a workload's revision stores: the JSON of
// {"spec":{"template":<the template, "$patch":"replace">}}, built from the
// workload's JSON so that the keys come out in upstream's order.
func TemplatePatch(workload any) ([]byte, error) {
	data, err := json.Marshal(workload)
	if err != nil {
		return nil, err
	}
	var raw map[string]any
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, err
	}
	spec, _ := raw["spec"].(map[string]any)
	template, _ := spec["template"].(map[string]any)
	if template == nil {
		return nil, errors.New("workload has no spec.template")
	}
	template["$patch"] = "replace"
	return json.Marshal(map[string]any{"spec": map[string]any{"template": template}})
}

// Equal says whether two revisions hold the same data.
func Equal(a, b *appsv1.ControllerRevision) bool {
	if a == nil || b == nil {
		return a == b
	}
	return bytes.Equal(a.Data.Raw, b.Data.Raw)
}

// FindEqual returns the revisions holding the same data as needle.
func FindEqual(revisions []*appsv1.ControllerRevision, needle *appsv1.ControllerRevision) []*appsv1.ControllerRevision {
	var out []*appsv1.ControllerRevision
	for _, r := range revisions {
		if Equal(r, needle) {
			out = append(out, r)
		}
	}
	return out
}

// Sort orders revisions by revision number, then creation time, then name.
func Sort(revisions []*appsv1.ControllerRevision) {
	sort.SliceStable(revisions, func(i, j int) bool {
		a, b := revisions[i], revisions[j]
		if a.Revision != b.Revision {
			return a.Revision < b.Revision
		}
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
}

// Max is the highest revision number among revisions (0 for none).
func Max(revisions []*appsv1.ControllerRevision) int64 {
	var m int64
	for _, r := range revisions {
		m = max(m, r.Revision)
	}
	return m
}

// History reads a namespace's revisions from a lister and writes through a
// client.
type History struct {
	Client kubernetes.Interface
	Lister appslisters.ControllerRevisionLister
}

// Owner is the workload whose history is kept.
type Owner struct {
	metav1.Object
	GVK      schema.GroupVersionKind
	Selector labels.Selector
	// CanAdopt is asked (once, lazily) before an orphan is adopted: it
	// must re-read the owner live and fail if it is gone or being deleted.
	CanAdopt func(ctx context.Context) error
}

// Claim returns the owner's revisions: those it controls that match its
// selector, plus matching orphans it adopts; it releases controlled ones
// that no longer match.
func (h History) Claim(ctx context.Context, o Owner) ([]*appsv1.ControllerRevision, error) {
	all, err := h.Lister.ControllerRevisions(o.GetNamespace()).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	return controllerref.Claimer[*appsv1.ControllerRevision]{
		Owner:    o,
		GVK:      o.GVK,
		Match:    func(r *appsv1.ControllerRevision) bool { return o.Selector.Matches(labels.Set(r.Labels)) },
		CanAdopt: o.CanAdopt,
		Patch: func(ctx context.Context, r *appsv1.ControllerRevision, patch []byte) (*appsv1.ControllerRevision, error) {
			return h.Client.AppsV1().ControllerRevisions(r.Namespace).Patch(ctx, r.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		},
		Kind: "controllerrevision",
	}.Claim(ctx, all)
}

// New is an unsaved revision of owner holding data, named and labelled as
// upstream's history names revisions: <owner>-<Hash(data, collisionCount)>,
// the template's labels plus HashLabel, the owner's annotations.
func New(o Owner, templateLabels, annotations map[string]string, data []byte, number int64, collisionCount *int32) *appsv1.ControllerRevision {
	hash := Hash(data, collisionCount)
	lbls := make(map[string]string, len(templateLabels)+1)
	for k, v := range templateLabels {
		lbls[k] = v
	}
	lbls[HashLabel] = hash
	var ann map[string]string
	if len(annotations) > 0 {
		ann = make(map[string]string, len(annotations))
		for k, v := range annotations {
			ann[k] = v
		}
	}
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name:            Name(o.GetName(), hash),
			Namespace:       o.GetNamespace(),
			Labels:          lbls,
			Annotations:     ann,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(o, o.GVK)},
		},
		Data:     runtime.RawExtension{Raw: data},
		Revision: number,
	}
}

// Create saves r. When its name is taken by a revision with other data
// (a hash collision) it bumps *collisionCount and tries the next name, as
// upstream does; when it is taken by an equal revision, that one is
// returned.
func (h History) Create(ctx context.Context, o Owner, r *appsv1.ControllerRevision, collisionCount *int32) (*appsv1.ControllerRevision, error) {
	if collisionCount == nil {
		return nil, errors.New("collisionCount must not be nil")
	}
	for {
		r = r.DeepCopy()
		hash := Hash(r.Data.Raw, collisionCount)
		r.Name = Name(o.GetName(), hash)
		r.Labels[HashLabel] = hash
		created, err := h.Client.AppsV1().ControllerRevisions(r.Namespace).Create(ctx, r, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			if err != nil {
				return nil, fmt.Errorf("create controllerrevision %s: %w", r.Name, err)
			}
			return created, nil
		}
		existing, getErr := h.Client.AppsV1().ControllerRevisions(r.Namespace).Get(ctx, r.Name, metav1.GetOptions{})
		if getErr != nil {
			return nil, fmt.Errorf("get controllerrevision %s: %w", r.Name, getErr)
		}
		if bytes.Equal(existing.Data.Raw, r.Data.Raw) {
			return existing, nil
		}
		*collisionCount++
	}
}

// Renumber gives r the revision number n (a template rolled back to).
func (h History) Renumber(ctx context.Context, r *appsv1.ControllerRevision, n int64) (*appsv1.ControllerRevision, error) {
	if r.Revision == n {
		return r, nil
	}
	c := r.DeepCopy()
	c.Revision = n
	out, err := h.Client.AppsV1().ControllerRevisions(c.Namespace).Update(ctx, c, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("renumber controllerrevision %s: %w", c.Name, err)
	}
	return out, nil
}

// Delete removes r (already gone is fine).
func (h History) Delete(ctx context.Context, r *appsv1.ControllerRevision) error {
	err := h.Client.AppsV1().ControllerRevisions(r.Namespace).Delete(ctx, r.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &r.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete controllerrevision %s: %w", r.Name, err)
	}
	return nil
}
