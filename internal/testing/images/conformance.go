package images

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	agentimages "github.com/skiff-sh/skiff/internal/agent/images"
)

// The images upstream's [Conformance] tests run (k8s.io/kubernetes
// test/utils/image/manifest.go, v1.37.2), by the names the suite asks for.
// The pause image is the node agent's own (internal/agent/pause).
const (
	AgnhostRef     = "registry.k8s.io/e2e-test-images/agnhost:2.66.1"
	AgnhostPrevRef = "registry.k8s.io/e2e-test-images/agnhost:2.55"
	NginxRef       = "registry.k8s.io/e2e-test-images/nginx:1.27.0-2"
	NginxNewRef    = "registry.k8s.io/e2e-test-images/nginx:1.28.0-2"
	NonRootRef     = "registry.k8s.io/e2e-test-images/nonroot:1.5"
	NonewprivsRef  = "registry.k8s.io/e2e-test-images/nonewprivs:1.4"
	KittenRef      = "registry.k8s.io/e2e-test-images/kitten:1.8"
	NautilusRef    = "registry.k8s.io/e2e-test-images/nautilus:1.8"
	SampleAPIRef   = "registry.k8s.io/e2e-test-images/sample-apiserver:1.29.2"
	EtcdRef        = "registry.k8s.io/etcd:3.7.0-0"
	GlibcDNSRef    = "registry.k8s.io/e2e-test-images/glibc-dns-testing:2.1.1"
)

// ConformanceSources says where the conformance images' programs come from.
type ConformanceSources struct {
	// Busybox is a static busybox built from upstream's source, the base
	// of every image and the busybox image's sh (upstream's images are
	// busybox 1.37, whose ash passes environment variables with names
	// like "data-1" on; Debian's reverts that). Empty: the host's Debian
	// busybox-static, with bash as the busybox image's sh.
	Busybox string
	// Agnhost is a static agnhost binary (k8s.io/kubernetes/test/images/agnhost).
	Agnhost string
	// Nnp is the static nonewprivs program (test/images/nonewprivs).
	Nnp string
	// SampleAPIServer (k8s.io/sample-apiserver) and Etcd (etcd's server),
	// static, for the aggregator test's images; either may be empty to
	// leave its image out.
	SampleAPIServer, Etcd string
	// KubeImages is k8s.io/kubernetes's test/images directory (for
	// kitten's and nautilus's pictures and agnhost's porter certificate).
	KubeImages string
	// DebRoot holds Debian packages unpacked with dpkg -x (nginx,
	// bind9-dnsutils, netcat-openbsd and the libraries the host lacks);
	// the rest of a program's libraries come from the host.
	DebRoot string
}

// ImageSpec is one image to write: its tarball name, references, files and
// runtime configuration.
type ImageSpec struct {
	File   string
	Refs   []string
	Files  []agentimages.File
	Config agentimages.Config
}

// WriteTo writes the image as a docker-archive into dir and returns the
// tarball's path.
func (s ImageSpec) WriteTo(dir string) (string, error) {
	var buf bytes.Buffer
	if err := agentimages.Write(&buf, s.Refs, s.Files, s.Config); err != nil {
		return "", fmt.Errorf("build image %v: %w", s.Refs, err)
	}
	p := filepath.Join(dir, s.File)
	return p, os.WriteFile(p, buf.Bytes(), 0o644)
}

const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// webOSRelease is kitten's and nautilus's /etc/os-release.
const webOSRelease = `NAME="Alpine Linux"
ID=alpine
PRETTY_NAME="Alpine Linux stand-in: Skiff's conformance image on busybox"
`

// ConformanceImages returns the images the conformance tests use, besides
// pause. Each is busybox plus the programs of its upstream counterpart:
//
//   - busybox: the given upstream busybox build, or Debian's
//     busybox-static (LoadBusyboxFiles) with bash as
//     /bin/sh (see below).
//   - agnhost (both tags): /agnhost as entrypoint (command pause), and the
//     tools upstream's Alpine-based image installs: dig/nslookup (Debian's
//     bind9-dnsutils), getent (the DNS tests' /etc/hosts probe; glibc's,
//     hosts: files dns), curl, nc (netcat-openbsd), ip, socat and bash from
//     Debian; porter's certificate; the user and group the image defines;
//     /bin/sh is bash (busybox's sh would run its nc applet first).
//   - nginx (both tags): Debian's nginx 1.22 on port 80 serving a welcome
//     page, in the foreground (upstream's is nginx 1.27/1.28 on Alpine).
//   - nonroot: busybox with USER 1234.
//   - nonewprivs: the setuid-root nnp program, printing its effective uid.
//   - kitten, nautilus: agnhost test-webserver serving the picture and
//     data.json, as upstream's, and an os-release that names Alpine Linux
//     as upstream's base (which the ImageVolume test reads).
//   - glibc-dns-testing: dig and Debian's glibc getent (glibc 2.36 has
//     its files and dns NSS modules built in) with hosts: files dns.
//   - sample-apiserver (/sample-apiserver as entrypoint) and etcd
//     (/usr/local/bin/etcd), when their programs are given.
func ConformanceImages(src ConformanceSources) ([]ImageSpec, error) {
	base, err := LoadBusyboxFiles()
	if src.Busybox != "" {
		base, err = busyboxFiles(src.Busybox)
	}
	if err != nil {
		return nil, fmt.Errorf("busybox: %w", err)
	}
	agnhost, err := os.ReadFile(src.Agnhost)
	if err != nil {
		return nil, err
	}
	nnp, err := os.ReadFile(src.Nnp)
	if err != nil {
		return nil, err
	}
	with := func(extra ...agentimages.File) []agentimages.File {
		return overlay(base, extra)
	}

	// agnhost
	tools, err := programs(src.DebRoot, []string{
		"/usr/bin/dig", "/usr/bin/nslookup", "/usr/bin/host", "/bin/nc.openbsd",
		"/usr/bin/curl", "/usr/sbin/ip", "/usr/bin/socat", "/bin/bash", "/usr/bin/getent",
	})
	if err != nil {
		return nil, err
	}
	porter := filepath.Join(src.KubeImages, "agnhost", "porter")
	crt, err := os.ReadFile(filepath.Join(porter, "localhost.crt"))
	if err != nil {
		return nil, err
	}
	key, err := os.ReadFile(filepath.Join(porter, "localhost.key"))
	if err != nil {
		return nil, err
	}
	agnhostFiles := with(append(tools,
		agentimages.File{Path: "/agnhost", Mode: 0o755, Data: agnhost},
		agentimages.File{Path: "/agnhost-2", Link: "agnhost"},
		agentimages.File{Path: "/usr/bin/nc", Link: "/bin/nc.openbsd"},
		agentimages.File{Path: "/etc/nsswitch.conf", Mode: 0o644, Data: []byte("hosts: files dns\n")},
		// Debian's busybox shell runs its own applets before PATH (nc
		// without -u, -z); upstream's Alpine sh finds netcat-openbsd.
		agentimages.File{Path: "/bin/sh", Link: "bash"},
		agentimages.File{Path: "/localhost.crt", Mode: 0o644, Data: crt},
		agentimages.File{Path: "/localhost.key", Mode: 0o644, Data: key},
		agentimages.File{Path: "/uploads", Dir: true, Mode: 0o755},
		agentimages.File{Path: "/etc/passwd", Mode: 0o644, Data: []byte(
			"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n" +
				"user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh\n")},
		agentimages.File{Path: "/etc/group", Mode: 0o644, Data: []byte(
			"root:x:0:\nnobody:x:65534:\nuser-defined-in-image:x:1000:\ngroup-defined-in-image:x:50000:user-defined-in-image\n")},
		agentimages.File{Path: "/home/user-defined-in-image", Dir: true, Mode: 0o755},
	)...)
	agnhostCfg := agentimages.Config{Entrypoint: []string{"/agnhost"}, Cmd: []string{"pause"}, Env: []string{defaultPath}}

	// nginx
	nginxBin, err := programs(src.DebRoot, []string{"/usr/sbin/nginx"})
	if err != nil {
		return nil, err
	}
	nginxFiles := with(append(nginxBin,
		agentimages.File{Path: "/etc/nginx/nginx.conf", Mode: 0o644, Data: []byte(nginxConf)},
		agentimages.File{Path: "/usr/share/nginx/html/index.html", Mode: 0o644, Data: []byte(nginxIndex)},
		agentimages.File{Path: "/var/log/nginx", Dir: true, Mode: 0o755},
		agentimages.File{Path: "/var/lib/nginx", Dir: true, Mode: 0o755},
		agentimages.File{Path: "/run", Dir: true, Mode: 0o755},
	)...)
	nginxCfg := agentimages.Config{Cmd: []string{"nginx", "-g", "daemon off;"}, Env: []string{defaultPath}}

	// kitten and nautilus: agnhost's test-webserver in the picture's
	// directory. Upstream's are built on Alpine, whose os-release the
	// ImageVolume test reads through a volume of kitten: ours names the
	// distribution it stands in for, and what it really is.
	webserver := func(name string) ([]agentimages.File, error) {
		files := []agentimages.File{{Path: "/agnhost", Mode: 0o755, Data: agnhost},
			{Path: "/etc/os-release", Mode: 0o644, Data: []byte(webOSRelease)}}
		dir := filepath.Join(src.KubeImages, name, "html")
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			data, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				return nil, err
			}
			files = append(files, agentimages.File{Path: "/" + e.Name(), Mode: 0o644, Data: data})
		}
		return with(files...), nil
	}
	kitten, err := webserver("kitten")
	if err != nil {
		return nil, err
	}
	nautilus, err := webserver("nautilus")
	if err != nil {
		return nil, err
	}
	webCfg := agentimages.Config{Entrypoint: []string{"/agnhost"}, Cmd: []string{"test-webserver"}, Env: []string{defaultPath}}

	specs := []ImageSpec{
		{File: "agnhost.tar", Refs: []string{AgnhostRef, AgnhostPrevRef}, Files: agnhostFiles, Config: agnhostCfg},
		{File: "nginx.tar", Refs: []string{NginxRef, NginxNewRef}, Files: nginxFiles, Config: nginxCfg},
		{File: "nonroot.tar", Refs: []string{NonRootRef}, Files: with(), Config: agentimages.Config{Cmd: []string{"sh"}, Env: []string{defaultPath}, User: "1234"}},
		{File: "nonewprivs.tar", Refs: []string{NonewprivsRef}, Files: with(
			agentimages.File{Path: "/usr/local/bin/nnp", Mode: 0o755 | os.ModeSetuid | os.ModeSetgid, Data: nnp},
		), Config: agentimages.Config{Cmd: []string{"nnp"}, Env: []string{defaultPath}}},
		{File: "kitten.tar", Refs: []string{KittenRef}, Files: kitten, Config: webCfg},
		{File: "nautilus.tar", Refs: []string{NautilusRef}, Files: nautilus, Config: webCfg},
	}
	// busybox: Debian's busybox ash drops environment variables whose
	// names are not shell identifiers (a Secret's key "data-1" through
	// envFrom) before it runs a command; upstream's passes them on. With
	// no upstream build given, /bin/sh is Debian's bash.
	bbFiles := with()
	if src.Busybox == "" {
		bash, err := programs(src.DebRoot, []string{"/bin/bash"})
		if err != nil {
			return nil, err
		}
		bbFiles = with(append(bash, agentimages.File{Path: "/bin/sh", Link: "bash"})...)
	}
	specs = append(specs, ImageSpec{File: "busybox.tar", Refs: append([]string{BusyboxRef}, BusyboxAliases...),
		Files: bbFiles, Config: agentimages.Config{Cmd: []string{"sh"}, Env: []string{defaultPath}}})
	getent, err := programs(src.DebRoot, []string{"/usr/bin/getent", "/usr/bin/dig", "/usr/bin/nslookup"})
	if err != nil {
		return nil, err
	}
	specs = append(specs, ImageSpec{File: "glibc-dns-testing.tar", Refs: []string{GlibcDNSRef},
		Files:  with(append(getent, agentimages.File{Path: "/etc/nsswitch.conf", Mode: 0o644, Data: []byte("hosts: files dns\n")})...),
		Config: agentimages.Config{Cmd: []string{"sh"}, Env: []string{defaultPath}}})
	if src.SampleAPIServer != "" {
		bin, err := os.ReadFile(src.SampleAPIServer)
		if err != nil {
			return nil, err
		}
		specs = append(specs, ImageSpec{File: "sample-apiserver.tar", Refs: []string{SampleAPIRef},
			Files:  with(agentimages.File{Path: "/sample-apiserver", Mode: 0o755, Data: bin}),
			Config: agentimages.Config{Entrypoint: []string{"/sample-apiserver"}, Env: []string{defaultPath}}})
	}
	if src.Etcd != "" {
		bin, err := os.ReadFile(src.Etcd)
		if err != nil {
			return nil, err
		}
		specs = append(specs, ImageSpec{File: "etcd.tar", Refs: []string{EtcdRef},
			Files: with(
				agentimages.File{Path: "/usr/local/bin/etcd", Mode: 0o755, Data: bin},
				agentimages.File{Path: "/var/lib/etcd", Dir: true, Mode: 0o700},
			),
			Config: agentimages.Config{Cmd: []string{"/usr/local/bin/etcd"}, Env: []string{defaultPath}}})
	}
	return specs, nil
}

const nginxConf = `# Skiff's stand-in for upstream's e2e nginx image.
user nobody nobody;
worker_processes 1;
error_log /dev/stderr notice;
pid /run/nginx.pid;
events { worker_connections 1024; }
http {
	access_log /dev/stdout;
	default_type text/html;
	server {
		listen 80 default_server;
		listen [::]:80 default_server;
		root /usr/share/nginx/html;
		index index.html;
	}
}
`

const nginxIndex = `<!DOCTYPE html>
<html>
<head><title>Welcome to nginx!</title></head>
<body><h1>Welcome to nginx!</h1></body>
</html>
`

// overlay returns base with extra's paths replacing base's.
func overlay(base, extra []agentimages.File) []agentimages.File {
	byPath := map[string]agentimages.File{}
	for _, f := range base {
		byPath[f.Path] = f
	}
	for _, f := range extra {
		byPath[f.Path] = f
	}
	out := make([]agentimages.File, 0, len(byPath))
	for _, f := range byPath {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// programs returns the given programs (paths as installed, taken from
// debRoot when it has them, else from the host) and every shared library
// they load, as ldd finds them with debRoot's library directories first.
// Libraries keep the path ldd reports, which the image's loader searches.
func programs(debRoot string, paths []string) ([]agentimages.File, error) {
	debRoot, err := filepath.Abs(debRoot)
	if err != nil {
		return nil, err
	}
	var libDirs []string
	for _, d := range []string{"lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu/bind"} {
		libDirs = append(libDirs, filepath.Join(debRoot, d))
	}
	seen := map[string]bool{}
	var files []agentimages.File
	add := func(imagePath, source string, mode fs.FileMode) error {
		if seen[imagePath] {
			return nil
		}
		seen[imagePath] = true
		data, err := os.ReadFile(source)
		if err != nil {
			return err
		}
		files = append(files, agentimages.File{Path: imagePath, Mode: mode, Data: data})
		return nil
	}
	for _, p := range paths {
		source := filepath.Join(debRoot, p)
		if _, err := os.Stat(source); err != nil {
			source = p
		}
		if err := add(p, source, 0o755); err != nil {
			return nil, fmt.Errorf("program %s: %w", p, err)
		}
		cmd := exec.Command("ldd", source)
		cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+strings.Join(libDirs, ":"))
		out, err := cmd.CombinedOutput()
		if bytes.Contains(out, []byte("not a dynamic executable")) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("ldd %s: %w: %s", source, err, out)
		}
		libs, err := lddPaths(out)
		if err != nil {
			return nil, fmt.Errorf("ldd %s: %w", source, err)
		}
		for _, lib := range libs {
			imagePath := lib
			if rel, err := filepath.Rel(debRoot, lib); err == nil && !strings.HasPrefix(rel, "..") {
				imagePath = "/" + rel
			}
			if err := add(imagePath, lib, 0o755); err != nil {
				return nil, fmt.Errorf("library %s of %s: %w", lib, p, err)
			}
		}
	}
	return files, nil
}

var lddLine = regexp.MustCompile(`^\s*(?:\S+ => )?(/\S+) \(0x[0-9a-f]+\)$`)

// lddPaths returns the absolute library paths in ldd's output (the loader
// included); a library ldd could not find is an error.
func lddPaths(out []byte) ([]string, error) {
	var paths []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, "not found") {
			return nil, fmt.Errorf("missing library: %s", strings.TrimSpace(line))
		}
		if m := lddLine.FindStringSubmatch(line); m != nil {
			paths = append(paths, m[1])
		}
	}
	return paths, sc.Err()
}
