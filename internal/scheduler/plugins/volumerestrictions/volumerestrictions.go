// Package volumerestrictions is upstream's VolumeRestrictions plugin, for
// the one restriction Skiff's volumes can have: a PersistentVolumeClaim
// with the ReadWriteOncePod access mode is used by one pod at a time. A pod
// naming such a claim that a scheduled (or assumed) pod already uses is
// Unschedulable with upstream's reason, so preemption may free the claim
// (PreFilterExtensions keep the count right in its dry runs). A missing
// claim is UnschedulableAndUnresolvable.
//
// Not done: the in-tree disk conflicts (GCE PD, AWS EBS, Ceph RBD, iSCSI
// volumes on one node), whose volume types Skiff's kubelet cannot mount.
package volumerestrictions

import (
	"context"
	"errors"
	"slices"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

// Name is the plugin's name.
const Name = "VolumeRestrictions"

// ErrReasonReadWriteOncePodConflict is upstream's reason.
const ErrReasonReadWriteOncePodConflict = "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod"

const stateKey framework.StateKey = "PreFilter" + Name

// VolumeRestrictions is the plugin.
type VolumeRestrictions struct {
	pvcs   corelisters.PersistentVolumeClaimLister
	handle framework.Handle
}

var (
	_ framework.PreFilterPlugin     = (*VolumeRestrictions)(nil)
	_ framework.FilterPlugin        = (*VolumeRestrictions)(nil)
	_ framework.PreFilterExtensions = (*VolumeRestrictions)(nil)
)

// New builds the plugin on the handle's informers (without them, framework
// tests, a pod with claims gets an error).
func New(_ context.Context, _ any, h framework.Handle) (framework.Plugin, error) {
	pl := &VolumeRestrictions{handle: h}
	if f := h.SharedInformerFactory(); f != nil {
		pl.pvcs = f.Core().V1().PersistentVolumeClaims().Lister()
	}
	return pl, nil
}

// Name implements framework.Plugin.
func (*VolumeRestrictions) Name() string { return Name }

// state: the pod's ReadWriteOncePod claims and how many of them other pods
// use.
type state struct {
	claims    map[string]bool
	conflicts int
}

func (s *state) Clone() framework.StateData {
	return &state{claims: s.claims, conflicts: s.conflicts}
}

// PreFilter counts the pod's ReadWriteOncePod claims already in use;
// Skip when it has none.
func (pl *VolumeRestrictions) PreFilter(_ context.Context, cs *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	claims := map[string]bool{}
	for _, vol := range pod.Spec.Volumes {
		if vol.PersistentVolumeClaim == nil {
			continue
		}
		if pl.pvcs == nil {
			return nil, framework.AsStatus(errors.New("VolumeRestrictions: no informers to read claims from"))
		}
		pvc, err := pl.pvcs.PersistentVolumeClaims(pod.Namespace).Get(vol.PersistentVolumeClaim.ClaimName)
		if apierrors.IsNotFound(err) {
			return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, err.Error())
		}
		if err != nil {
			return nil, framework.AsStatus(err)
		}
		if slices.Contains(pvc.Spec.AccessModes, v1.ReadWriteOncePod) {
			claims[pvc.Name] = true
		}
	}
	if len(claims) == 0 {
		return nil, framework.NewStatus(framework.Skip)
	}
	s := &state{claims: claims}
	for _, ni := range pl.handle.SnapshotSharedLister().NodeInfos().List() {
		for _, pi := range ni.Pods {
			if pi.Pod.UID != pod.UID {
				s.conflicts += uses(pi.Pod, pod.Namespace, claims)
			}
		}
	}
	cs.Write(stateKey, s)
	return nil, nil
}

// uses counts the claims of the set that p uses.
func uses(p *v1.Pod, ns string, claims map[string]bool) int {
	if p.Namespace != ns {
		return 0
	}
	n := 0
	for _, vol := range p.Spec.Volumes {
		if vol.PersistentVolumeClaim != nil && claims[vol.PersistentVolumeClaim.ClaimName] {
			n++
		}
	}
	return n
}

// PreFilterExtensions implements framework.PreFilterPlugin.
func (pl *VolumeRestrictions) PreFilterExtensions() framework.PreFilterExtensions { return pl }

// AddPod counts a pod added in a preemption dry run.
func (pl *VolumeRestrictions) AddPod(_ context.Context, cs *framework.CycleState, pod *v1.Pod, add *framework.PodInfo, _ *framework.NodeInfo) *framework.Status {
	s, err := framework.ReadAs[*state](cs, stateKey)
	if err != nil {
		return framework.AsStatus(err)
	}
	s.conflicts += uses(add.Pod, pod.Namespace, s.claims)
	return nil
}

// RemovePod uncounts a pod removed in a preemption dry run.
func (pl *VolumeRestrictions) RemovePod(_ context.Context, cs *framework.CycleState, pod *v1.Pod, remove *framework.PodInfo, _ *framework.NodeInfo) *framework.Status {
	s, err := framework.ReadAs[*state](cs, stateKey)
	if err != nil {
		return framework.AsStatus(err)
	}
	s.conflicts -= uses(remove.Pod, pod.Namespace, s.claims)
	return nil
}

// Filter fails every node while a ReadWriteOncePod claim is in use.
func (pl *VolumeRestrictions) Filter(_ context.Context, cs *framework.CycleState, _ *v1.Pod, _ *framework.NodeInfo) *framework.Status {
	s, err := framework.ReadAs[*state](cs, stateKey)
	if err != nil {
		return framework.AsStatus(err)
	}
	if s.conflicts > 0 {
		return framework.NewStatus(framework.Unschedulable, ErrReasonReadWriteOncePodConflict)
	}
	return nil
}
