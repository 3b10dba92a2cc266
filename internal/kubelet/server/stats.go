package server

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The Summary API's JSON shape (k8s.io/kubelet/pkg/apis/stats/v1alpha1),
// with the fields Skiff fills.

// Summary is the /stats/summary document.
type Summary struct {
	Node NodeStats  `json:"node"`
	Pods []PodStats `json:"pods"`
}

// NodeStats are the node's totals.
type NodeStats struct {
	NodeName  string        `json:"nodeName"`
	StartTime metav1.Time   `json:"startTime"`
	CPU       *CPUStats     `json:"cpu,omitempty"`
	Memory    *MemoryStats  `json:"memory,omitempty"`
	Fs        *FsStats      `json:"fs,omitempty"`
	Runtime   *RuntimeStats `json:"runtime,omitempty"`
}

// RuntimeStats are the runtime's filesystems.
type RuntimeStats struct {
	ImageFs *FsStats `json:"imageFs,omitempty"`
}

// PodStats are one pod's totals and containers.
type PodStats struct {
	PodRef           PodReference     `json:"podRef"`
	StartTime        metav1.Time      `json:"startTime"`
	Containers       []ContainerStats `json:"containers"`
	CPU              *CPUStats        `json:"cpu,omitempty"`
	Memory           *MemoryStats     `json:"memory,omitempty"`
	EphemeralStorage *FsStats         `json:"ephemeral-storage,omitempty"`
}

// PodReference names a pod.
type PodReference struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	UID       string `json:"uid"`
}

// ContainerStats are one container's usage.
type ContainerStats struct {
	Name      string       `json:"name"`
	StartTime metav1.Time  `json:"startTime"`
	CPU       *CPUStats    `json:"cpu,omitempty"`
	Memory    *MemoryStats `json:"memory,omitempty"`
	Rootfs    *FsStats     `json:"rootfs,omitempty"`
}

// CPUStats is CPU usage at a time.
type CPUStats struct {
	Time                 metav1.Time `json:"time"`
	UsageNanoCores       *uint64     `json:"usageNanoCores,omitempty"`
	UsageCoreNanoSeconds *uint64     `json:"usageCoreNanoSeconds,omitempty"`
}

// MemoryStats is memory usage at a time.
type MemoryStats struct {
	Time            metav1.Time `json:"time"`
	AvailableBytes  *uint64     `json:"availableBytes,omitempty"`
	UsageBytes      *uint64     `json:"usageBytes,omitempty"`
	WorkingSetBytes *uint64     `json:"workingSetBytes,omitempty"`
	RSSBytes        *uint64     `json:"rssBytes,omitempty"`
	PageFaults      *uint64     `json:"pageFaults,omitempty"`
	MajorPageFaults *uint64     `json:"majorPageFaults,omitempty"`
}

// FsStats is a filesystem's usage at a time.
type FsStats struct {
	Time           metav1.Time `json:"time"`
	AvailableBytes *uint64     `json:"availableBytes,omitempty"`
	CapacityBytes  *uint64     `json:"capacityBytes,omitempty"`
	UsedBytes      *uint64     `json:"usedBytes,omitempty"`
	InodesFree     *uint64     `json:"inodesFree,omitempty"`
	Inodes         *uint64     `json:"inodes,omitempty"`
	InodesUsed     *uint64     `json:"inodesUsed,omitempty"`
}

func u64(v *runtimeapi.UInt64Value) *uint64 {
	if v == nil {
		return nil
	}
	x := v.Value
	return &x
}

func nanoTime(ns int64) metav1.Time { return metav1.NewTime(time.Unix(0, ns)) }

// containerUsage is the CRI stats of one container with its identity.
type containerUsage struct {
	id, name, pod, namespace, uid, image string
	stats                                *runtimeapi.ContainerStats
}

// containerUsages lists every container's stats with its pod labels.
func (s *Server) containerUsages(ctx context.Context) ([]containerUsage, error) {
	stats, err := s.runtime.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{})
	if err != nil {
		return nil, err
	}
	images := map[string]string{}
	if cs, err := s.runtime.ListContainers(ctx, nil); err == nil {
		for _, c := range cs {
			images[c.Id] = c.GetImage().GetImage()
		}
	}
	out := make([]containerUsage, 0, len(stats))
	for _, st := range stats {
		a := st.GetAttributes()
		if a == nil {
			continue
		}
		l := a.GetLabels()
		out = append(out, containerUsage{
			id: a.Id, name: a.GetMetadata().GetName(), image: images[a.Id],
			pod: l["io.kubernetes.pod.name"], namespace: l["io.kubernetes.pod.namespace"], uid: l["io.kubernetes.pod.uid"],
			stats: st,
		})
	}
	return out, nil
}

func (s *Server) serveSummary(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	now := metav1.NewTime(s.opts.Clock.Now())
	sum := Summary{Node: NodeStats{NodeName: s.opts.NodeName, StartTime: bootTime()}, Pods: []PodStats{}}
	sum.Node.CPU = nodeCPU(now)
	sum.Node.Memory = nodeMemory(now)
	sum.Node.Fs = statFs("/", now)
	if s.images != nil {
		if fs, err := s.images.ImageFsInfo(ctx); err == nil && len(fs.GetImageFilesystems()) > 0 {
			f := fs.ImageFilesystems[0]
			img := statFs(f.GetFsId().GetMountpoint(), now)
			if img == nil {
				img = &FsStats{Time: now}
			}
			img.UsedBytes, img.InodesUsed = u64(f.UsedBytes), u64(f.InodesUsed)
			sum.Node.Runtime = &RuntimeStats{ImageFs: img}
		}
	}
	usages, err := s.containerUsages(ctx)
	if err != nil {
		http.Error(w, "list container stats: "+err.Error(), http.StatusInternalServerError)
		return
	}
	byUID := map[string][]containerUsage{}
	for _, u := range usages {
		byUID[u.uid] = append(byUID[u.uid], u)
	}
	for _, pod := range s.host.GetPods() {
		ps := PodStats{PodRef: PodReference{Name: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID)}, Containers: []ContainerStats{}}
		if pod.Status.StartTime != nil {
			ps.StartTime = *pod.Status.StartTime
		}
		var cpu, mem, ws uint64
		var haveCPU, haveMem bool
		for _, u := range byUID[string(pod.UID)] {
			if !runningIn(pod, u.id) {
				continue
			}
			cs := ContainerStats{Name: u.name, StartTime: containerStart(pod, u.name)}
			if c := u.stats.GetCpu(); c != nil {
				cs.CPU = &CPUStats{Time: nanoTime(c.Timestamp), UsageNanoCores: u64(c.UsageNanoCores), UsageCoreNanoSeconds: u64(c.UsageCoreNanoSeconds)}
				if c.UsageCoreNanoSeconds != nil {
					cpu += c.UsageCoreNanoSeconds.Value
					haveCPU = true
				}
			}
			if m := u.stats.GetMemory(); m != nil {
				cs.Memory = &MemoryStats{Time: nanoTime(m.Timestamp), AvailableBytes: u64(m.AvailableBytes), UsageBytes: u64(m.UsageBytes),
					WorkingSetBytes: u64(m.WorkingSetBytes), RSSBytes: u64(m.RssBytes), PageFaults: u64(m.PageFaults), MajorPageFaults: u64(m.MajorPageFaults)}
				if m.UsageBytes != nil {
					mem += m.UsageBytes.Value
					haveMem = true
				}
				if m.WorkingSetBytes != nil {
					ws += m.WorkingSetBytes.Value
				}
			}
			if fs := u.stats.GetWritableLayer(); fs != nil {
				cs.Rootfs = &FsStats{Time: nanoTime(fs.Timestamp), UsedBytes: u64(fs.UsedBytes), InodesUsed: u64(fs.InodesUsed)}
			}
			ps.Containers = append(ps.Containers, cs)
		}
		if haveCPU {
			ps.CPU = &CPUStats{Time: now, UsageCoreNanoSeconds: &cpu}
		}
		if haveMem {
			ps.Memory = &MemoryStats{Time: now, UsageBytes: &mem, WorkingSetBytes: &ws}
		}
		sum.Pods = append(sum.Pods, ps)
	}
	writeJSON(w, sum)
}

// runningIn tells whether a runtime container is the pod's current
// instance (its status names it, or the status does not know yet).
func runningIn(pod *corev1.Pod, id string) bool {
	known := false
	for _, list := range [][]corev1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses, pod.Status.EphemeralContainerStatuses} {
		for _, cs := range list {
			if cs.ContainerID == "" {
				continue
			}
			known = true
			if runtimeID(cs.ContainerID) == id {
				return true
			}
		}
	}
	return !known
}

func containerStart(pod *corev1.Pod, name string) metav1.Time {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == name && cs.State.Running != nil {
			return cs.State.Running.StartedAt
		}
	}
	return metav1.Time{}
}

// bootTime is when the node booted, from /proc/stat.
func bootTime() metav1.Time {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return metav1.Time{}
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "btime "); ok {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				return metav1.NewTime(time.Unix(n, 0))
			}
		}
	}
	return metav1.Time{}
}

// nodeCPU is the node's CPU time from /proc/stat (USER_HZ is 100 on Linux).
func nodeCPU(now metav1.Time) *CPUStats {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return nil
	}
	line, _, _ := strings.Cut(string(data), "\n")
	fields := strings.Fields(line)
	if len(fields) < 8 || fields[0] != "cpu" {
		return nil
	}
	var ticks uint64
	// user nice system idle iowait irq softirq steal: all but idle and iowait
	for i, f := range fields[1:] {
		if i == 3 || i == 4 || i > 7 {
			continue
		}
		n, _ := strconv.ParseUint(f, 10, 64)
		ticks += n
	}
	ns := ticks * uint64(10*time.Millisecond)
	return &CPUStats{Time: now, UsageCoreNanoSeconds: &ns}
}

// nodeMemory is the node's memory from /proc/meminfo; the working set is
// what is not available.
func nodeMemory(now metav1.Time) *MemoryStats {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	vals := map[string]uint64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) == 0 {
			continue
		}
		n, _ := strconv.ParseUint(fields[0], 10, 64)
		vals[k] = n * 1024
	}
	total, avail, free := vals["MemTotal"], vals["MemAvailable"], vals["MemFree"]
	usage, ws := total-free, total-avail
	return &MemoryStats{Time: now, AvailableBytes: &avail, UsageBytes: &usage, WorkingSetBytes: &ws}
}

// statFs is a filesystem's capacity and use.
func statFs(path string, now metav1.Time) *FsStats {
	if path == "" {
		return nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return nil
	}
	bs := uint64(st.Bsize)
	capacity, avail := st.Blocks*bs, st.Bavail*bs
	used := (st.Blocks - st.Bfree) * bs
	inodes, ifree := st.Files, st.Ffree
	iused := inodes - ifree
	return &FsStats{Time: now, AvailableBytes: &avail, CapacityBytes: &capacity, UsedBytes: &used, Inodes: &inodes, InodesFree: &ifree, InodesUsed: &iused}
}

// cadvisorHandler serves cAdvisor's container_* names for CPU and memory,
// from CRI stats at scrape time.
func (s *Server) cadvisorHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(&cadvisorCollector{s: s})
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

var (
	cadvisorLabels = []string{"container", "id", "image", "name", "namespace", "pod"}
	cpuUsageDesc   = prometheus.NewDesc("container_cpu_usage_seconds_total", "Cumulative cpu time consumed in seconds.", append(append([]string{}, cadvisorLabels...), "cpu"), nil)
	memWorkingDesc = prometheus.NewDesc("container_memory_working_set_bytes", "Current working set in bytes.", cadvisorLabels, nil)
	memUsageDesc   = prometheus.NewDesc("container_memory_usage_bytes", "Current memory usage in bytes, including all memory regardless of when it was accessed", cadvisorLabels, nil)
	memRSSDesc     = prometheus.NewDesc("container_memory_rss", "Size of RSS in bytes.", cadvisorLabels, nil)
	fsUsageDesc    = prometheus.NewDesc("container_fs_usage_bytes", "Number of bytes that are consumed by the container on this filesystem.", cadvisorLabels, nil)
)

type cadvisorCollector struct{ s *Server }

func (c *cadvisorCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{cpuUsageDesc, memWorkingDesc, memUsageDesc, memRSSDesc, fsUsageDesc} {
		ch <- d
	}
}

func (c *cadvisorCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	usages, err := c.s.containerUsages(ctx)
	if err != nil {
		return
	}
	for _, u := range usages {
		labels := []string{u.name, u.id, u.image, u.id, u.namespace, u.pod}
		emit := func(d *prometheus.Desc, t prometheus.ValueType, ts int64, v *runtimeapi.UInt64Value, scale float64, extra ...string) {
			if v == nil {
				return
			}
			m := prometheus.MustNewConstMetric(d, t, float64(v.Value)*scale, append(append([]string{}, labels...), extra...)...)
			if ts > 0 {
				m = prometheus.NewMetricWithTimestamp(time.Unix(0, ts), m)
			}
			ch <- m
		}
		if cpu := u.stats.GetCpu(); cpu != nil {
			emit(cpuUsageDesc, prometheus.CounterValue, cpu.Timestamp, cpu.UsageCoreNanoSeconds, 1e-9, "total")
		}
		if m := u.stats.GetMemory(); m != nil {
			emit(memWorkingDesc, prometheus.GaugeValue, m.Timestamp, m.WorkingSetBytes, 1)
			emit(memUsageDesc, prometheus.GaugeValue, m.Timestamp, m.UsageBytes, 1)
			emit(memRSSDesc, prometheus.GaugeValue, m.Timestamp, m.RssBytes, 1)
		}
		if fs := u.stats.GetWritableLayer(); fs != nil {
			emit(fsUsageDesc, prometheus.GaugeValue, fs.Timestamp, fs.UsedBytes, 1)
		}
	}
}
