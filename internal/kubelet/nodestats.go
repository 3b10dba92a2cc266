package kubelet

import (
	"bufio"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/kubelet/eviction"
)

// StatsProvider observes the node and its pods for the eviction manager.
// The kubelet's own reads the host (cgroup v1 or v2, statfs, /proc) and
// CRI; tests give fixed numbers.
type StatsProvider interface {
	// Observe returns the node's eviction signals now.
	Observe(ctx context.Context) (eviction.Observations, error)
	// PodStats returns each pod's usage by uid; disk asks for the pods'
	// disk use too (a walk of their directories, done only under disk
	// pressure).
	PodStats(ctx context.Context, disk bool) (map[types.UID]*eviction.PodStats, error)
	// LocalStorage returns what the pod uses of the node's disk, for its
	// emptyDir sizeLimits and ephemeral-storage limits.
	LocalStorage(ctx context.Context, pod *corev1.Pod) (*eviction.LocalUsage, error)
}

// hostStats is the StatsProvider of a real node.
type hostStats struct {
	root       string // the kubelet's root dir (nodefs)
	podLogsDir string
	runtime    internalapi.RuntimeService
	images     internalapi.ImageManagerService
	cgroupRoot string // /sys/fs/cgroup
}

func newHostStats(k *Kubelet) *hostStats {
	return &hostStats{root: k.opts.RootDir, podLogsDir: k.opts.PodLogsDir, runtime: k.runtime, images: k.images, cgroupRoot: "/sys/fs/cgroup"}
}

// Observe: memory.available is MemTotal minus the root cgroup's working
// set (usage less inactive file pages), as cAdvisor computes it on cgroup
// v1 (memory.usage_in_bytes) and v2 (MemTotal − MemFree at the root);
// nodefs is the kubelet root's filesystem; imagefs the runtime's image
// filesystem (CRI ImageFsInfo, else nodefs); pid.available is
// kernel.pid_max minus the processes running.
func (h *hostStats) Observe(ctx context.Context) (eviction.Observations, error) {
	obs := eviction.Observations{}
	mem := readKeyValues("/proc/meminfo")
	total := mem["MemTotal"] * 1024
	if total > 0 {
		var usage, inactive int64
		if v, err := readInt(filepath.Join(h.cgroupRoot, "memory", "memory.usage_in_bytes")); err == nil {
			usage = v
			inactive = readKeyValues(filepath.Join(h.cgroupRoot, "memory", "memory.stat"))["total_inactive_file"]
		} else {
			usage = total - mem["MemFree"]*1024
			st := readKeyValues(filepath.Join(h.cgroupRoot, "memory.stat"))
			if v, ok := st["inactive_file"]; ok {
				inactive = v
			} else {
				inactive = mem["Inactive(file)"] * 1024
			}
		}
		ws := usage - inactive
		if ws < 0 {
			ws = 0
		}
		obs[eviction.SignalMemoryAvailable] = eviction.Observation{Available: total - ws, Capacity: total}
	}
	if fsObs, ok := statfsObservation(h.root); ok {
		obs[eviction.SignalNodeFsAvailable] = fsObs[0]
		obs[eviction.SignalNodeFsInodesFree] = fsObs[1]
		obs[eviction.SignalImageFsAvailable] = fsObs[0]
		obs[eviction.SignalImageFsInodesFree] = fsObs[1]
	}
	if h.images != nil {
		if resp, err := h.images.ImageFsInfo(ctx); err == nil {
			for _, u := range resp.GetImageFilesystems() {
				if mp := u.GetFsId().GetMountpoint(); mp != "" {
					if fsObs, ok := statfsObservation(mp); ok {
						obs[eviction.SignalImageFsAvailable] = fsObs[0]
						obs[eviction.SignalImageFsInodesFree] = fsObs[1]
					}
					break
				}
			}
		}
	}
	if pidMax, err := readInt("/proc/sys/kernel/pid_max"); err == nil {
		var si syscall.Sysinfo_t
		if syscall.Sysinfo(&si) == nil {
			obs[eviction.SignalPIDAvailable] = eviction.Observation{Available: pidMax - int64(si.Procs), Capacity: pidMax}
		}
	}
	return obs, nil
}

func statfsObservation(path string) ([2]eviction.Observation, bool) {
	var st unix.Statfs_t
	if unix.Statfs(path, &st) != nil {
		return [2]eviction.Observation{}, false
	}
	return [2]eviction.Observation{
		{Available: int64(st.Bavail) * int64(st.Bsize), Capacity: int64(st.Blocks) * int64(st.Bsize)},
		{Available: int64(st.Ffree), Capacity: int64(st.Files)},
	}, true
}

// PodStats sums CRI's container stats by pod (working set, writable
// layer), adds the pod's logs and the local volumes under its directory
// when disk is asked, and counts its processes from the pids cgroup.
func (h *hostStats) PodStats(ctx context.Context, disk bool) (map[types.UID]*eviction.PodStats, error) {
	stats, err := h.runtime.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{})
	if err != nil {
		return nil, err
	}
	out := map[types.UID]*eviction.PodStats{}
	for _, cs := range stats {
		labels := cs.GetAttributes().GetLabels()
		uid := types.UID(labels[labelPodUID])
		if uid == "" {
			continue
		}
		p := out[uid]
		if p == nil {
			p = &eviction.PodStats{}
			out[uid] = p
		}
		c := eviction.ContainerStats{Name: labels[labelContainerName]}
		c.Memory = int64(cs.GetMemory().GetWorkingSetBytes().GetValue())
		c.Disk = int64(cs.GetWritableLayer().GetUsedBytes().GetValue())
		p.Memory += c.Memory
		p.Disk += c.Disk
		p.Inodes += int64(cs.GetWritableLayer().GetInodesUsed().GetValue())
		p.Containers = append(p.Containers, c)
	}
	for uid, p := range out {
		p.Processes = h.podProcesses(uid)
		if disk {
			b, n := dirUsage(filepath.Join(h.root, "pods", string(uid)))
			p.Disk += b
			p.Inodes += n
			if matches, _ := filepath.Glob(filepath.Join(h.podLogsDir, "*_"+string(uid))); len(matches) == 1 {
				b, n := dirUsage(matches[0])
				p.Disk += b
				p.Inodes += n
			}
		}
	}
	return out, nil
}

// LocalStorage measures the pod's disk-backed emptyDir volumes, each
// container's writable layer and logs, and the pod's directory in all.
func (h *hostStats) LocalStorage(ctx context.Context, pod *corev1.Pod) (*eviction.LocalUsage, error) {
	u := &eviction.LocalUsage{Volumes: map[string]int64{}, Containers: map[string]int64{}}
	podDir := filepath.Join(h.root, "pods", string(pod.UID))
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir != nil && v.EmptyDir.Medium != corev1.StorageMediumMemory {
			u.Volumes[v.Name], _ = dirUsage(filepath.Join(podDir, "volumes", "kubernetes.io~empty-dir", v.Name))
		}
	}
	stats, err := h.runtime.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{LabelSelector: map[string]string{labelPodUID: string(pod.UID)}})
	if err != nil {
		return nil, err
	}
	logDir := filepath.Join(h.podLogsDir, pod.Namespace+"_"+pod.Name+"_"+string(pod.UID))
	for _, cs := range stats {
		name := cs.GetAttributes().GetLabels()[labelContainerName]
		if _, seen := u.Containers[name]; seen || name == "" {
			continue
		}
		logs, _ := dirUsage(filepath.Join(logDir, name))
		u.Containers[name] = int64(cs.GetWritableLayer().GetUsedBytes().GetValue()) + logs
		u.Total += u.Containers[name]
	}
	own, _ := dirUsage(podDir)
	u.Total += own
	return u, nil
}

// podProcesses reads pids.current of the pod's cgroup (v1 pids
// controller or v2), 0 when not found.
func (h *hostStats) podProcesses(uid types.UID) int64 {
	name := "pod" + string(uid)
	for _, base := range []string{filepath.Join(h.cgroupRoot, "pids"), h.cgroupRoot} {
		for _, qos := range []string{"", "burstable", "besteffort"} {
			if v, err := readInt(filepath.Join(base, "kubepods", qos, name, "pids.current")); err == nil {
				return v
			}
		}
	}
	return 0
}

// dirUsage is the bytes and inodes under dir on dir's own filesystem
// (memory-backed volumes and other mounts are not disk).
func dirUsage(dir string) (int64, int64) {
	var root unix.Stat_t
	if unix.Lstat(dir, &root) != nil {
		return 0, 0
	}
	var bytes, inodes int64
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		var st unix.Stat_t
		if unix.Lstat(path, &st) != nil {
			return nil
		}
		if st.Dev != root.Dev {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		inodes++
		bytes += st.Blocks * 512
		return nil
	})
	return bytes, inodes
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// readKeyValues reads "key value" or "key: value [kB]" lines.
func readKeyValues(path string) map[string]int64 {
	out := map[string]int64{}
	f, err := os.Open(path)
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		if v, err := strconv.ParseInt(fields[1], 10, 64); err == nil {
			out[strings.TrimSuffix(fields[0], ":")] = v
		}
	}
	return out
}
