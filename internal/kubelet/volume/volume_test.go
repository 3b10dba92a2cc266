package volume

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

type fakeGetter struct {
	cms     map[string]*corev1.ConfigMap
	secrets map[string]*corev1.Secret
	pvcs    map[string]*corev1.PersistentVolumeClaim
	pvs     map[string]*corev1.PersistentVolume
}

func (f *fakeGetter) PersistentVolumeClaim(_ context.Context, ns, name string) (*corev1.PersistentVolumeClaim, error) {
	if c, ok := f.pvcs[name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "persistentvolumeclaims"}, name)
}

func (f *fakeGetter) PersistentVolume(_ context.Context, name string) (*corev1.PersistentVolume, error) {
	if v, ok := f.pvs[name]; ok {
		return v, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "persistentvolumes"}, name)
}

func (f *fakeGetter) ConfigMap(_ context.Context, ns, name string) (*corev1.ConfigMap, error) {
	if cm, ok := f.cms[name]; ok {
		return cm, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
}

func (f *fakeGetter) Secret(_ context.Context, ns, name string) (*corev1.Secret, error) {
	if s, ok := f.secrets[name]; ok {
		return s, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}

// read returns what a container would see in dir: each visible name's
// content, following the symlinks.
func read(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name()[0] == '.' {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}

func TestConfigMapVolumeFollowsUpdates(t *testing.T) {
	g := &fakeGetter{cms: map[string]*corev1.ConfigMap{"cfg": {Data: map[string]string{"a": "1", "b": "2"}}}}
	m := NewManager(t.TempDir(), g)
	mode := int32(0o600)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1", Namespace: "ns"}, Spec: corev1.PodSpec{Volumes: []corev1.Volume{
		{Name: "all", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
		{Name: "one", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"},
			Items: []corev1.KeyToPath{{Key: "b", Path: "renamed", Mode: &mode}}}}},
	}}}
	paths, err := m.Setup(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"a": "1", "b": "2"}, read(t, paths["all"])); diff != "" {
		t.Errorf("all keys (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"renamed": "2"}, read(t, paths["one"])); diff != "" {
		t.Errorf("items (-want +got):\n%s", diff)
	}
	if fi, _ := os.Stat(filepath.Join(paths["one"], "renamed")); fi.Mode().Perm() != 0o600 {
		t.Errorf("item mode %v, want 0600", fi.Mode().Perm())
	}
	if target, _ := os.Readlink(filepath.Join(paths["all"], "a")); target != "..data/a" {
		t.Errorf("a -> %q, want ..data/a", target)
	}

	g.cms["cfg"] = &corev1.ConfigMap{Data: map[string]string{"a": "10", "b": "2", "c": "3"}}
	if _, err := m.Setup(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"a": "10", "b": "2", "c": "3"}, read(t, paths["all"])); diff != "" {
		t.Errorf("after the update (-want +got):\n%s", diff)
	}
	stamps := 0
	entries, _ := os.ReadDir(paths["all"])
	for _, e := range entries {
		if e.IsDir() && e.Name()[:2] == ".." {
			stamps++
		}
	}
	if stamps != 1 {
		t.Errorf("%d timestamped directories after the update, want 1", stamps)
	}
}

func TestMissingSources(t *testing.T) {
	m := NewManager(t.TempDir(), &fakeGetter{})
	yes := true
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u2"}, Spec: corev1.PodSpec{Volumes: []corev1.Volume{
		{Name: "opt", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "nope"}, Optional: &yes}}},
		{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "missing"}}}},
	}}}
	_, err := m.Setup(context.Background(), pod)
	want := `MountVolume.SetUp failed for volume "cfg" : configmap "missing" not found`
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
}

func TestDownwardAPI(t *testing.T) {
	m := NewManager(t.TempDir(), &fakeGetter{})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u3", Name: "p", Labels: map[string]string{"b": "2", "a": "x\"y"}},
		Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "d", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
			Items: []corev1.DownwardAPIVolumeFile{
				{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}},
				{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
			}}}}}}}
	paths, err := m.Setup(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"name": "p", "labels": "a=\"x\\\"y\"\nb=\"2\""}
	if diff := cmp.Diff(want, read(t, paths["d"])); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestPersistentVolumeClaims(t *testing.T) {
	dir := t.TempDir()
	g := &fakeGetter{
		pvcs: map[string]*corev1.PersistentVolumeClaim{
			"data":    {ObjectMeta: metav1.ObjectMeta{UID: "c1"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv1"}},
			"pending": {},
		},
		pvs: map[string]*corev1.PersistentVolume{"pv1": {ObjectMeta: metav1.ObjectMeta{Name: "pv1"}, Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: dir}}}}},
	}
	m := NewManager(t.TempDir(), g)
	claim := func(name string) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}}
	}
	paths, err := m.Setup(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u4"}, Spec: corev1.PodSpec{Volumes: []corev1.Volume{claim("data")}}})
	if err != nil || paths["data"] != dir {
		t.Fatalf("paths %v, err %v: want the local PV's path", paths, err)
	}
	for name, want := range map[string]string{
		"pending": `MountVolume.SetUp failed for volume "pending" : PersistentVolumeClaim "pending" is not bound`,
		"nope":    `MountVolume.SetUp failed for volume "nope" : persistentvolumeclaim "nope" not found`,
	} {
		_, err := m.Setup(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u5"}, Spec: corev1.PodSpec{Volumes: []corev1.Volume{claim(name)}}})
		if err == nil || err.Error() != want {
			t.Errorf("%s: error %v, want %q", name, err, want)
		}
	}
}

// TestFSGroup: with a pod fsGroup, a projected secret's files belong to the
// group and keep a readable mode for it (0440 asked: a non-root user of the
// group reads them), an emptyDir is group-writable with set-group-ID, a
// hostPath is left alone, and files a refresh adds get the group too.
func TestFSGroup(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("changing a file's group to another needs root")
	}
	g := &fakeGetter{secrets: map[string]*corev1.Secret{"s": {Data: map[string][]byte{"data-1": []byte("value-1")}}}}
	m := NewManager(t.TempDir(), g)
	t.Cleanup(func() { _ = m.Teardown("u-fsgroup") }) // projected volumes are tmpfs mounts
	host := t.TempDir()
	hostInfo, err := os.Stat(host)
	if err != nil {
		t.Fatal(err)
	}
	mode, group := int32(0o440), int64(1001)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u-fsgroup", Namespace: "ns"}, Spec: corev1.PodSpec{
		SecurityContext: &corev1.PodSecurityContext{FSGroup: &group},
		Volumes: []corev1.Volume{
			{Name: "proj", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: &mode,
				Sources: []corev1.VolumeProjection{{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}}}}}}},
			{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: host}}},
		}}}
	paths, err := m.Setup(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	check := func(path string, wantGID int, wantMode os.FileMode) {
		t.Helper()
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if gid := int(fi.Sys().(*syscall.Stat_t).Gid); gid != wantGID {
			t.Errorf("%s: group %d, want %d", path, gid, wantGID)
		}
		if got := fi.Mode() & (os.ModePerm | os.ModeSetgid); got != wantMode {
			t.Errorf("%s: mode %v, want %v", path, got, wantMode)
		}
	}
	check(filepath.Join(paths["proj"], "data-1"), 1001, 0o440)
	check(paths["scratch"], 1001, 0o777|os.ModeSetgid)
	check(host, 0, hostInfo.Mode()&os.ModePerm)

	g.secrets["s"] = &corev1.Secret{Data: map[string][]byte{"data-1": []byte("value-1"), "data-2": []byte("value-2")}}
	if _, err := m.Setup(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	check(filepath.Join(paths["proj"], "data-2"), 1001, 0o440)
}
