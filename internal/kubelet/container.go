package kubelet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/kubelet/plan"
)

// containerConfig is the CRI config of one run of a container.
func (k *Kubelet) containerConfig(ctx context.Context, pod *corev1.Pod, c *corev1.Container, restartCount int, imageRef string,
	volumePaths map[string]string, imageVolumes map[string]*runtimeapi.ImageSpec, podIPs []string) (*runtimeapi.ContainerConfig, error) {
	env, err := k.makeEnv(ctx, pod, c, podIPs)
	if err != nil {
		return nil, err
	}
	lookup := func(name string) (string, bool) {
		for i := len(env) - 1; i >= 0; i-- {
			if env[i][0] == name {
				return env[i][1], true
			}
		}
		return "", false
	}
	cfg := &runtimeapi.ContainerConfig{
		Metadata:   &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: uint32(restartCount)},
		Image:      &runtimeapi.ImageSpec{Image: imageRef, UserSpecifiedImage: c.Image},
		WorkingDir: c.WorkingDir,
		LogPath:    containerLogPath(c.Name, restartCount),
		Stdin:      c.Stdin,
		StdinOnce:  c.StdinOnce,
		Tty:        c.TTY,
		Labels: map[string]string{
			labelPodName:       pod.Name,
			labelPodNamespace:  pod.Namespace,
			labelPodUID:        string(pod.UID),
			labelContainerName: c.Name,
			labelContainerType: containerKind(pod, c.Name),
		},
		Annotations: map[string]string{
			annotationHash:              plan.Hash(c),
			annotationRestartCount:      strconv.Itoa(restartCount),
			annotationTermMessagePath:   c.TerminationMessagePath,
			annotationTermMessagePolicy: string(c.TerminationMessagePolicy),
			annotationSpecImage:         c.Image,
		},
	}
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		cfg.Annotations[annotationGracePeriod] = strconv.FormatInt(*pod.Spec.TerminationGracePeriodSeconds, 10)
	}
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		cfg.Annotations[annotationPreStop] = marshalHandler(c.Lifecycle.PreStop)
	}
	for _, a := range c.Command {
		cfg.Command = append(cfg.Command, expand(a, lookup))
	}
	for _, a := range c.Args {
		cfg.Args = append(cfg.Args, expand(a, lookup))
	}
	for _, e := range env {
		cfg.Envs = append(cfg.Envs, &runtimeapi.KeyValue{Key: e[0], Value: []byte(e[1])})
	}

	mounts, err := k.mounts(pod, c, volumePaths, imageVolumes, lookup)
	if err != nil {
		return nil, err
	}
	// The termination message file.
	if c.TerminationMessagePath != "" && !mountedAt(mounts, c.TerminationMessagePath) {
		dir := filepath.Join(k.volumes.PodDir(string(pod.UID)), "containers", c.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		file := filepath.Join(dir, randomName())
		if err := os.WriteFile(file, nil, 0o666); err != nil {
			return nil, err
		}
		_ = os.Chmod(file, 0o666)
		mounts = append(mounts, &runtimeapi.Mount{ContainerPath: c.TerminationMessagePath, HostPath: file})
		cfg.Annotations[annotationTermMessageFile] = file
	}
	cfg.Mounts = mounts

	sc, err := k.containerSecurity(pod, c)
	if err != nil {
		return nil, err
	}
	cfg.Linux = &runtimeapi.LinuxContainerConfig{Resources: k.linuxResources(pod, c), SecurityContext: sc}
	k.targetNamespace(ctx, pod, c.Name, sc)
	return cfg, nil
}

func randomName() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func mountedAt(mounts []*runtimeapi.Mount, path string) bool {
	for _, m := range mounts {
		if m.ContainerPath == path {
			return true
		}
	}
	return false
}

// mounts are the container's volume mounts (with subPath and
// subPathExpr) and the pod's hosts file. An image volume is the runtime's
// to mount (read-only, subPath inside the image), the rest are bind
// mounts of their host directories.
func (k *Kubelet) mounts(pod *corev1.Pod, c *corev1.Container, volumePaths map[string]string, imageVolumes map[string]*runtimeapi.ImageSpec,
	lookup func(string) (string, bool)) ([]*runtimeapi.Mount, error) {
	var out []*runtimeapi.Mount
	readOnly := readOnlyVolumes(pod)
	for _, vm := range c.VolumeMounts {
		host, ok := volumePaths[vm.Name]
		if !ok {
			return nil, fmt.Errorf("cannot find volume %q to mount into container %q", vm.Name, c.Name)
		}
		sub := vm.SubPath
		if vm.SubPathExpr != "" {
			sub = expand(vm.SubPathExpr, lookup)
		}
		if sub != "" {
			if filepath.IsAbs(sub) || strings.HasPrefix(filepath.Clean(sub), "..") {
				return nil, fmt.Errorf("invalid subpath %q", sub)
			}
		}
		if image := imageVolumes[vm.Name]; image != nil {
			out = append(out, &runtimeapi.Mount{ContainerPath: vm.MountPath, Image: image, ImageSubPath: sub, Readonly: true})
			continue
		}
		if sub != "" {
			p := filepath.Join(host, sub)
			if _, err := os.Stat(p); os.IsNotExist(err) {
				if err := os.MkdirAll(p, 0o750); err != nil {
					return nil, err
				}
			}
			// A subPath of a projected volume resolves its ..data symlinks
			// now, as upstream's bind mount does.
			if resolved, err := filepath.EvalSymlinks(p); err == nil {
				p = resolved
			}
			host = p
		}
		m := &runtimeapi.Mount{ContainerPath: vm.MountPath, HostPath: host, Readonly: vm.ReadOnly || readOnly[vm.Name]}
		if vm.MountPropagation != nil {
			switch *vm.MountPropagation {
			case corev1.MountPropagationHostToContainer:
				m.Propagation = runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER
			case corev1.MountPropagationBidirectional:
				m.Propagation = runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL
			}
		}
		out = append(out, m)
	}
	if !mountedAt(out, "/etc/hosts") {
		hosts := k.etcHostsPath(pod)
		if _, err := os.Stat(hosts); err == nil {
			out = append(out, &runtimeapi.Mount{ContainerPath: "/etc/hosts", HostPath: hosts})
		}
	}
	return out, nil
}

func (k *Kubelet) etcHostsPath(pod *corev1.Pod) string {
	return filepath.Join(k.volumes.PodDir(string(pod.UID)), "etc-hosts")
}

// writeEtcHosts writes the pod's /etc/hosts as upstream's kubelet manages
// it: localhost entries, the pod's own name(s), and hostAliases. Host
// network pods get the host's file plus the aliases.
func (k *Kubelet) writeEtcHosts(pod *corev1.Pod, podIPs []string) error {
	var b strings.Builder
	if pod.Spec.HostNetwork {
		host, _ := os.ReadFile("/etc/hosts")
		b.Write(host)
	} else {
		b.WriteString("# Kubernetes-managed hosts file.\n")
		b.WriteString("127.0.0.1\tlocalhost\n")
		b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
		b.WriteString("fe00::\tip6-localnet\n")
		b.WriteString("fe00::\tip6-mcastprefix\n")
		b.WriteString("fe00::1\tip6-allnodes\n")
		b.WriteString("fe00::2\tip6-allrouters\n")
		name := hostname(pod)
		for _, ip := range podIPs {
			if pod.Spec.Subdomain != "" {
				fmt.Fprintf(&b, "%s\t%s.%s.%s.svc.%s\t%s\n", ip, name, pod.Spec.Subdomain, pod.Namespace, k.opts.ClusterDomain, name)
			} else {
				fmt.Fprintf(&b, "%s\t%s\n", ip, name)
			}
		}
	}
	if len(pod.Spec.HostAliases) > 0 {
		b.WriteString("\n# Entries added by HostAliases.\n")
		for _, a := range pod.Spec.HostAliases {
			fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
		}
	}
	path := k.etcHostsPath(pod)
	if old, err := os.ReadFile(path); err == nil && string(old) == b.String() {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// readOnlyVolumes are the pod's volumes mounted read-only whatever the
// volumeMount says, as upstream's volume plugins mount them: the kubelet's
// own projections (configMap, secret, downwardAPI, projected: their files
// are only ever replaced by the kubelet) and a persistentVolumeClaim the
// pod asks for readOnly.
func readOnlyVolumes(pod *corev1.Pod) map[string]bool {
	out := map[string]bool{}
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.ConfigMap != nil, v.Secret != nil, v.DownwardAPI != nil, v.Projected != nil:
			out[v.Name] = true
		case v.PersistentVolumeClaim != nil:
			out[v.Name] = v.PersistentVolumeClaim.ReadOnly
		}
	}
	return out
}
