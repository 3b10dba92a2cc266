// Package localpath is Skiff's built-in local-path provisioner (k3s's
// idea, its provisioner name and StorageClass), run by every node agent for
// its own node.
//
// The PersistentVolume binder (controller manager) treats
// rancher.io/local-path as an external provisioner: once the scheduler has
// picked a node for a WaitForFirstConsumer claim (annotation
// volume.kubernetes.io/selected-node), the binder adds
// volume.kubernetes.io/storage-provisioner. The agent of the selected node
// then creates the directory <data-dir>/storage/<pv>_<namespace>_<claim>
// (mode 0777, so that any container user may write) and a hostPath
// PersistentVolume pvc-<claim UID> for it: pre-bound to the claim, pinned to
// the node by a required node affinity on kubernetes.io/hostname, capacity
// and access modes from the claim, reclaim policy from the class, annotated
// pv.kubernetes.io/provisioned-by. The binder then binds the two.
//
// When such a volume is Released with reclaim policy Delete, the same agent
// removes its directory and then deletes the PersistentVolume (UID
// precondition). Retain leaves both.
//
// The same agent is the volumes' resizer, in the part CSI's external-resizer
// plays: when a bound claim asks for more storage than its status holds
// (PersistentVolumeClaimResize admission allowed it: the class says
// allowVolumeExpansion, as `local-path` does), it records the resize in
// progress on the claim (allocatedResources, allocatedResourceStatuses
// ControllerResizeInProgress, condition Resizing), grows the volume's
// capacity, and then marks the claim done (status.capacity, the in-progress
// status and condition removed), with the events Resizing and
// VolumeResizeSuccessful. A directory has no size of its own, so there is
// no file system to grow and no node step (FileSystemResizePending never
// appears); the sizes are what the claim and volume say.
//
// Why the agent and not the controller manager: the directory lives on the
// node and the controller manager may run elsewhere (or the node's data
// directory may differ from the server's), and a helper pod would need an
// image on every node. The agent owns its data directory already, sees the
// volumes of its node through an informer, and catches up after a restart
// (a Released volume is deleted when the agent comes back). The cost: nodes
// may create and delete PersistentVolumes (ClusterRole skiff:node-local-path
// for group system:nodes), as k3s's provisioner's service account may.
package localpath

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/controller/worker"
)

// Provisioner name and the StorageClass k3s ships.
const (
	ProvisionerName = "rancher.io/local-path"
	ClassName       = "local-path"
	// StorageDir is the directory under the agent's data directory that
	// holds the volumes.
	StorageDir = "storage"
)

// StorageClass is the default class `local-path`, created at bootstrap.
func StorageClass() *storagev1.StorageClass {
	return &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{
			Name:        ClassName,
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"},
		},
		Provisioner:       ProvisionerName,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
		// The agent resizes its volumes (see the package comment).
		AllowVolumeExpansion: ptr.To(true),
	}
}

// Options tune the provisioner; the zero value means the defaults.
type Options struct {
	// Resync is how often every claim and volume is looked at again
	// (default 1 min).
	Resync time.Duration
}

// Provisioner provisions and deletes the local-path volumes of one node.
type Provisioner struct {
	client   kubernetes.Interface
	nodeName string
	root     string
	opts     Options

	factory  informers.SharedInformerFactory
	claims   corelisters.PersistentVolumeClaimLister
	volumes  corelisters.PersistentVolumeLister
	classes  storagelisters.StorageClassLister
	synced   []cache.InformerSynced
	queue    *worker.Queue[string]
	recorder record.EventRecorder
	events   record.EventBroadcaster
	ready    chan struct{}
}

// New builds the provisioner of nodeName keeping volumes under root
// (<data-dir>/storage). It starts nothing.
func New(client kubernetes.Interface, nodeName, root string, opts Options) (*Provisioner, error) {
	if opts.Resync == 0 {
		opts.Resync = time.Minute
	}
	p := &Provisioner{client: client, nodeName: nodeName, root: filepath.Clean(root), opts: opts, ready: make(chan struct{})}
	p.factory = informers.NewSharedInformerFactory(client, opts.Resync)
	pvcs := p.factory.Core().V1().PersistentVolumeClaims()
	pvs := p.factory.Core().V1().PersistentVolumes()
	classes := p.factory.Storage().V1().StorageClasses()
	p.claims, p.volumes, p.classes = pvcs.Lister(), pvs.Lister(), classes.Lister()
	p.synced = []cache.InformerSynced{pvcs.Informer().HasSynced, pvs.Informer().HasSynced, classes.Informer().HasSynced}
	p.queue = worker.NewQueue("local_path_provisioner", p.sync, worker.Options[string]{})
	p.events = record.NewBroadcaster()
	p.recorder = p.events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: ProvisionerName + "_" + nodeName})

	onClaim := func(obj any) {
		c, ok := obj.(*corev1.PersistentVolumeClaim)
		switch {
		case !ok:
		case p.wantsVolume(c):
			p.queue.Add("claim/" + c.Namespace + "/" + c.Name)
		case wantsResize(c):
			p.queue.Add("resize/" + c.Namespace + "/" + c.Name)
		}
	}
	if _, err := pvcs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onClaim, UpdateFunc: func(_, obj any) { onClaim(obj) },
	}); err != nil {
		return nil, err
	}
	onVolume := func(obj any) {
		if v, ok := obj.(*corev1.PersistentVolume); ok && p.ours(v) {
			p.queue.Add("volume/" + v.Name)
		}
	}
	if _, err := pvs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onVolume, UpdateFunc: func(_, obj any) { onVolume(obj) },
	}); err != nil {
		return nil, err
	}
	return p, nil
}

// Ready is closed once Start runs: the node does not wait for the
// provisioner (its caches sync in the background).
func (p *Provisioner) Ready() <-chan struct{} { return p.ready }

// Start runs until ctx is done.
func (p *Provisioner) Start(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName("local-path")
	ctx = klog.NewContext(ctx, logger)
	p.events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: p.client.CoreV1().Events("")})
	defer p.events.Shutdown()
	defer p.queue.ShutDown()
	close(p.ready)
	p.factory.Start(ctx.Done())
	defer p.factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), p.synced...) {
		return nil // ctx is done
	}
	p.queue.Run(ctx)
	return nil
}

// sync handles one key: "claim/<ns>/<name>", "volume/<name>" or
// "resize/<ns>/<name>".
func (p *Provisioner) sync(ctx context.Context, key string) error {
	switch kind, rest, _ := strings.Cut(key, "/"); kind {
	case "claim":
		return p.syncClaim(ctx, rest)
	case "volume":
		return p.syncVolume(ctx, rest)
	case "resize":
		return p.syncResize(ctx, rest)
	}
	return nil
}

// wantsVolume: an unbound claim the binder handed to us for this node.
func (p *Provisioner) wantsVolume(c *corev1.PersistentVolumeClaim) bool {
	return c.Spec.VolumeName == "" && c.DeletionTimestamp == nil &&
		c.Annotations[storagehelpers.AnnStorageProvisioner] == ProvisionerName &&
		c.Annotations[storagehelpers.AnnSelectedNode] == p.nodeName
}

// ours: a volume this provisioner made on this node.
func (p *Provisioner) ours(v *corev1.PersistentVolume) bool {
	if v.Annotations[storagehelpers.AnnDynamicallyProvisioned] != ProvisionerName {
		return false
	}
	path := VolumePath(v)
	return path != "" && within(p.root, path) && NodeOf(v) == p.nodeName
}

func (p *Provisioner) syncClaim(ctx context.Context, key string) error {
	ns, name, _ := strings.Cut(key, "/")
	claim, err := p.claims.PersistentVolumeClaims(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !p.wantsVolume(claim) {
		return nil
	}
	pvName := "pvc-" + string(claim.UID)
	if _, err := p.volumes.Get(pvName); err == nil {
		return nil // made already; the binder binds it
	}
	class, err := p.classes.Get(storagehelpers.GetPersistentVolumeClaimClass(claim))
	if err != nil {
		return err
	}
	if class.Provisioner != ProvisionerName {
		return nil
	}
	pv, err := Volume(claim, class, p.nodeName, p.root)
	if err != nil {
		p.recorder.Event(claim, corev1.EventTypeWarning, "ProvisioningFailed", err.Error())
		return nil // a claim we cannot serve stays Pending with the event
	}
	p.recorder.Event(claim, corev1.EventTypeNormal, "Provisioning",
		fmt.Sprintf("External provisioner is provisioning volume for claim %q", ns+"/"+name))
	dir := VolumePath(pv)
	if err := os.MkdirAll(dir, 0o777); err != nil {
		p.recorder.Event(claim, corev1.EventTypeWarning, "ProvisioningFailed", fmt.Sprintf("failed to provision volume with StorageClass %q: %v", class.Name, err))
		return err
	}
	_ = os.Chmod(dir, 0o777) // whatever the umask
	if _, err := p.client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		p.recorder.Event(claim, corev1.EventTypeWarning, "ProvisioningFailed", fmt.Sprintf("failed to provision volume with StorageClass %q: %v", class.Name, err))
		return err
	}
	klog.FromContext(ctx).V(2).Info("Provisioned volume", "claim", klog.KObj(claim), "volume", pv.Name, "path", dir)
	p.recorder.Event(claim, corev1.EventTypeNormal, "ProvisioningSucceeded", fmt.Sprintf("Successfully provisioned volume %s", pv.Name))
	return nil
}

func (p *Provisioner) syncVolume(ctx context.Context, name string) error {
	v, err := p.volumes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !p.ours(v) || !ShouldDelete(v) {
		return nil
	}
	dir := VolumePath(v)
	if err := os.RemoveAll(dir); err != nil {
		p.recorder.Event(v, corev1.EventTypeWarning, "VolumeFailedDelete", err.Error())
		return err
	}
	err = p.client.CoreV1().PersistentVolumes().Delete(ctx, v.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &v.UID}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err == nil {
		klog.FromContext(ctx).V(2).Info("Deleted volume", "volume", v.Name, "path", dir)
	}
	return err
}

// wantsResize: a bound claim that asks for more storage than its status
// holds.
func wantsResize(c *corev1.PersistentVolumeClaim) bool {
	if c.Spec.VolumeName == "" || c.Status.Phase != corev1.ClaimBound || c.DeletionTimestamp != nil {
		return false
	}
	want, ok := c.Spec.Resources.Requests[corev1.ResourceStorage]
	have := c.Status.Capacity[corev1.ResourceStorage]
	return ok && want.Cmp(have) > 0
}

// syncResize grows a claim's volume of this node to what the claim asks:
// the claim marked in progress, the volume's capacity, the claim marked
// done. Each step is idempotent, so a sync cut short is finished by the
// next one.
func (p *Provisioner) syncResize(ctx context.Context, key string) error {
	ns, name, _ := strings.Cut(key, "/")
	claim, err := p.claims.PersistentVolumeClaims(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !wantsResize(claim) {
		return nil
	}
	v, err := p.volumes.Get(claim.Spec.VolumeName)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !p.ours(v) || v.Spec.ClaimRef == nil || v.Spec.ClaimRef.UID != claim.UID {
		return nil
	}
	want := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	claim = claim.DeepCopy()
	if claim.Status.AllocatedResourceStatuses[corev1.ResourceStorage] != corev1.PersistentVolumeClaimControllerResizeInProgress {
		p.recorder.Event(claim, corev1.EventTypeNormal, "Resizing", fmt.Sprintf("External resizer is resizing volume %s", v.Name))
		MarkResizing(claim, want, metav1.Now())
		if claim, err = p.client.CoreV1().PersistentVolumeClaims(ns).UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	if have := v.Spec.Capacity[corev1.ResourceStorage]; want.Cmp(have) > 0 {
		v = v.DeepCopy()
		v.Spec.Capacity[corev1.ResourceStorage] = want
		if _, err := p.client.CoreV1().PersistentVolumes().Update(ctx, v, metav1.UpdateOptions{}); err != nil {
			p.recorder.Event(claim, corev1.EventTypeWarning, "VolumeResizeFailed", fmt.Sprintf("resize volume %q by resizer %q failed: %v", v.Name, ProvisionerName, err))
			return err
		}
	}
	MarkResized(claim, want)
	if _, err := p.client.CoreV1().PersistentVolumeClaims(ns).UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
		return err
	}
	klog.FromContext(ctx).V(2).Info("Resized volume", "claim", klog.KObj(claim), "volume", v.Name, "size", want.String())
	p.recorder.Event(claim, corev1.EventTypeNormal, "VolumeResizeSuccessful", fmt.Sprintf("resize volume %q by resizer %q finished successfully", v.Name, ProvisionerName))
	return nil
}

// MarkResizing records on a claim's status that the controller side of a
// resize to size is under way, as external-resizer does.
func MarkResizing(claim *corev1.PersistentVolumeClaim, size resource.Quantity, now metav1.Time) {
	if claim.Status.AllocatedResources == nil {
		claim.Status.AllocatedResources = corev1.ResourceList{}
	}
	claim.Status.AllocatedResources[corev1.ResourceStorage] = size
	if claim.Status.AllocatedResourceStatuses == nil {
		claim.Status.AllocatedResourceStatuses = map[corev1.ResourceName]corev1.ClaimResourceStatus{}
	}
	claim.Status.AllocatedResourceStatuses[corev1.ResourceStorage] = corev1.PersistentVolumeClaimControllerResizeInProgress
	claim.Status.Conditions = slices.DeleteFunc(claim.Status.Conditions, func(c corev1.PersistentVolumeClaimCondition) bool {
		return c.Type == corev1.PersistentVolumeClaimResizing
	})
	claim.Status.Conditions = append(claim.Status.Conditions, corev1.PersistentVolumeClaimCondition{
		Type: corev1.PersistentVolumeClaimResizing, Status: corev1.ConditionTrue, LastTransitionTime: now,
	})
}

// MarkResized records a finished resize to size: the capacity, and no
// resize status or condition left.
func MarkResized(claim *corev1.PersistentVolumeClaim, size resource.Quantity) {
	if claim.Status.Capacity == nil {
		claim.Status.Capacity = corev1.ResourceList{}
	}
	claim.Status.Capacity[corev1.ResourceStorage] = size
	delete(claim.Status.AllocatedResourceStatuses, corev1.ResourceStorage)
	if len(claim.Status.AllocatedResourceStatuses) == 0 {
		claim.Status.AllocatedResourceStatuses = nil
	}
	claim.Status.Conditions = slices.DeleteFunc(claim.Status.Conditions, func(c corev1.PersistentVolumeClaimCondition) bool {
		return c.Type == corev1.PersistentVolumeClaimResizing || c.Type == corev1.PersistentVolumeClaimFileSystemResizePending
	})
}

// Volume is the PersistentVolume for claim on node, under root.
func Volume(claim *corev1.PersistentVolumeClaim, class *storagev1.StorageClass, node, root string) (*corev1.PersistentVolume, error) {
	if claim.Spec.Selector != nil {
		return nil, errors.New("claim.Spec.Selector is not supported")
	}
	for _, m := range claim.Spec.AccessModes {
		if m != corev1.ReadWriteOnce && m != corev1.ReadWriteOncePod {
			return nil, fmt.Errorf("NodePath only supports ReadWriteOnce and ReadWriteOncePod (1 node) access modes")
		}
	}
	if claim.Spec.DataSource != nil || claim.Spec.DataSourceRef != nil {
		return nil, errors.New("claim.Spec.DataSource is not supported")
	}
	if claim.Spec.VolumeMode != nil && *claim.Spec.VolumeMode == corev1.PersistentVolumeBlock {
		return nil, errors.New("block volumes are not supported")
	}
	size, ok := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok {
		return nil, errors.New("the claim requests no storage size")
	}
	name := "pvc-" + string(claim.UID)
	reclaim := corev1.PersistentVolumeReclaimDelete
	if class.ReclaimPolicy != nil {
		reclaim = *class.ReclaimPolicy
	}
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{storagehelpers.AnnDynamicallyProvisioned: ProvisionerName},
		},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   claim.Spec.AccessModes,
			VolumeMode:                    claim.Spec.VolumeMode,
			PersistentVolumeReclaimPolicy: reclaim,
			StorageClassName:              class.Name,
			MountOptions:                  class.MountOptions,
			ClaimRef: &corev1.ObjectReference{
				Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID, ResourceVersion: claim.ResourceVersion,
			},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: filepath.Join(root, name+"_"+claim.Namespace+"_"+claim.Name),
				Type: ptr.To(corev1.HostPathDirectoryOrCreate),
			}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node},
				}},
			}}}},
		},
	}, nil
}

// VolumePath is a hostPath or local volume's directory, else "".
func VolumePath(v *corev1.PersistentVolume) string {
	switch {
	case v.Spec.HostPath != nil:
		return v.Spec.HostPath.Path
	case v.Spec.Local != nil:
		return v.Spec.Local.Path
	}
	return ""
}

// NodeOf is the one node a volume's required affinity names
// (kubernetes.io/hostname In [node]), else "".
func NodeOf(v *corev1.PersistentVolume) string {
	if v.Spec.NodeAffinity == nil || v.Spec.NodeAffinity.Required == nil {
		return ""
	}
	terms := v.Spec.NodeAffinity.Required.NodeSelectorTerms
	if len(terms) != 1 {
		return ""
	}
	for _, r := range terms[0].MatchExpressions {
		if r.Key == corev1.LabelHostname && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
			return r.Values[0]
		}
	}
	return ""
}

// ShouldDelete: released, reclaim policy Delete, not already going.
func ShouldDelete(v *corev1.PersistentVolume) bool {
	return v.DeletionTimestamp == nil && v.Status.Phase == corev1.VolumeReleased &&
		v.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimDelete
}

// within reports whether path lies strictly inside root.
func within(root, path string) bool {
	rel, err := filepath.Rel(root, filepath.Clean(path))
	return err == nil && rel != "." && !strings.HasPrefix(rel, "..") && !filepath.IsAbs(rel)
}
