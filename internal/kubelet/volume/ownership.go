package volume

import (
	"io/fs"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
)

// The permission bits a pod's fsGroup gets on a volume's files, as
// upstream's: read and write for the group on a writable volume (emptyDir),
// read only on the API-backed ones (configMap, secret, downwardAPI,
// projected), and on directories search and set-group-ID so that new files
// keep the group.
const (
	rwMask   = os.FileMode(0o660)
	roMask   = os.FileMode(0o440)
	execMask = os.FileMode(0o110)
)

// ownershipManaged reports whether the volume's files take the pod's
// fsGroup, and whether the volume is read-only for that purpose. Upstream
// manages ownership of the same kinds; a hostPath (and the claims backed by
// one) is the node's and stays as it is.
func ownershipManaged(v *corev1.Volume) (managed, readOnly bool) {
	switch {
	case v.EmptyDir != nil:
		return true, false
	case v.ConfigMap != nil, v.Secret != nil, v.DownwardAPI != nil, v.Projected != nil:
		return true, true
	}
	return false, false
}

// setOwnership gives every file under dir the group fsGroup and the
// group's permission bits (chmod is skipped for symlinks: it would change
// their targets). Setup runs it after each write of the volume, so files a
// refresh adds get it too.
func setOwnership(dir string, fsGroup int64, readOnly bool) error {
	mask := rwMask
	if readOnly {
		mask = roMask
	}
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(path, -1, int(fsGroup)); err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		m := mask
		if d.IsDir() {
			m |= execMask | os.ModeSetgid
		}
		want := info.Mode() | m
		if want == info.Mode() {
			return nil
		}
		return os.Chmod(path, want&(os.ModePerm|os.ModeSetgid|os.ModeSetuid|os.ModeSticky))
	})
}

// applyFSGroup sets the pod's fsGroup on the volume set up at dir, where
// upstream would.
func applyFSGroup(pod *corev1.Pod, v *corev1.Volume, dir string) error {
	sc := pod.Spec.SecurityContext
	if sc == nil || sc.FSGroup == nil {
		return nil
	}
	managed, readOnly := ownershipManaged(v)
	if !managed {
		return nil
	}
	return setOwnership(dir, *sc.FSGroup, readOnly)
}
