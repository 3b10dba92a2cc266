// Package volumebinding is upstream's VolumeBinding plugin: a pod goes
// only where its PersistentVolumeClaims can be.
//
//   - PreFilter: Skip for a pod without claims (persistentVolumeClaim or
//     generic ephemeral volumes). A missing claim, one being deleted, one
//     Lost, an ephemeral claim not owned by the pod, or a claim of an
//     Immediate class not yet bound makes the pod UnschedulableAndUnresolvable
//     with upstream's message ("pod has unbound immediate
//     PersistentVolumeClaims"); the PV binder binds those.
//   - Filter: a bound claim's volume must exist and its node affinity match
//     the node; an unbound WaitForFirstConsumer claim needs an Available
//     volume of its class matching the node (the smallest, as the binder
//     picks) or a class that provisions (not kubernetes.io/no-provisioner,
//     allowedTopologies matching the node); a claim whose
//     volume.kubernetes.io/selected-node names another node does not fit.
//   - Reserve assumes the chosen static volumes so that another pod does
//     not take them in the meantime; Unreserve forgets them.
//   - PreBind writes the bindings: a static volume's claimRef, or the
//     claim's volume.kubernetes.io/selected-node (the provisioner's cue),
//     then waits (polling the informers every second, bindTimeoutSeconds,
//     default 600) until every claim is bound. A provisioner that gives up
//     removes the annotation, and the pod is scheduled again.
//
// Not done from upstream: storage capacity (CSIStorageCapacity) checks and
// the capacity Score, CSI migration, and the assume cache of claims (a
// second pod sharing an unbound claim sees its selected-node once the
// informer has it).
package volumebinding

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	ephemeralhelpers "k8s.io/component-helpers/storage/ephemeral"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

// Name is the plugin's name.
const Name = "VolumeBinding"

// Upstream's reasons.
const (
	ErrReasonBindConflict  = "node(s) didn't find available persistent volumes to bind"
	ErrReasonNodeConflict  = "node(s) didn't match PersistentVolume's node affinity"
	ErrReasonPVNotExist    = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
	ErrUnboundImmediate    = "pod has unbound immediate PersistentVolumeClaims"
	DefaultBindTimeoutSecs = 600
)

const stateKey framework.StateKey = Name

// Args are upstream's VolumeBindingArgs (bindTimeoutSeconds; shape is
// accepted and ignored, as capacity scoring is not done).
type Args struct {
	BindTimeoutSeconds *int64 `json:"bindTimeoutSeconds,omitempty"`
	Shape              []any  `json:"shape,omitempty"`
}

// VolumeBinding is the plugin.
type VolumeBinding struct {
	client      kubernetes.Interface
	pvcs        corelisters.PersistentVolumeClaimLister
	pvs         corelisters.PersistentVolumeLister
	classes     storagelisters.StorageClassLister
	bindTimeout time.Duration
	interval    time.Duration

	mu sync.Mutex
	// assumed are static volumes chosen in Reserve whose binding the
	// informer has not shown yet: volume name -> claim key.
	assumed map[string]string
}

var (
	_ framework.PreFilterPlugin = (*VolumeBinding)(nil)
	_ framework.FilterPlugin    = (*VolumeBinding)(nil)
	_ framework.ReservePlugin   = (*VolumeBinding)(nil)
	_ framework.PreBindPlugin   = (*VolumeBinding)(nil)
)

// New builds the plugin on the handle's informers.
func New(_ context.Context, args any, h framework.Handle) (framework.Plugin, error) {
	a := Args{}
	if err := framework.DecodeArgs(args, &a); err != nil {
		return nil, err
	}
	timeout := int64(DefaultBindTimeoutSecs)
	if a.BindTimeoutSeconds != nil {
		if *a.BindTimeoutSeconds < 0 {
			return nil, fmt.Errorf("bindTimeoutSeconds: invalid value %d: must not be negative", *a.BindTimeoutSeconds)
		}
		timeout = *a.BindTimeoutSeconds
	}
	pl := &VolumeBinding{
		client:      h.ClientSet(),
		bindTimeout: time.Duration(timeout) * time.Second,
		interval:    time.Second,
		assumed:     map[string]string{},
	}
	// Without informers (framework tests) a pod with claims cannot be
	// placed: PreFilter says so.
	if f := h.SharedInformerFactory(); f != nil {
		pl.pvcs = f.Core().V1().PersistentVolumeClaims().Lister()
		pl.pvs = f.Core().V1().PersistentVolumes().Lister()
		pl.classes = f.Storage().V1().StorageClasses().Lister()
	}
	return pl, nil
}

var errNoInformers = errors.New("VolumeBinding: no informers to read claims from")

// Name implements framework.Plugin.
func (*VolumeBinding) Name() string { return Name }

// binding is what PreBind writes for one claim on the chosen node: a
// static volume to bind it to, or (volume nil) provisioning.
type binding struct {
	claim  *v1.PersistentVolumeClaim
	volume *v1.PersistentVolume
}

type stateData struct {
	bound   []*v1.PersistentVolumeClaim
	delayed []*v1.PersistentVolumeClaim

	mu     sync.Mutex
	byNode map[string][]binding
	// chosen is what Reserve took for the chosen node.
	chosen []binding
}

// Clone shares the state: Filter results of one cycle are the same
// whichever copy computed them (upstream does the same).
func (s *stateData) Clone() framework.StateData { return s }

// PreFilter sorts the pod's claims into bound and delayed ones.
func (pl *VolumeBinding) PreFilter(_ context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	s := &stateData{byNode: map[string][]binding{}}
	has := false
	var immediate bool
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		var name string
		switch {
		case v.PersistentVolumeClaim != nil:
			name = v.PersistentVolumeClaim.ClaimName
		case v.Ephemeral != nil:
			name = ephemeralhelpers.VolumeClaimName(pod, v)
		default:
			continue
		}
		has = true
		if pl.pvcs == nil {
			return nil, framework.AsStatus(errNoInformers)
		}
		claim, err := pl.pvcs.PersistentVolumeClaims(pod.Namespace).Get(name)
		if err != nil {
			if v.Ephemeral != nil && apierrors.IsNotFound(err) {
				err = fmt.Errorf("waiting for ephemeral volume controller to create the persistentvolumeclaim %q", name)
			}
			return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, err.Error())
		}
		if claim.Status.Phase == v1.ClaimLost {
			return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable,
				fmt.Sprintf("persistentvolumeclaim %q bound to non-existent persistentvolume %q", claim.Name, claim.Spec.VolumeName))
		}
		if claim.DeletionTimestamp != nil {
			return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, fmt.Sprintf("persistentvolumeclaim %q is being deleted", claim.Name))
		}
		if v.Ephemeral != nil {
			if err := ephemeralhelpers.VolumeIsForPod(pod, claim); err != nil {
				return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, err.Error())
			}
		}
		if claim.Spec.VolumeName != "" {
			s.bound = append(s.bound, claim)
			continue
		}
		delay, err := storagehelpers.IsDelayBindingMode(claim, pl.classes)
		if err != nil {
			return nil, framework.AsStatus(err)
		}
		if delay {
			s.delayed = append(s.delayed, claim)
		} else {
			immediate = true
		}
	}
	if !has {
		return nil, framework.NewStatus(framework.Skip)
	}
	if immediate {
		return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrUnboundImmediate)
	}
	state.Write(stateKey, s)
	return nil, nil
}

// PreFilterExtensions implements framework.PreFilterPlugin.
func (*VolumeBinding) PreFilterExtensions() framework.PreFilterExtensions { return nil }

// Filter checks the pod's volumes against one node.
func (pl *VolumeBinding) Filter(_ context.Context, state *framework.CycleState, _ *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	s, err := framework.ReadAs[*stateData](state, stateKey)
	if err != nil {
		return framework.AsStatus(err)
	}
	node := ni.Node()
	bindings, reasons, err := pl.findPodVolumes(s, node)
	if err != nil {
		return framework.AsStatus(err)
	}
	if len(reasons) > 0 {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, reasons...)
	}
	s.mu.Lock()
	s.byNode[node.Name] = bindings
	s.mu.Unlock()
	return nil
}

// findPodVolumes is the decision for one node: the bindings to make there,
// or the reasons it does not fit.
func (pl *VolumeBinding) findPodVolumes(s *stateData, node *v1.Node) ([]binding, []string, error) {
	var reasons []string
	for _, claim := range s.bound {
		pv, err := pl.pvs.Get(claim.Spec.VolumeName)
		if apierrors.IsNotFound(err) {
			reasons = append(reasons, ErrReasonPVNotExist)
			break
		}
		if err != nil {
			return nil, nil, err
		}
		if storagehelpers.CheckNodeAffinity(pv, node.Labels) != nil {
			reasons = append(reasons, ErrReasonNodeConflict)
			break
		}
	}
	if len(s.delayed) == 0 {
		return nil, reasons, nil
	}
	var out []binding
	excluded := pl.assumedExcept(s.delayed)
	satisfied := true
	for _, claim := range s.delayed {
		if sel, ok := claim.Annotations[storagehelpers.AnnSelectedNode]; ok {
			if sel != node.Name {
				satisfied = false
				break
			}
			out = append(out, binding{claim: claim})
			continue
		}
		className := storagehelpers.GetPersistentVolumeClaimClass(claim)
		candidates, err := pl.volumesOfClass(className)
		if err != nil {
			return nil, nil, err
		}
		pv, err := storagehelpers.FindMatchingVolume(claim, candidates, node, excluded, false, true)
		if err != nil {
			return nil, nil, err
		}
		if pv != nil {
			excluded[pv.Name] = pv
			out = append(out, binding{claim: claim, volume: pv})
			continue
		}
		ok, err := pl.canProvision(claim, node)
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			satisfied = false
			break
		}
		out = append(out, binding{claim: claim})
	}
	if !satisfied {
		reasons = append(reasons, ErrReasonBindConflict)
	}
	return out, reasons, nil
}

func (pl *VolumeBinding) volumesOfClass(className string) ([]*v1.PersistentVolume, error) {
	all, err := pl.pvs.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	out := all[:0:0]
	for _, pv := range all {
		if storagehelpers.GetPersistentVolumeClass(pv) == className {
			out = append(out, pv)
		}
	}
	return out, nil
}

// canProvision reports whether the claim's class can make a volume
// reachable from node.
func (pl *VolumeBinding) canProvision(claim *v1.PersistentVolumeClaim, node *v1.Node) (bool, error) {
	className := storagehelpers.GetPersistentVolumeClaimClass(claim)
	if className == "" {
		return false, fmt.Errorf("no class for claim %q", claim.Namespace+"/"+claim.Name)
	}
	class, err := pl.classes.Get(className)
	if err != nil {
		return false, fmt.Errorf("failed to find storage class %q", className)
	}
	if class.Provisioner == "" || class.Provisioner == storagehelpers.NotSupportedProvisioner {
		return false, nil
	}
	return matchTopology(class, node), nil
}

func matchTopology(class *storagev1.StorageClass, node *v1.Node) bool {
	if len(class.AllowedTopologies) == 0 {
		return true
	}
	// Terms are ORed, a term's requirements ANDed; a requirement holds
	// when the node's label has one of its values.
	for _, term := range class.AllowedTopologies {
		ok := true
		for _, req := range term.MatchLabelExpressions {
			v, has := node.Labels[req.Key]
			if !has || !slices.Contains(req.Values, v) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// assumedExcept is the assumed volumes not reserved for one of claims.
func (pl *VolumeBinding) assumedExcept(claims []*v1.PersistentVolumeClaim) map[string]*v1.PersistentVolume {
	mine := map[string]bool{}
	for _, c := range claims {
		mine[c.Namespace+"/"+c.Name] = true
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	out := map[string]*v1.PersistentVolume{}
	for pv, claim := range pl.assumed {
		if !mine[claim] {
			out[pv] = nil
		}
	}
	return out
}

// Reserve takes the static volumes chosen for nodeName.
func (pl *VolumeBinding) Reserve(_ context.Context, state *framework.CycleState, _ *v1.Pod, nodeName string) *framework.Status {
	s, err := framework.ReadAs[*stateData](state, stateKey)
	if err != nil {
		return nil // a pod without claims
	}
	s.mu.Lock()
	s.chosen = s.byNode[nodeName]
	s.mu.Unlock()
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for _, b := range s.chosen {
		if b.volume != nil {
			if other, ok := pl.assumed[b.volume.Name]; ok && other != key(b.claim) {
				return framework.AsStatus(fmt.Errorf("persistentvolume %q is assumed for claim %q", b.volume.Name, other))
			}
			pl.assumed[b.volume.Name] = key(b.claim)
		}
	}
	return nil
}

// Unreserve forgets what Reserve took.
func (pl *VolumeBinding) Unreserve(_ context.Context, state *framework.CycleState, _ *v1.Pod, _ string) {
	s, err := framework.ReadAs[*stateData](state, stateKey)
	if err != nil {
		return
	}
	pl.forget(s.chosen)
}

func (pl *VolumeBinding) forget(bs []binding) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for _, b := range bs {
		if b.volume != nil && pl.assumed[b.volume.Name] == key(b.claim) {
			delete(pl.assumed, b.volume.Name)
		}
	}
}

func key(c *v1.PersistentVolumeClaim) string { return c.Namespace + "/" + c.Name }

// PreBind writes the bindings and waits until every claim is bound.
func (pl *VolumeBinding) PreBind(ctx context.Context, state *framework.CycleState, pod *v1.Pod, nodeName string) *framework.Status {
	s, err := framework.ReadAs[*stateData](state, stateKey)
	if err != nil || len(s.chosen) == 0 {
		return nil // nothing to bind
	}
	defer pl.forget(s.chosen)
	if err := pl.bindPodVolumes(ctx, s.chosen, nodeName); err != nil {
		return framework.AsStatus(fmt.Errorf("binding volumes: %w", err))
	}
	return nil
}

func (pl *VolumeBinding) bindPodVolumes(ctx context.Context, bs []binding, nodeName string) error {
	// written: the claims given a selected node, with the resourceVersion
	// they had before, which the informer may still show for a while.
	written := map[string]string{}
	for _, b := range bs {
		if b.volume != nil {
			clone, dirty, err := storagehelpers.GetBindVolumeToClaim(b.volume, b.claim)
			if err != nil {
				return err
			}
			if dirty {
				if _, err := pl.client.CoreV1().PersistentVolumes().Update(ctx, clone, metav1.UpdateOptions{}); err != nil {
					return err
				}
			}
			continue
		}
		if b.claim.Annotations[storagehelpers.AnnSelectedNode] == nodeName {
			continue
		}
		clone := b.claim.DeepCopy()
		metav1.SetMetaDataAnnotation(&clone.ObjectMeta, storagehelpers.AnnSelectedNode, nodeName)
		updated, err := pl.client.CoreV1().PersistentVolumeClaims(clone.Namespace).Update(ctx, clone, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		if updated.ResourceVersion != b.claim.ResourceVersion {
			written[key(b.claim)] = b.claim.ResourceVersion
		}
	}
	return wait.PollUntilContextTimeout(ctx, pl.interval, pl.bindTimeout, false, func(context.Context) (bool, error) {
		return pl.allBound(bs, written)
	})
}

// allBound reports whether every claim is bound, as the informers see it;
// an error when a provisioner gave up (the selected node removed).
func (pl *VolumeBinding) allBound(bs []binding, written map[string]string) (bool, error) {
	for _, b := range bs {
		claim, err := pl.pvcs.PersistentVolumeClaims(b.claim.Namespace).Get(b.claim.Name)
		if err != nil {
			return false, fmt.Errorf("failed to check binding: %w", err)
		}
		if claim.UID != b.claim.UID {
			return false, fmt.Errorf("persistentvolumeclaim %q was replaced", claim.Name)
		}
		if old, ok := written[key(claim)]; ok && claim.ResourceVersion == old {
			return false, nil // the informer has not seen our write yet
		}
		if b.volume == nil && claim.Spec.VolumeName == "" {
			if _, ok := claim.Annotations[storagehelpers.AnnSelectedNode]; !ok {
				return false, fmt.Errorf("selectedNode annotation reset for PVC %q", claim.Name)
			}
		}
		if claim.Spec.VolumeName == "" || !metav1.HasAnnotation(claim.ObjectMeta, storagehelpers.AnnBindCompleted) {
			return false, nil
		}
		pv, err := pl.pvs.Get(claim.Spec.VolumeName)
		if err != nil {
			return false, nil // the informer has not seen it yet
		}
		if b.volume != nil && pv.Spec.ClaimRef == nil {
			return false, fmt.Errorf("ClaimRef got reset for pv %q", pv.Name)
		}
	}
	return true, nil
}
