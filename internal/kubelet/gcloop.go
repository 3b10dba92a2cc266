package kubelet

import (
	"context"
	"fmt"
	"time"

	"github.com/distribution/reference"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/kubelet/eviction"
	"github.com/skiff-sh/skiff/internal/kubelet/gc"
)

// GC defaults, as upstream's kubelet.
const (
	DefaultImageGCHighThresholdPercent = 85
	DefaultImageGCLowThresholdPercent  = 80
	DefaultImageMinimumGCAge           = 2 * time.Minute
	DefaultImageGCPeriod               = 5 * time.Minute
	DefaultContainerGCPeriod           = time.Minute
)

// GCOptions configure garbage collection; the zero value means the
// defaults.
type GCOptions struct {
	// ImageHighThresholdPercent (--image-gc-high-threshold, default 85):
	// at this image filesystem usage unused images are removed, oldest
	// last use first, down to ImageLowThresholdPercent
	// (--image-gc-low-threshold, default 80). 100 turns it off.
	ImageHighThresholdPercent int
	ImageLowThresholdPercent  int
	// ImageMinimumAge (--minimum-image-ttl-duration, default 2 min): an
	// image seen more recently is not removed. ImageMaximumAge
	// (--image-maximum-gc-age, default 0 = off): an image unused longer is
	// removed whatever the disk usage.
	ImageMinimumAge time.Duration
	ImageMaximumAge time.Duration
	// ImagePeriod (default 5 min) and ContainerPeriod (default 1 min) are
	// how often each runs.
	ImagePeriod     time.Duration
	ContainerPeriod time.Duration
	// MaxPerPodContainer is how many dead instances of each pod container
	// are kept (default 1, which `kubectl logs --previous` reads; -1
	// keeps all).
	MaxPerPodContainer int
}

func (o *GCOptions) defaults() {
	if o.ImageHighThresholdPercent == 0 {
		o.ImageHighThresholdPercent = DefaultImageGCHighThresholdPercent
	}
	if o.ImageLowThresholdPercent == 0 {
		o.ImageLowThresholdPercent = DefaultImageGCLowThresholdPercent
	}
	if o.ImageMinimumAge == 0 {
		o.ImageMinimumAge = DefaultImageMinimumGCAge
	}
	if o.ImagePeriod <= 0 {
		o.ImagePeriod = DefaultImageGCPeriod
	}
	if o.ContainerPeriod <= 0 {
		o.ContainerPeriod = DefaultContainerGCPeriod
	}
	if o.MaxPerPodContainer == 0 {
		o.MaxPerPodContainer = 1
	}
}

// Validate checks the thresholds as upstream's kubelet does.
func (o GCOptions) Validate() error {
	if o.ImageHighThresholdPercent < 0 || o.ImageHighThresholdPercent > 100 {
		return fmt.Errorf("--image-gc-high-threshold must be between 0 and 100, got %d", o.ImageHighThresholdPercent)
	}
	if o.ImageLowThresholdPercent < 0 || o.ImageLowThresholdPercent > 100 {
		return fmt.Errorf("--image-gc-low-threshold must be between 0 and 100, got %d", o.ImageLowThresholdPercent)
	}
	if o.ImageLowThresholdPercent > o.ImageHighThresholdPercent {
		return fmt.Errorf("--image-gc-low-threshold (%d) must not exceed --image-gc-high-threshold (%d)", o.ImageLowThresholdPercent, o.ImageHighThresholdPercent)
	}
	if o.ImageMinimumAge < 0 || o.ImageMaximumAge < 0 {
		return fmt.Errorf("image GC ages must not be negative")
	}
	if o.ImageMaximumAge > 0 && o.ImageMaximumAge <= o.ImageMinimumAge {
		return fmt.Errorf("--image-maximum-gc-age (%v) must be greater than --minimum-image-ttl-duration (%v)", o.ImageMaximumAge, o.ImageMinimumAge)
	}
	return nil
}

// gcLoop runs container GC every ContainerPeriod (noting which images
// are in use as it goes) and image GC every ImagePeriod.
func (k *Kubelet) gcLoop(ctx context.Context) {
	lastImageGC := k.clock.Now()
	_, _ = k.detectImages(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-k.clock.After(k.opts.GC.ContainerPeriod):
		}
		k.collectContainers(ctx)
		_, _ = k.detectImages(ctx)
		if k.clock.Since(lastImageGC) >= k.opts.GC.ImagePeriod {
			lastImageGC = k.clock.Now()
			if err := k.collectImages(ctx, false); err != nil {
				klog.FromContext(ctx).Info("Image garbage collection failed", "err", err)
			}
		}
	}
}

// reclaimDisk frees node-level disk before pods are evicted for disk
// pressure (upstream's DeleteAllUnusedContainers and DeleteUnusedImages).
func (k *Kubelet) reclaimDisk(ctx context.Context) {
	k.collectContainers(ctx)
	if err := k.collectImages(ctx, true); err != nil {
		klog.FromContext(ctx).Info("Unable to reclaim images", "err", err)
	}
}

// collectContainers removes dead container instances beyond the newest
// per pod container, and dead sandboxes beyond the newest per pod, of
// pods the kubelet knows (gone pods are the workers' to remove).
func (k *Kubelet) collectContainers(ctx context.Context) {
	logger := klog.FromContext(ctx)
	containers, err := k.runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{})
	if err != nil {
		return
	}
	sandboxes, err := k.runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{})
	if err != nil {
		return
	}
	k.noteImagesInUse(containers)
	k.mu.Lock()
	known := make(map[string]bool, len(k.pods))
	for uid := range k.pods {
		known[string(uid)] = true
	}
	k.mu.Unlock()
	var cs []gc.Container
	for _, c := range containers {
		uid := c.Labels[labelPodUID]
		if !known[uid] {
			continue
		}
		cs = append(cs, gc.Container{ID: c.Id, PodUID: uid, Name: c.GetMetadata().GetName(), SandboxID: c.PodSandboxId,
			Running:   c.State == runtimeapi.ContainerState_CONTAINER_RUNNING || c.State == runtimeapi.ContainerState_CONTAINER_CREATED,
			CreatedAt: time.Unix(0, c.CreatedAt)})
	}
	dead := gc.DeadContainers(cs, k.clock.Now(), 0, k.opts.GC.MaxPerPodContainer, nil)
	removed := map[string]bool{}
	for _, c := range dead {
		if err := k.runtime.RemoveContainer(ctx, c.ID); err != nil {
			logger.Info("Unable to remove a dead container", "containerID", c.ID, "err", err)
			continue
		}
		removed[c.ID] = true
		logger.V(2).Info("Removed a dead container", "podUID", c.PodUID, "container", c.Name, "containerID", c.ID)
	}
	var remaining []gc.Container
	for _, c := range containers {
		if !removed[c.Id] {
			remaining = append(remaining, gc.Container{ID: c.Id, SandboxID: c.PodSandboxId})
		}
	}
	var sbs []gc.Sandbox
	for _, s := range sandboxes {
		uid := s.Labels[labelPodUID]
		if !known[uid] {
			continue
		}
		sbs = append(sbs, gc.Sandbox{ID: s.Id, PodUID: uid, Ready: s.State == runtimeapi.PodSandboxState_SANDBOX_READY, CreatedAt: time.Unix(0, s.CreatedAt)})
	}
	for _, s := range gc.DeadSandboxes(sbs, remaining, nil) {
		if err := k.runtime.RemovePodSandbox(ctx, s.ID); err != nil {
			logger.Info("Unable to remove a dead sandbox", "sandbox", s.ID, "err", err)
		}
	}
}

// noteImagesInUse records now as the last use of the images of the given
// containers (any state: an exited container's image is still in use).
func (k *Kubelet) noteImagesInUse(containers []*runtimeapi.Container) {
	now := k.clock.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.imagesLastUsed == nil {
		k.imagesLastUsed = map[string]time.Time{}
	}
	for _, c := range containers {
		for _, ref := range []string{c.ImageRef, c.GetImage().GetImage()} {
			if ref != "" {
				k.imagesLastUsed[ref] = now
			}
		}
	}
}

// detectImages lists the images and records when each was first seen
// and last used (upstream's detectImages); it returns them for GC.
func (k *Kubelet) detectImages(ctx context.Context) ([]gc.Image, error) {
	list, err := k.images.ListImages(ctx, &runtimeapi.ImageFilter{})
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	containers, err := k.runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	k.noteImagesInUse(containers)
	now := k.clock.Now()
	inUse := map[string]bool{}
	for _, c := range containers {
		inUse[c.ImageRef] = true
		inUse[c.GetImage().GetImage()] = true
	}
	// The images of the node's pods' image volumes are in use while the
	// pods are (their mounts hold the image's snapshot, not a container).
	for _, pod := range k.GetPods() {
		for _, v := range pod.Spec.Volumes {
			if v.Image == nil {
				continue
			}
			inUse[v.Image.Reference] = true
			if named, err := reference.ParseNormalizedNamed(v.Image.Reference); err == nil {
				inUse[reference.TagNameOnly(named).String()] = true
			}
		}
	}
	k.mu.Lock()
	if k.imagesFirstSeen == nil {
		k.imagesFirstSeen = map[string]time.Time{}
	}
	present := map[string]bool{}
	var images []gc.Image
	for _, im := range list {
		present[im.Id] = true
		first, ok := k.imagesFirstSeen[im.Id]
		if !ok {
			first = now
			k.imagesFirstSeen[im.Id] = now
		}
		g := gc.Image{ID: im.Id, Size: int64(im.Size), Pinned: im.Pinned, FirstSeen: first, InUse: inUse[im.Id]}
		for _, ref := range append(append([]string{im.Id}, im.RepoTags...), im.RepoDigests...) {
			if inUse[ref] {
				g.InUse = true
			}
			if t, ok := k.imagesLastUsed[ref]; ok && t.After(g.LastUsed) {
				g.LastUsed = t
			}
		}
		if g.InUse {
			g.LastUsed = now
		}
		images = append(images, g)
	}
	for id := range k.imagesFirstSeen {
		if !present[id] {
			delete(k.imagesFirstSeen, id)
		}
	}
	k.mu.Unlock()
	return images, nil
}

// collectImages removes unused images: under disk pressure (all) every
// eligible one; otherwise, when the image filesystem's usage is at the
// high threshold, the oldest unused ones down to the low threshold, and
// any unused longer than the maximum age.
func (k *Kubelet) collectImages(ctx context.Context, all bool) error {
	logger := klog.FromContext(ctx)
	images, err := k.detectImages(ctx)
	if err != nil {
		return err
	}
	now := k.clock.Now()
	remove := func(im gc.Image, reason string) bool {
		if err := k.images.RemoveImage(ctx, &runtimeapi.ImageSpec{Image: im.ID}); err != nil {
			logger.Info("Unable to remove an image", "imageID", im.ID, "err", err)
			return false
		}
		logger.Info("Removed an image", "imageID", im.ID, "size", im.Size, "reason", reason)
		k.metrics.IncImageGC(reason)
		return true
	}
	if all {
		victims, _ := gc.ToFree(images, -1, now, k.opts.GC.ImageMinimumAge)
		for _, im := range victims {
			remove(im, "space")
		}
		return nil
	}
	gone := map[string]bool{}
	for _, im := range gc.TooOld(images, now, k.opts.GC.ImageMinimumAge, k.opts.GC.ImageMaximumAge) {
		if remove(im, "age") {
			gone[im.ID] = true
		}
	}
	if k.opts.GC.ImageHighThresholdPercent >= 100 {
		return nil
	}
	obs, err := k.stats.Observe(ctx)
	if err != nil {
		return err
	}
	fs, ok := obs[eviction.SignalImageFsAvailable]
	if !ok || fs.Capacity <= 0 {
		return nil
	}
	need, usage := gc.BytesToFree(fs.Capacity, fs.Available, k.opts.GC.ImageHighThresholdPercent, k.opts.GC.ImageLowThresholdPercent)
	if need <= 0 {
		return nil
	}
	logger.Info("Disk usage on image filesystem is over the high threshold, trying to free bytes down to the low threshold",
		"usage", usage, "highThreshold", k.opts.GC.ImageHighThresholdPercent, "amountToFree", need, "lowThreshold", k.opts.GC.ImageLowThresholdPercent)
	var left []gc.Image
	for _, im := range images {
		if !gone[im.ID] {
			left = append(left, im)
		}
	}
	victims, _ := gc.ToFree(left, need, now, k.opts.GC.ImageMinimumAge)
	var freed int64
	for _, im := range victims {
		if remove(im, "space") {
			freed += im.Size
		}
	}
	if freed < need {
		msg := fmt.Sprintf("Insufficient free disk space on the node's image filesystem (%d%% of %s used). "+
			"Failed to free sufficient space by deleting unused images (freed %d bytes). "+
			"Investigate disk usage, as it could be used by active images, logs, volumes, or other data.",
			usage, gc.FormatSize(fs.Capacity), freed)
		k.recorder.Event(k.nodeRef(), corev1.EventTypeWarning, "FreeDiskSpaceFailed", msg)
		return fmt.Errorf("%s", msg)
	}
	return nil
}
