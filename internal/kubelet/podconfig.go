package kubelet

import (
	"bufio"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/kubelet/plan"
	"github.com/skiff-sh/skiff/internal/kubelet/podstatus"
)

// Upstream's resource conversions.
const (
	minShares     = 2
	sharesPerCPU  = 1024
	milliCPUToCPU = 1000
	quotaPeriod   = 100000
	minQuota      = 1000
)

var (
	defaultMaskedPaths = []string{"/proc/asound", "/proc/acpi", "/proc/interrupts", "/proc/kcore", "/proc/keys",
		"/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",
		"/sys/firmware", "/sys/devices/virtual/powercap"}
	defaultReadonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
)

// hostname is the pod's hostname as upstream derives it: spec.hostname or
// the pod's name, cut to 63 characters.
func hostname(pod *corev1.Pod) string {
	h := pod.Name
	if pod.Spec.Hostname != "" {
		h = pod.Spec.Hostname
	}
	if len(h) > 63 {
		h = strings.TrimRight(h[:63], "-.")
	}
	return h
}

// cgroupParent is the pod's cgroup under <root>/kubepods (cgroupfs
// layout): kubepods/pod<uid> for Guaranteed, kubepods/burstable/pod<uid>
// and kubepods/besteffort/pod<uid>; root is Options.CgroupRoot ("/").
func cgroupParent(root string, pod *corev1.Pod) string {
	if root == "" {
		root = "/"
	}
	switch podstatus.QOSClass(pod) {
	case corev1.PodQOSGuaranteed:
		return path.Join(root, "kubepods", "pod"+string(pod.UID))
	case corev1.PodQOSBestEffort:
		return path.Join(root, "kubepods", "besteffort", "pod"+string(pod.UID))
	}
	return path.Join(root, "kubepods", "burstable", "pod"+string(pod.UID))
}

// dnsConfig is the pod's resolv.conf as upstream's DNS configurer builds it:
// the base from the policy, the pod's dnsConfig appended without
// duplicates (its options replacing those of the same name), then at most
// 3 nameservers and a search line within the resolver's limits, with a
// DNSConfigForming warning on the pod when something was left out.
func (k *Kubelet) dnsConfig(pod *corev1.Pod) *runtimeapi.DNSConfig {
	policy := pod.Spec.DNSPolicy
	if policy == "" {
		policy = corev1.DNSClusterFirst
	}
	if policy == corev1.DNSClusterFirst && pod.Spec.HostNetwork {
		policy = corev1.DNSDefault
	}
	if policy == corev1.DNSClusterFirstWithHostNet {
		policy = corev1.DNSClusterFirst
	}
	host := hostResolvConf(k.opts.ResolvConf)
	cfg := &runtimeapi.DNSConfig{}
	switch policy {
	case corev1.DNSDefault:
		cfg.Servers, cfg.Searches, cfg.Options = host.servers, host.searches, host.options
	case corev1.DNSClusterFirst:
		if len(k.opts.ClusterDNS) == 0 {
			cfg.Servers, cfg.Searches, cfg.Options = host.servers, host.searches, host.options
			break
		}
		cfg.Servers = append(cfg.Servers, k.opts.ClusterDNS...)
		d := k.opts.ClusterDomain
		cfg.Searches = []string{pod.Namespace + ".svc." + d, "svc." + d, d}
		cfg.Searches = omitDuplicates(append(cfg.Searches, host.searches...))
		cfg.Options = []string{"ndots:5"}
	}
	if pod.Spec.DNSConfig != nil {
		cfg.Servers = omitDuplicates(append(cfg.Servers, pod.Spec.DNSConfig.Nameservers...))
		cfg.Searches = omitDuplicates(append(cfg.Searches, pod.Spec.DNSConfig.Searches...))
		for _, o := range pod.Spec.DNSConfig.Options {
			opt := o.Name
			if o.Value != nil {
				opt += ":" + *o.Value
			}
			cfg.Options = mergeOption(cfg.Options, opt)
		}
	}
	var omitted []string
	if len(cfg.Servers) > maxDNSNameservers {
		cfg.Servers = cfg.Servers[:maxDNSNameservers]
		omitted = append(omitted, "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: "+strings.Join(cfg.Servers, " "))
	}
	if searches, cut := searchFitsLimits(cfg.Searches); cut {
		cfg.Searches = searches
		omitted = append(omitted, "Search Line limits were exceeded, some search paths have been omitted, the applied search line is: "+strings.Join(searches, " "))
	}
	for _, m := range omitted {
		if k.recorder != nil {
			k.recorder.Event(pod, corev1.EventTypeWarning, "DNSConfigForming", m)
		}
	}
	return cfg
}

// The resolver's limits, as the API's validation and upstream's kubelet
// keep them.
const (
	maxDNSNameservers     = 3
	maxDNSSearchPaths     = 32
	maxDNSSearchListChars = 2048
	maxDNSSearchPathChars = 253
)

// searchFitsLimits keeps the first 32 search paths, drops those longer than
// a DNS name may be (some resolvers abort on them) and then cuts paths off
// the end until the line fits 2048 characters; cut says whether any went.
func searchFitsLimits(searches []string) (kept []string, cut bool) {
	if len(searches) > maxDNSSearchPaths {
		searches, cut = searches[:maxDNSSearchPaths], true
	}
	for _, s := range searches {
		if len(s) > maxDNSSearchPathChars {
			cut = true
			continue
		}
		kept = append(kept, s)
	}
	for len(kept) > 0 && len(strings.Join(kept, " ")) > maxDNSSearchListChars {
		kept, cut = kept[:len(kept)-1], true
	}
	return kept, cut
}

// omitDuplicates keeps the first of each value, in order.
func omitDuplicates(values []string) []string {
	seen := map[string]bool{}
	out := values[:0:0]
	for _, v := range values {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

func mergeOption(opts []string, o string) []string {
	name := strings.SplitN(o, ":", 2)[0]
	for i, e := range opts {
		if strings.SplitN(e, ":", 2)[0] == name {
			opts[i] = o
			return opts
		}
	}
	return append(opts, o)
}

type resolv struct{ servers, searches, options []string }

// hostResolvConf reads the host's resolv.conf as upstream's kubelet does:
// nameservers accumulate, the last search line wins (trailing dots
// dropped, "." ignored), and options accumulate with a later one replacing
// an earlier one of the same name.
func hostResolvConf(path string) resolv {
	var r resolv
	if path == "" {
		return r
	}
	f, err := os.Open(path)
	if err != nil {
		return r
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		switch fields[0] {
		case "nameserver":
			r.servers = append(r.servers, fields[1])
		case "search":
			r.searches = nil
			for _, s := range fields[1:] {
				if s != "." {
					r.searches = append(r.searches, strings.TrimSuffix(s, "."))
				}
			}
		case "options":
			for _, o := range fields[1:] {
				r.options = mergeOption(r.options, o)
			}
		}
	}
	return r
}

func (k *Kubelet) sandboxConfig(pod *corev1.Pod, attempt int) *runtimeapi.PodSandboxConfig {
	labels := map[string]string{}
	for key, v := range pod.Labels {
		labels[key] = v
	}
	labels[labelPodName] = pod.Name
	labels[labelPodNamespace] = pod.Namespace
	labels[labelPodUID] = string(pod.UID)
	annotations := map[string]string{}
	for key, v := range pod.Annotations {
		annotations[key] = v
	}
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID), Attempt: uint32(attempt)},
		Labels:       labels,
		Annotations:  annotations,
		LogDirectory: podLogDir(k.opts.PodLogsDir, pod),
		DnsConfig:    k.dnsConfig(pod),
	}
	if !pod.Spec.HostNetwork {
		cfg.Hostname = hostname(pod)
	}
	for _, c := range allContainers(pod) {
		for _, p := range c.Ports {
			if p.HostPort <= 0 {
				continue
			}
			proto := runtimeapi.Protocol_TCP
			switch p.Protocol {
			case corev1.ProtocolUDP:
				proto = runtimeapi.Protocol_UDP
			case corev1.ProtocolSCTP:
				proto = runtimeapi.Protocol_SCTP
			}
			cfg.PortMappings = append(cfg.PortMappings, &runtimeapi.PortMapping{Protocol: proto, ContainerPort: p.ContainerPort,
				HostPort: p.HostPort, HostIp: p.HostIP})
		}
	}
	ns := &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD}
	if pod.Spec.HostNetwork {
		ns.Network = runtimeapi.NamespaceMode_NODE
	}
	if pod.Spec.HostPID {
		ns.Pid = runtimeapi.NamespaceMode_NODE
	} else if pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace {
		ns.Pid = runtimeapi.NamespaceMode_POD
	}
	if pod.Spec.HostIPC {
		ns.Ipc = runtimeapi.NamespaceMode_NODE
	}
	sc := &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: ns, Privileged: anyPrivileged(pod)}
	if psc := pod.Spec.SecurityContext; psc != nil {
		if psc.RunAsUser != nil {
			sc.RunAsUser = &runtimeapi.Int64Value{Value: *psc.RunAsUser}
		}
		if psc.RunAsGroup != nil {
			sc.RunAsGroup = &runtimeapi.Int64Value{Value: *psc.RunAsGroup}
		}
		sc.SupplementalGroups = append(sc.SupplementalGroups, psc.SupplementalGroups...)
		if psc.FSGroup != nil {
			sc.SupplementalGroups = append(sc.SupplementalGroups, *psc.FSGroup)
		}
	}
	cfg.Linux = &runtimeapi.LinuxPodSandboxConfig{CgroupParent: cgroupParent(k.opts.CgroupRoot, pod), SecurityContext: sc, Sysctls: map[string]string{}}
	if psc := pod.Spec.SecurityContext; psc != nil {
		for _, s := range psc.Sysctls {
			cfg.Linux.Sysctls[s.Name] = s.Value
		}
	}
	return cfg
}

func anyPrivileged(pod *corev1.Pod) bool {
	for _, c := range allContainers(pod) {
		if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
			return true
		}
	}
	return false
}

func allContainers(pod *corev1.Pod) []*corev1.Container {
	var out []*corev1.Container
	for i := range pod.Spec.InitContainers {
		out = append(out, &pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		out = append(out, &pod.Spec.Containers[i])
	}
	return out
}

// linuxResources converts a container's requests and limits as upstream
// does: CPU shares from the request, CFS quota from the limit, the memory
// limit, and the OOM score by QoS class.
func (k *Kubelet) linuxResources(pod *corev1.Pod, c *corev1.Container) *runtimeapi.LinuxContainerResources {
	r := &runtimeapi.LinuxContainerResources{}
	cpuReq := c.Resources.Requests.Cpu().MilliValue()
	cpuLim := c.Resources.Limits.Cpu().MilliValue()
	if cpuReq == 0 && cpuLim > 0 {
		cpuReq = cpuLim
	}
	shares := cpuReq * sharesPerCPU / milliCPUToCPU
	if shares < minShares {
		shares = minShares
	}
	r.CpuShares = shares
	if cpuLim > 0 {
		quota := cpuLim * quotaPeriod / milliCPUToCPU
		if quota < minQuota {
			quota = minQuota
		}
		r.CpuQuota = quota
		r.CpuPeriod = quotaPeriod
	}
	if mem := c.Resources.Limits.Memory().Value(); mem > 0 {
		r.MemoryLimitInBytes = mem
	}
	r.OomScoreAdj = oomScoreAdj(pod, c, k.memoryCapacity())
	return r
}

func oomScoreAdj(pod *corev1.Pod, c *corev1.Container, capacity int64) int64 {
	switch podstatus.QOSClass(pod) {
	case corev1.PodQOSGuaranteed:
		return -997
	case corev1.PodQOSBestEffort:
		return 1000
	}
	if capacity <= 0 {
		return 999
	}
	adj := 1000 - (1000*c.Resources.Requests.Memory().Value())/capacity
	if adj < 3 {
		adj = 3
	}
	if adj > 999 {
		adj = 999
	}
	return adj
}

func (k *Kubelet) containerSecurity(pod *corev1.Pod, c *corev1.Container) (*runtimeapi.LinuxContainerSecurityContext, error) {
	sc := &runtimeapi.LinuxContainerSecurityContext{
		NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD},
		MaskedPaths:      defaultMaskedPaths,
		ReadonlyPaths:    defaultReadonlyPaths,
		Seccomp:          &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined},
	}
	if pod.Spec.HostNetwork {
		sc.NamespaceOptions.Network = runtimeapi.NamespaceMode_NODE
	}
	if pod.Spec.HostPID {
		sc.NamespaceOptions.Pid = runtimeapi.NamespaceMode_NODE
	} else if pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace {
		sc.NamespaceOptions.Pid = runtimeapi.NamespaceMode_POD
	}
	if pod.Spec.HostIPC {
		sc.NamespaceOptions.Ipc = runtimeapi.NamespaceMode_NODE
	}
	psc := pod.Spec.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	csc := c.SecurityContext
	if csc == nil {
		csc = &corev1.SecurityContext{}
	}
	runAsUser, runAsGroup, runAsNonRoot := psc.RunAsUser, psc.RunAsGroup, psc.RunAsNonRoot
	if csc.RunAsUser != nil {
		runAsUser = csc.RunAsUser
	}
	if csc.RunAsGroup != nil {
		runAsGroup = csc.RunAsGroup
	}
	if csc.RunAsNonRoot != nil {
		runAsNonRoot = csc.RunAsNonRoot
	}
	if runAsUser != nil {
		sc.RunAsUser = &runtimeapi.Int64Value{Value: *runAsUser}
		if runAsNonRoot != nil && *runAsNonRoot && *runAsUser == 0 {
			return nil, fmt.Errorf("container's runAsUser breaks non-root policy (pod: %q, container: %s)", pod.Namespace+"/"+pod.Name, c.Name)
		}
	}
	if runAsGroup != nil {
		sc.RunAsGroup = &runtimeapi.Int64Value{Value: *runAsGroup}
	}
	sc.SupplementalGroups = append(sc.SupplementalGroups, psc.SupplementalGroups...)
	if psc.FSGroup != nil {
		sc.SupplementalGroups = append(sc.SupplementalGroups, *psc.FSGroup)
	}
	if csc.Privileged != nil && *csc.Privileged {
		sc.Privileged = true
		sc.MaskedPaths, sc.ReadonlyPaths = nil, nil
	}
	if csc.ProcMount != nil && *csc.ProcMount == corev1.UnmaskedProcMount {
		sc.MaskedPaths, sc.ReadonlyPaths = []string{}, []string{}
	}
	if csc.Capabilities != nil {
		sc.Capabilities = &runtimeapi.Capability{}
		for _, cp := range csc.Capabilities.Add {
			sc.Capabilities.AddCapabilities = append(sc.Capabilities.AddCapabilities, capName(cp))
		}
		for _, cp := range csc.Capabilities.Drop {
			sc.Capabilities.DropCapabilities = append(sc.Capabilities.DropCapabilities, capName(cp))
		}
	}
	if csc.ReadOnlyRootFilesystem != nil {
		sc.ReadonlyRootfs = *csc.ReadOnlyRootFilesystem
	}
	if csc.AllowPrivilegeEscalation != nil {
		sc.NoNewPrivs = !*csc.AllowPrivilegeEscalation
	}
	seccomp := csc.SeccompProfile
	if seccomp == nil {
		seccomp = psc.SeccompProfile
	}
	if seccomp != nil && seccomp.Type == corev1.SeccompProfileTypeRuntimeDefault {
		sc.Seccomp = &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
	}
	return sc, nil
}

// capName is the CRI form of a capability: without the CAP_ prefix
// (containerd adds it), upper case as containerd compares "ALL".
func capName(c corev1.Capability) string {
	return strings.TrimPrefix(strings.ToUpper(string(c)), "CAP_")
}

// containerKind labels a container for humans and restarts.
func containerKind(pod *corev1.Pod, name string) string {
	if ephemeralSpec(pod, name) != nil {
		return "ephemeral"
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			if plan.IsSidecar(&pod.Spec.InitContainers[i]) {
				return "sidecar"
			}
			return "init"
		}
	}
	return "regular"
}

// containerLogPath is the container's log, relative to the pod log dir.
func containerLogPath(name string, attempt int) string {
	return filepath.Join(name, strconv.Itoa(attempt)+".log")
}
