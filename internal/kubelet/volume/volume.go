// Package volume sets up a pod's volumes on the node: emptyDir (disk, or
// tmpfs for medium Memory), configMap and secret (kept up to date through
// an atomic writer with a ..data symlink, as upstream), downwardAPI,
// projected (configMap, secret, downwardAPI, serviceAccountToken,
// clusterTrustBundle and podCertificate sources), and hostPath, each
// under <root>/pods/<uid>/volumes/<plugin>/<name>. Setup is idempotent and
// is called at every pod sync, so sources that change are written again.
package volume

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
)

// Getter reads the sources of configMap, secret and
// persistentVolumeClaim volumes.
type Getter interface {
	ConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error)
	Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error)
	PersistentVolumeClaim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error)
	PersistentVolume(ctx context.Context, name string) (*corev1.PersistentVolume, error)
}

// Manager sets up and tears down pod volumes.
type Manager struct {
	root   string
	getter Getter
	// Tokens fills serviceAccountToken sources (projected_token.go); nil
	// leaves them out.
	Tokens *Tokens
	// Certificates fills podCertificate sources (podcertificate.go) and
	// TrustBundles clusterTrustBundle sources (trustbundle.go); nil
	// makes such a volume fail to set up.
	Certificates *Certificates
	TrustBundles TrustBundleGetter
	// Allocatable sizes a Memory emptyDir without a sizeLimit and resolves
	// resourceFieldRef limits a container does not set.
	Allocatable func() corev1.ResourceList
}

// NewManager returns a Manager keeping pod directories under root.
func NewManager(root string, g Getter) *Manager {
	return &Manager{root: root, getter: g, Allocatable: func() corev1.ResourceList { return nil }}
}

// PodDir is the pod's directory on the node.
func (m *Manager) PodDir(uid string) string { return filepath.Join(m.root, "pods", uid) }

// Error is a volume that could not be set up; its message is upstream's
// FailedMount event text.
type Error struct {
	Volume string
	Err    error
}

func (e *Error) Error() string {
	return fmt.Sprintf("MountVolume.SetUp failed for volume %q : %v", e.Volume, e.Err)
}
func (e *Error) Unwrap() error { return e.Err }

// Setup prepares every volume of the pod and returns the host path of
// each by name.
func (m *Manager) Setup(ctx context.Context, pod *corev1.Pod) (map[string]string, error) {
	paths := make(map[string]string, len(pod.Spec.Volumes))
	var errs []error
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		p, err := m.setup(ctx, pod, v)
		if err == nil {
			err = applyFSGroup(pod, v, p)
		}
		if err != nil {
			errs = append(errs, &Error{Volume: v.Name, Err: err})
			continue
		}
		paths[v.Name] = p
	}
	return paths, errors.Join(errs...)
}

func (m *Manager) dir(pod *corev1.Pod, plugin, name string) string {
	return filepath.Join(m.PodDir(string(pod.UID)), "volumes", plugin, name)
}

func (m *Manager) setup(ctx context.Context, pod *corev1.Pod, v *corev1.Volume) (string, error) {
	switch {
	case v.EmptyDir != nil:
		dir := m.dir(pod, "kubernetes.io~empty-dir", v.Name)
		if err := os.MkdirAll(dir, 0o777); err != nil {
			return "", err
		}
		if v.EmptyDir.Medium == corev1.StorageMediumMemory {
			size := int64(0)
			if v.EmptyDir.SizeLimit != nil {
				size = v.EmptyDir.SizeLimit.Value()
			} else if q, ok := m.Allocatable()[corev1.ResourceMemory]; ok {
				size = q.Value()
			}
			if err := mountTmpfs(dir, size); err != nil {
				return "", err
			}
		}
		_ = os.Chmod(dir, 0o777)
		return dir, nil
	case v.HostPath != nil:
		return v.HostPath.Path, checkHostPath(v.HostPath)
	case v.ConfigMap != nil:
		dir := m.dir(pod, "kubernetes.io~configmap", v.Name)
		payload, err := m.configMapPayload(ctx, pod.Namespace, v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.DefaultMode, v.ConfigMap.Optional)
		if err != nil {
			return "", err
		}
		_, err = WriteAtomic(dir, payload)
		return dir, err
	case v.Secret != nil:
		dir := m.dir(pod, "kubernetes.io~secret", v.Name)
		payload, err := m.secretPayload(ctx, pod.Namespace, v.Secret.SecretName, v.Secret.Items, v.Secret.DefaultMode, v.Secret.Optional)
		if err != nil {
			return "", err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		if err := mountTmpfs(dir, 0); err != nil {
			return "", err
		}
		_, err = WriteAtomic(dir, payload)
		return dir, err
	case v.DownwardAPI != nil:
		dir := m.dir(pod, "kubernetes.io~downward-api", v.Name)
		payload, err := m.downwardPayload(pod, v.DownwardAPI.Items, v.DownwardAPI.DefaultMode)
		if err != nil {
			return "", err
		}
		_, err = WriteAtomic(dir, payload)
		return dir, err
	case v.Projected != nil:
		dir := m.dir(pod, "kubernetes.io~projected", v.Name)
		payload := map[string]File{}
		for i, src := range v.Projected.Sources {
			var part map[string]File
			var err error
			switch {
			case src.ConfigMap != nil:
				part, err = m.configMapPayload(ctx, pod.Namespace, src.ConfigMap.Name, src.ConfigMap.Items, v.Projected.DefaultMode, src.ConfigMap.Optional)
			case src.Secret != nil:
				part, err = m.secretPayload(ctx, pod.Namespace, src.Secret.Name, src.Secret.Items, v.Projected.DefaultMode, src.Secret.Optional)
			case src.DownwardAPI != nil:
				part, err = m.downwardPayload(pod, src.DownwardAPI.Items, v.Projected.DefaultMode)
			case src.ServiceAccountToken != nil:
				part, err = m.tokenPayload(ctx, pod, src.ServiceAccountToken, v.Projected.DefaultMode) // projected_token.go
			case src.ClusterTrustBundle != nil:
				part, err = m.trustBundlePayload(ctx, src.ClusterTrustBundle, v.Projected.DefaultMode) // trustbundle.go
			case src.PodCertificate != nil:
				part, err = m.certificatePayload(ctx, pod, v.Name, i, src.PodCertificate, v.Projected.DefaultMode) // podcertificate.go
			}
			if err != nil {
				return "", err
			}
			for k, f := range part {
				payload[k] = f
			}
		}
		// On tmpfs, as upstream: tokens and private keys stay off disk.
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		if err := mountTmpfs(dir, 0); err != nil {
			return "", err
		}
		_, err := WriteAtomic(dir, payload)
		return dir, err
	case v.PersistentVolumeClaim != nil:
		return m.claimPath(ctx, pod.Namespace, v.PersistentVolumeClaim.ClaimName)
	case v.Ephemeral != nil:
		return m.ephemeralPath(ctx, pod, v)
	case v.Image != nil:
		// The runtime mounts the image itself (see the kubelet's mounts).
		return "", nil
	}
	return "", fmt.Errorf("unsupported volume type")
}

// claimPath resolves a claim bound (spec.volumeName) to a hostPath or
// local PersistentVolume to the volume's directory on this node.
func (m *Manager) claimPath(ctx context.Context, ns, claim string) (string, error) {
	pvc, err := m.getter.PersistentVolumeClaim(ctx, ns, claim)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return "", fmt.Errorf("persistentvolumeclaim %q not found", claim)
		}
		return "", err
	}
	if pvc.Spec.VolumeName == "" {
		return "", fmt.Errorf("PersistentVolumeClaim %q is not bound", claim)
	}
	pv, err := m.getter.PersistentVolume(ctx, pvc.Spec.VolumeName)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return "", fmt.Errorf("persistentvolume %q not found", pvc.Spec.VolumeName)
		}
		return "", err
	}
	if ref := pv.Spec.ClaimRef; ref != nil && ref.UID != "" && ref.UID != pvc.UID {
		return "", fmt.Errorf("persistentvolume %q is bound to another claim", pv.Name)
	}
	switch {
	case pv.Spec.HostPath != nil:
		return pv.Spec.HostPath.Path, checkHostPath(pv.Spec.HostPath)
	case pv.Spec.Local != nil:
		if _, err := os.Stat(pv.Spec.Local.Path); err != nil {
			return "", fmt.Errorf("local volume %q: %w", pv.Name, err)
		}
		return pv.Spec.Local.Path, nil
	}
	return "", fmt.Errorf("persistentvolume %q: only hostPath and local volumes are supported on this node", pv.Name)
}

func mode(def *int32, item *int32) os.FileMode {
	if item != nil {
		return os.FileMode(*item)
	}
	if def != nil {
		return os.FileMode(*def)
	}
	return 0o644
}

func project(data map[string][]byte, items []corev1.KeyToPath, defaultMode *int32, optional bool) (map[string]File, error) {
	out := map[string]File{}
	if len(items) == 0 {
		for k, v := range data {
			out[k] = File{Data: v, Mode: mode(defaultMode, nil)}
		}
		return out, nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional {
				continue
			}
			return nil, fmt.Errorf("configmap references non-existent config key: %s", it.Key)
		}
		out[it.Path] = File{Data: v, Mode: mode(defaultMode, it.Mode)}
	}
	return out, nil
}

func (m *Manager) configMapPayload(ctx context.Context, ns, name string, items []corev1.KeyToPath, defaultMode *int32, optional *bool) (map[string]File, error) {
	opt := optional != nil && *optional
	cm, err := m.getter.ConfigMap(ctx, ns, name)
	if err != nil {
		if apierrors.IsNotFound(err) && opt {
			return map[string]File{}, nil
		}
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("configmap %q not found", name)
		}
		return nil, err
	}
	data := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return project(data, items, defaultMode, opt)
}

func (m *Manager) secretPayload(ctx context.Context, ns, name string, items []corev1.KeyToPath, defaultMode *int32, optional *bool) (map[string]File, error) {
	opt := optional != nil && *optional
	s, err := m.getter.Secret(ctx, ns, name)
	if err != nil {
		if apierrors.IsNotFound(err) && opt {
			return map[string]File{}, nil
		}
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("secret %q not found", name)
		}
		return nil, err
	}
	p, err := project(s.Data, items, defaultMode, opt)
	if err != nil {
		return nil, errors.New(strings.Replace(err.Error(), "configmap", "secret", 1))
	}
	return p, nil
}

func (m *Manager) downwardPayload(pod *corev1.Pod, items []corev1.DownwardAPIVolumeFile, defaultMode *int32) (map[string]File, error) {
	out := map[string]File{}
	for _, it := range items {
		var val string
		var err error
		switch {
		case it.FieldRef != nil:
			val, err = ObjectField(pod, it.FieldRef.FieldPath)
		case it.ResourceFieldRef != nil:
			val, err = ResourceField(pod, "", it.ResourceFieldRef, m.Allocatable())
		}
		if err != nil {
			return nil, err
		}
		out[it.Path] = File{Data: []byte(val), Mode: mode(defaultMode, it.Mode)}
	}
	return out, nil
}

func checkHostPath(h *corev1.HostPathVolumeSource) error {
	t := corev1.HostPathUnset
	if h.Type != nil {
		t = *h.Type
	}
	fi, err := os.Stat(h.Path)
	switch t {
	case corev1.HostPathUnset:
		return nil
	case corev1.HostPathDirectoryOrCreate:
		if os.IsNotExist(err) {
			return os.MkdirAll(h.Path, 0o755)
		}
		if err == nil && !fi.IsDir() {
			return fmt.Errorf("hostPath type check failed: %s is not a directory", h.Path)
		}
		return nil
	case corev1.HostPathFileOrCreate:
		if os.IsNotExist(err) {
			if err := os.MkdirAll(filepath.Dir(h.Path), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(h.Path, os.O_CREATE|os.O_RDONLY, 0o644)
			if err != nil {
				return err
			}
			return f.Close()
		}
		if err == nil && fi.IsDir() {
			return fmt.Errorf("hostPath type check failed: %s is not a file", h.Path)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("hostPath type check failed: %s does not exist", h.Path)
	}
	ok := true
	switch t {
	case corev1.HostPathDirectory:
		ok = fi.IsDir()
	case corev1.HostPathFile:
		ok = fi.Mode().IsRegular()
	case corev1.HostPathSocket:
		ok = fi.Mode()&os.ModeSocket != 0
	case corev1.HostPathCharDev:
		ok = fi.Mode()&os.ModeCharDevice != 0
	case corev1.HostPathBlockDev:
		ok = fi.Mode()&os.ModeDevice != 0 && fi.Mode()&os.ModeCharDevice == 0
	}
	if !ok {
		return fmt.Errorf("hostPath type check failed: %s is not a %s", h.Path, strings.ToLower(string(t)))
	}
	return nil
}

func isMountPoint(dir string) bool {
	var st, parent unix.Stat_t
	if unix.Lstat(dir, &st) != nil || unix.Lstat(filepath.Dir(dir), &parent) != nil {
		return false
	}
	if st.Dev != parent.Dev {
		return true
	}
	// A tmpfs mounted on a directory of a tmpfs shares no device either,
	// so the device check above suffices; same inode means a bind mount.
	return false
}

func mountTmpfs(dir string, size int64) error {
	if isMountPoint(dir) {
		return nil
	}
	opts := "mode=0755"
	if size > 0 {
		opts += ",size=" + strconv.FormatInt(size, 10)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", dir, err)
	}
	return nil
}

// Teardown unmounts the pod's tmpfs volumes and removes its directory.
func (m *Manager) Teardown(uid string) error {
	if m.Tokens != nil {
		m.Tokens.Forget(types.UID(uid))
	}
	if m.Certificates != nil {
		m.Certificates.Forget(types.UID(uid))
	}
	dir := m.PodDir(uid)
	volumes := filepath.Join(dir, "volumes")
	plugins, _ := os.ReadDir(volumes)
	for _, p := range plugins {
		names, _ := os.ReadDir(filepath.Join(volumes, p.Name()))
		for _, n := range names {
			path := filepath.Join(volumes, p.Name(), n.Name())
			if isMountPoint(path) {
				if err := unix.Unmount(path, unix.MNT_DETACH); err != nil {
					return fmt.Errorf("unmount %s: %w", path, err)
				}
			}
		}
	}
	return os.RemoveAll(dir)
}

// PodUIDs lists the pods that have a directory on the node.
func (m *Manager) PodUIDs() []string {
	entries, _ := os.ReadDir(filepath.Join(m.root, "pods"))
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}
