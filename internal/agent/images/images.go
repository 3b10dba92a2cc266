// Package images builds, imports, lists and removes the node's container
// images without a registry: one-layer images written as docker-archive
// tarballs (the pause image, test images), and tarballs imported into the
// agent's containerd in the namespace the CRI plugin serves ("k8s.io"), so
// the kubelet sees them as if they had been pulled.
package images

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"github.com/containerd/platforms"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"k8s.io/klog/v2"
)

// Namespace is the containerd namespace the CRI plugin serves.
const Namespace = "k8s.io"

// PinnedLabel is the containerd image label the CRI plugin reports as
// "pinned": the kubelet's image garbage collection never removes such images.
const PinnedLabel = "io.cri-containerd.pinned"

// File is one entry of an image layer.
type File struct {
	// Path is absolute inside the image, e.g. "/bin/busybox".
	Path string
	// Mode holds the permission bits; directories and symlinks are marked by
	// Dir and Link.
	Mode os.FileMode
	Data []byte
	// Dir makes the entry a directory.
	Dir bool
	// Link makes the entry a symbolic link to this target.
	Link string
}

// Config is the runtime part of an image's configuration.
type Config struct {
	Entrypoint []string
	Cmd        []string
	Env        []string
	WorkingDir string
	User       string
}

// Write writes a one-layer image holding files as a docker-archive tarball
// (the format `docker save` writes and containerd imports) tagged with every
// ref. The image is for GOOS linux and the running GOARCH. Entries carry no
// timestamps, so the same input gives the same image ID.
func Write(w io.Writer, refs []string, files []File, cfg Config) error {
	img, err := Build(files, cfg)
	if err != nil {
		return err
	}
	tags := map[name.Tag]v1.Image{}
	for _, r := range refs {
		tag, err := name.NewTag(r)
		if err != nil {
			return fmt.Errorf("image reference %q: %w", r, err)
		}
		tags[tag] = img
	}
	if len(tags) == 0 {
		return errors.New("write image: no reference")
	}
	return tarball.MultiWrite(tags, w)
}

// Build returns the one-layer image holding files.
func Build(files []File, cfg Config) (v1.Image, error) {
	layerTar, err := layer(files)
	if err != nil {
		return nil, err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	img, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{
		Architecture: runtime.GOARCH,
		OS:           "linux",
		Config: v1.Config{
			Entrypoint: cfg.Entrypoint,
			Cmd:        cfg.Cmd,
			Env:        cfg.Env,
			WorkingDir: cfg.WorkingDir,
			User:       cfg.User,
		},
		RootFS: v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return nil, err
	}
	img, err = mutate.Append(img, mutate.Addendum{Layer: l, History: v1.History{CreatedBy: "skiff"}})
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	return img, nil
}

// layer is the uncompressed tar of files, with every missing parent
// directory added, sorted by path.
func layer(files []File) ([]byte, error) {
	entries := map[string]File{}
	for _, f := range files {
		p := path.Clean("/" + f.Path)
		if p == "/" {
			return nil, fmt.Errorf("image file %q: not a file path", f.Path)
		}
		entries[p] = f
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			if _, ok := entries[d]; !ok {
				entries[d] = File{Path: d, Dir: true, Mode: 0o755}
			}
		}
	}
	paths := make([]string, 0, len(entries))
	for p := range entries {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		f := entries[p]
		h := &tar.Header{Name: strings.TrimPrefix(p, "/"), Mode: tarMode(f.Mode), ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		switch {
		case f.Dir:
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		case f.Link != "":
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, f.Link, 0o777
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.Data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(f.Data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// tarMode is f's permission bits with its setuid, setgid and sticky bits
// in tar's encoding.
func tarMode(m os.FileMode) int64 {
	mode := int64(m.Perm())
	for _, b := range []struct {
		set os.FileMode
		tar int64
	}{{os.ModeSetuid, 0o4000}, {os.ModeSetgid, 0o2000}, {os.ModeSticky, 0o1000}} {
		if m&b.set != 0 {
			mode |= b.tar
		}
	}
	return mode
}

// ImportOptions tune Import.
type ImportOptions struct {
	// Snapshotter unpacks the images for this snapshotter (the one the CRI
	// plugin uses); "" means containerd's default.
	Snapshotter string
	// Labels are set on every imported image (e.g. PinnedLabel).
	Labels map[string]string
}

// Import imports an OCI or docker-archive tarball into containerd's CRI
// namespace and unpacks it, so a container can start from it at once. It
// returns the names of the images imported.
func Import(ctx context.Context, c *containerd.Client, r io.Reader, opts ImportOptions) ([]string, error) {
	ctx = namespaces.WithNamespace(ctx, Namespace)
	importOpts := []containerd.ImportOpt{containerd.WithImportPlatform(platforms.DefaultStrict())}
	if len(opts.Labels) > 0 {
		importOpts = append(importOpts, containerd.WithImageLabels(opts.Labels))
	}
	imgs, err := c.Import(ctx, r, importOpts...)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	var names []string
	for _, img := range imgs {
		image := containerd.NewImageWithPlatform(c, img, platforms.DefaultStrict())
		if err := image.Unpack(ctx, opts.Snapshotter); err != nil {
			return names, fmt.Errorf("unpack %s: %w", img.Name, err)
		}
		names = append(names, img.Name)
	}
	return names, nil
}

// ImportFile imports one tarball file; see Import.
func ImportFile(ctx context.Context, c *containerd.Client, file string, opts ImportOptions) ([]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := Import(ctx, c, f, opts)
	if err != nil {
		return names, fmt.Errorf("%s: %w", file, err)
	}
	return names, nil
}

// ImportDir imports every regular file in dir (sorted by name; a missing
// dir is no error). A file that fails is logged and the rest are still
// imported; the first error is returned.
func ImportDir(ctx context.Context, c *containerd.Client, dir string, opts ImportOptions) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	logger := klog.FromContext(ctx)
	var first error
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		file := filepath.Join(dir, e.Name())
		names, err := ImportFile(ctx, c, file, opts)
		if err != nil {
			logger.Error(err, "Import image tarball", "file", file)
			if first == nil {
				first = err
			}
			continue
		}
		logger.V(1).Info("Imported image tarball", "file", file, "images", names)
	}
	return first
}

// Image is one image known to containerd's CRI namespace.
type Image struct {
	Name   string
	Digest string
	// Size is the size of the image's content (compressed layers, config,
	// manifests) for this platform.
	Size   int64
	Pinned bool
}

// List lists the images of the CRI namespace, sorted by name.
func List(ctx context.Context, c *containerd.Client) ([]Image, error) {
	ctx = namespaces.WithNamespace(ctx, Namespace)
	imgs, err := c.ImageService().List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	out := make([]Image, 0, len(imgs))
	for _, img := range imgs {
		size, err := img.Size(ctx, c.ContentStore(), platforms.Default())
		if err != nil {
			size = -1
		}
		out = append(out, Image{Name: img.Name, Digest: img.Target.Digest.String(), Size: size, Pinned: img.Labels[PinnedLabel] == "pinned"})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Remove removes the image named ref from the CRI namespace; a short name
// is completed as docker does (busybox → docker.io/library/busybox:latest).
func Remove(ctx context.Context, c *containerd.Client, ref string) error {
	ctx = namespaces.WithNamespace(ctx, Namespace)
	full := ref
	if n, err := name.ParseReference(ref, name.WithDefaultRegistry("docker.io")); err == nil && !strings.Contains(ref, "@") {
		full = n.Name()
		if n.Context().RegistryStr() == "index.docker.io" {
			full = strings.Replace(full, "index.docker.io/", "docker.io/", 1)
		}
	}
	err := c.ImageService().Delete(ctx, full, images.SynchronousDelete())
	if errdefs.IsNotFound(err) && full != ref {
		err = c.ImageService().Delete(ctx, ref, images.SynchronousDelete())
	}
	if errdefs.IsNotFound(err) {
		return fmt.Errorf("image %q: not found", ref)
	}
	if err != nil {
		return fmt.Errorf("remove image %s: %w", ref, err)
	}
	return nil
}
