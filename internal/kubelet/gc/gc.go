// Package gc decides what the kubelet's garbage collection removes, as
// upstream's image GC manager and container GC: unused images, oldest
// last use first, when the image filesystem's usage reaches the high
// threshold, down to the low one (or all unused ones under disk pressure);
// images unused for longer than a maximum age; dead container instances
// beyond the newest per pod container; and dead sandboxes beyond the
// newest per pod. It is pure: the kubelet lists the runtime, keeps when
// each image was first seen and last used, and removes what it is told.
package gc

import (
	"fmt"
	"sort"
	"time"
)

// Image is one image on the node as image GC sees it.
type Image struct {
	ID   string
	Size int64
	// Pinned images (the sandbox image) are never removed; InUse ones are
	// the images of existing containers, running or not.
	Pinned bool
	InUse  bool
	// FirstSeen is when GC first saw the image; LastUsed when it last saw
	// it in use (FirstSeen if never).
	FirstSeen time.Time
	LastUsed  time.Time
}

// BytesToFree is how much to free for the filesystem to be back at the
// low threshold, 0 while its usage is below the high threshold
// (percentages, as --image-gc-high-threshold/--image-gc-low-threshold).
func BytesToFree(capacity, available int64, high, low int) (int64, int) {
	if capacity <= 0 {
		return 0, 0
	}
	usage := 100 - int(available*100/capacity)
	if usage < high {
		return 0, usage
	}
	return capacity*int64(100-low)/100 - available, usage
}

// eligible returns the images GC may remove now, oldest last use first
// (then first seen): not in use, not pinned, seen longer ago than minAge.
func eligible(images []Image, now time.Time, minAge time.Duration) []Image {
	var out []Image
	for _, im := range images {
		if im.InUse || im.Pinned || !im.LastUsed.Before(now) || now.Sub(im.FirstSeen) < minAge {
			continue
		}
		out = append(out, im)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].LastUsed.Equal(out[j].LastUsed) {
			return out[i].LastUsed.Before(out[j].LastUsed)
		}
		return out[i].FirstSeen.Before(out[j].FirstSeen)
	})
	return out
}

// ToFree picks the images to remove to free bytes (all eligible ones
// for a negative amount), in removal order, and what they add up to.
func ToFree(images []Image, bytes int64, now time.Time, minAge time.Duration) ([]Image, int64) {
	var out []Image
	var freed int64
	for _, im := range eligible(images, now, minAge) {
		if bytes >= 0 && freed >= bytes {
			break
		}
		out = append(out, im)
		freed += im.Size
	}
	return out, freed
}

// TooOld picks the images unused for longer than maxAge (0: none), as
// upstream's --image-maximum-gc-age.
func TooOld(images []Image, now time.Time, minAge, maxAge time.Duration) []Image {
	if maxAge <= 0 {
		return nil
	}
	var out []Image
	for _, im := range eligible(images, now, minAge) {
		last := im.LastUsed
		if last.IsZero() {
			last = im.FirstSeen
		}
		if now.Sub(last) > maxAge {
			out = append(out, im)
		}
	}
	return out
}

// Container is one container instance.
type Container struct {
	ID        string
	PodUID    string
	Name      string
	SandboxID string
	Running   bool
	CreatedAt time.Time
}

// DeadContainers picks the dead instances to remove: for each pod
// container, those beyond the newest maxPerPodContainer dead ones
// (1 keeps the one `kubectl logs --previous` reads, and the record of a
// finished init container), created more than minAge ago. Pods in gone
// have all their dead instances removed.
func DeadContainers(cs []Container, now time.Time, minAge time.Duration, maxPerPodContainer int, gone map[string]bool) []Container {
	type unit struct{ pod, name string }
	units := map[unit][]Container{}
	for _, c := range cs {
		if c.Running || now.Sub(c.CreatedAt) < minAge {
			continue
		}
		u := unit{c.PodUID, c.Name}
		units[u] = append(units[u], c)
	}
	var out []Container
	for u, list := range units {
		sort.SliceStable(list, func(i, j int) bool { return list[i].CreatedAt.After(list[j].CreatedAt) })
		keep := maxPerPodContainer
		if keep < 0 {
			continue
		}
		if gone[u.pod] {
			keep = 0
		}
		if len(list) > keep {
			out = append(out, list[keep:]...)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out
}

// Sandbox is one pod sandbox.
type Sandbox struct {
	ID        string
	PodUID    string
	Ready     bool
	CreatedAt time.Time
}

// DeadSandboxes picks the sandboxes to remove: per pod all but the newest
// that are not ready and hold no container (remaining lists the
// containers left after DeadContainers); for pods in gone, all such.
func DeadSandboxes(sbs []Sandbox, remaining []Container, gone map[string]bool) []Sandbox {
	used := map[string]bool{}
	for _, c := range remaining {
		used[c.SandboxID] = true
	}
	byPod := map[string][]Sandbox{}
	for _, s := range sbs {
		byPod[s.PodUID] = append(byPod[s.PodUID], s)
	}
	var out []Sandbox
	for pod, list := range byPod {
		sort.SliceStable(list, func(i, j int) bool { return list[i].CreatedAt.Before(list[j].CreatedAt) })
		n := len(list) - 1
		if gone[pod] {
			n = len(list)
		}
		for _, s := range list[:n] {
			if !s.Ready && !used[s.ID] {
				out = append(out, s)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out
}

// FormatSize writes bytes as upstream's image GC messages do ("1.5 GiB").
func FormatSize(b int64) string {
	const (
		kib = 1024
		mib = 1024 * kib
		gib = 1024 * mib
		tib = 1024 * gib
	)
	s := float64(b)
	switch {
	case s < kib:
		return fmt.Sprintf("%d B", b)
	case s < mib:
		return fmt.Sprintf("%.1f KiB", s/kib)
	case s < gib:
		return fmt.Sprintf("%.1f MiB", s/mib)
	case s < tib:
		return fmt.Sprintf("%.1f GiB", s/gib)
	}
	return fmt.Sprintf("%.1f TiB", s/tib)
}
