// Package containerd runs the node agent's own containerd: the one compiled
// into the skiff binary (`skiff containerd`, see internal/cli/containerd),
// as a supervised child process with a config the agent writes, its own
// root, state and socket under <data-dir>/agent/containerd, and the CRI
// plugin the kubelet talks to.
//
// Containers outlive both the agent and containerd: each pod's shim is its
// own process (in its own process group, re-parented when containerd exits),
// containerd runs in a process group of its own so a Ctrl-C or a signal to
// the agent's group does not reach it, and a containerd left behind by an
// agent that was killed is stopped (by its pid file) before a new one starts
// on the same root.
package containerd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	containerdclient "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/plugins/snapshots/overlay/overlayutils"
	criclient "k8s.io/cri-client/pkg"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/agent/images"
	"github.com/skiff-sh/skiff/internal/agent/pause"
	"github.com/skiff-sh/skiff/internal/agent/shim"
)

// Options tune the agent's containerd; the zero value means the defaults.
type Options struct {
	// Binary is the skiff executable run as `skiff containerd` and linked
	// as the runc shim. Default: this process's executable.
	Binary string
	// SandboxImage is the pod sandbox image. Default: pause.Ref, which is
	// imported at start from the image Skiff builds itself.
	SandboxImage string
	// RuncPath is the OCI runtime. Default /usr/sbin/runc (Debian's runc).
	RuncPath string
	// Runtimes are OCI runtimes offered beside runc, each a CRI runtime
	// handler of its name. Default (nil): DetectRuntimes at Start, crun
	// when it is on PATH and can run containers here; an empty non-nil
	// slice offers none.
	Runtimes []Runtime
	// CNIBinDirs hold the CNI plugins. Default /usr/lib/cni (Debian's
	// containernetworking-plugins), then /opt/cni/bin.
	CNIBinDirs []string
	// CNIConfDir holds the CNI network config the agent writes. Default
	// <data-dir>/agent/etc/cni/net.d.
	CNIConfDir string
	// Snapshotter is containerd's snapshotter. Default: "overlayfs" when an
	// overlay mount works under the root, else "native".
	Snapshotter string
	// StreamAddress and StreamPort are where the CRI streaming server
	// (exec, attach, port-forward) listens. Default 127.0.0.1, port 0 (any
	// free port; CRI answers each streaming request with its URL).
	StreamAddress string
	StreamPort    int
	// LogLevel is containerd's log level. Default "info".
	LogLevel string
	// Clock times the restart back-off. Default: the real clock.
	Clock clock.WithTicker
	// MinBackoff and MaxBackoff bound the restart back-off: it starts at
	// MinBackoff (default 1s), doubles each time containerd dies within a
	// minute of starting, and is capped at MaxBackoff (default 30s).
	MinBackoff, MaxBackoff time.Duration
	// StopTimeout is how long containerd gets after SIGTERM before SIGKILL.
	// Default 10s.
	StopTimeout time.Duration
	// ShimBinary is the runc v2 shim. Default: the small shim this binary
	// carries (internal/agent/shim, installed under <data-dir>/agent/bin/shims)
	// when it carries one, else Binary.
	ShimBinary string
}

// maxLogSize is the size past which containerd.log is rotated at a start.
const maxLogSize = 10 << 20

// Containerd supervises the agent's containerd.
type Containerd struct {
	paths
	opts Options

	ready     chan struct{}
	readyOnce sync.Once

	mu    sync.Mutex
	child *os.Process // the running containerd, for tests and Kill
}

// New returns the supervisor for the containerd of the agent whose data
// directory is dataDir. It has no side effects; Start does the work.
func New(dataDir string, opts Options) *Containerd {
	p := newPaths(dataDir)
	if opts.SandboxImage == "" {
		opts.SandboxImage = pause.Ref
	}
	if opts.RuncPath == "" {
		opts.RuncPath = "/usr/sbin/runc"
	}
	if len(opts.CNIBinDirs) == 0 {
		opts.CNIBinDirs = []string{"/usr/lib/cni", "/opt/cni/bin"}
	}
	if opts.CNIConfDir == "" {
		opts.CNIConfDir = p.cniConfDir
	}
	if opts.StreamAddress == "" {
		opts.StreamAddress = "127.0.0.1"
	}
	if opts.LogLevel == "" {
		opts.LogLevel = "info"
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.MinBackoff == 0 {
		opts.MinBackoff = time.Second
	}
	if opts.MaxBackoff == 0 {
		opts.MaxBackoff = 30 * time.Second
	}
	if opts.StopTimeout == 0 {
		opts.StopTimeout = 10 * time.Second
	}
	return &Containerd{paths: p, opts: opts, ready: make(chan struct{})}
}

// Endpoint is the CRI endpoint, e.g. unix:///var/lib/skiff/agent/containerd/containerd.sock.
func (c *Containerd) Endpoint() string { return "unix://" + c.socket }

// Address is containerd's socket path, for containerd's own Go client.
func (c *Containerd) Address() string { return c.socket }

// CNIConfDir is where the CNI network config belongs.
func (c *Containerd) CNIConfDir() string { return c.opts.CNIConfDir }

// ImagesDir holds the tarballs imported at start.
func (c *Containerd) ImagesDir() string { return c.imagesDir }

// Ready is closed once CRI answers a Version call and the pause image and
// the tarballs of the images dir have been imported.
func (c *Containerd) Ready() <-chan struct{} { return c.ready }

// Start writes the config, starts containerd and keeps it running (restarted
// with back-off when it dies) until ctx is done; then it stops containerd
// (SIGTERM, SIGKILL after StopTimeout), leaving the containers' shims
// running. It returns an error only when containerd cannot be set up.
func (c *Containerd) Start(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName("containerd")
	ctx = klog.NewContext(ctx, logger)
	snapshotter, err := c.prepare(ctx)
	if err != nil {
		return fmt.Errorf("containerd: %w", err)
	}
	go c.awaitReady(ctx, snapshotter)

	var backoff time.Duration // the last wait before a restart
	for {
		started := c.opts.Clock.Now()
		exited, err := c.run(ctx)
		if err != nil {
			return fmt.Errorf("containerd: %w", err)
		}
		select {
		case <-ctx.Done():
			c.stop(logger, exited)
			return nil
		case err = <-exited:
		}
		backoff = nextBackoff(backoff, c.opts.Clock.Since(started), c.opts.MinBackoff, c.opts.MaxBackoff)
		logger.Error(err, "containerd exited; restarting", "after", backoff, "log", c.log)
		select {
		case <-ctx.Done():
			return nil
		case <-c.opts.Clock.After(backoff):
		}
	}
}

// nextBackoff is the wait before restarting a containerd that ran for
// ranFor, when the wait before that run was prev: lo the first time and
// after a run of more than a minute, else twice prev, at most hi.
func nextBackoff(prev, ranFor, lo, hi time.Duration) time.Duration {
	if prev == 0 || ranFor > time.Minute {
		return lo
	}
	return min(2*prev, hi)
}

// prepare creates the directories, the shim link, the hosts dir and the
// config, stops a containerd an earlier agent left behind, and returns the
// snapshotter chosen.
func (c *Containerd) prepare(ctx context.Context) (string, error) {
	// A unix socket path holds at most 107 bytes on Linux.
	if n := len(c.socket + ".ttrpc"); n > 107 {
		return "", fmt.Errorf("socket path %s.ttrpc is %d bytes, more than a unix socket allows (107): use a shorter --data-dir", c.socket, n)
	}
	for _, d := range []string{c.base, c.root, c.state, c.binDir, c.opts.CNIConfDir, c.imagesDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return "", err
		}
	}
	if c.opts.Binary == "" {
		self, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("find the skiff executable: %w", err)
		}
		c.opts.Binary = self
	}
	shimBinary := c.opts.ShimBinary
	if shimBinary == "" {
		shimBinary = c.opts.Binary
		if shim.Embedded() {
			path, err := shim.Install(filepath.Join(c.binDir, "shims"))
			if err != nil {
				return "", err
			}
			shimBinary = path
		}
	}
	link := filepath.Join(c.binDir, shim.Name)
	if target, err := os.Readlink(link); err != nil || target != shimBinary {
		_ = os.Remove(link)
		if err := os.Symlink(shimBinary, link); err != nil {
			return "", fmt.Errorf("link the runc shim: %w", err)
		}
	}
	if _, err := os.Stat(c.opts.RuncPath); err != nil {
		return "", fmt.Errorf("runc: %w (install Debian's runc package: scripts/setup.sh)", err)
	}
	if c.opts.Runtimes == nil {
		var skipped map[string]error
		c.opts.Runtimes, skipped = DetectRuntimes()
		for name, err := range skipped {
			klog.FromContext(ctx).Info("OCI runtime found on PATH but not offered", "runtime", name, "reason", err)
		}
	}
	for _, rt := range c.opts.Runtimes {
		if rt.Name == "" || rt.Name == "runc" {
			return "", fmt.Errorf("runtime %q: a runtime beside runc needs a name of its own", rt.Name)
		}
	}
	regs, err := readRegistries(c.registries)
	if err != nil {
		return "", err
	}
	if err := writeHostsDir(c.hostsDir, regs.hostsFiles()); err != nil {
		return "", fmt.Errorf("registry hosts: %w", err)
	}
	snapshotter := c.opts.Snapshotter
	if snapshotter == "" {
		snapshotter = "overlayfs"
		dir := filepath.Join(c.root, "io.containerd.snapshotter.v1.overlayfs")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return "", err
		}
		if err := overlayutils.Supported(dir); err != nil {
			klog.FromContext(ctx).Info("overlay mounts do not work here; using the native snapshotter (copies layers)", "reason", err)
			snapshotter = "native"
		}
	}
	cfg := renderConfig(configInput{
		paths:        c.paths,
		Snapshotter:  snapshotter,
		SandboxImage: c.opts.SandboxImage,
		RuncPath:     c.opts.RuncPath,
		Runtimes:     c.opts.Runtimes,
		CNIBinDirs:   c.opts.CNIBinDirs,
		CNIConfDir:   c.opts.CNIConfDir,
		StreamAddr:   c.opts.StreamAddress,
		StreamPort:   c.opts.StreamPort,
		Auths:        regs.auths(),
		LogLevel:     c.opts.LogLevel,

		RestrictOOMScoreAdj: !canLowerOOMScoreAdj(),
	})
	if err := writeFileAtomic(c.config, cfg, 0o600); err != nil {
		return "", err
	}
	if err := c.stopLeftover(ctx); err != nil {
		return "", err
	}
	return snapshotter, nil
}

// stopLeftover stops the containerd named by the pid file if it is still
// running (its agent was killed): two containerds cannot share a root.
func (c *Containerd) stopLeftover(ctx context.Context) error {
	b, err := os.ReadFile(c.pidFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return os.Remove(c.pidFile)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !bytes.Contains(cmdline, []byte(c.config)) {
		return os.Remove(c.pidFile) // gone, or the pid was reused
	}
	klog.FromContext(ctx).Info("Stopping the containerd a previous agent left running", "pid", pid)
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	_ = p.Signal(syscall.SIGTERM)
	deadline := time.Now().Add(c.opts.StopTimeout)
	for alive(pid) {
		if time.Now().After(deadline) {
			_ = p.Signal(syscall.SIGKILL)
		}
		if time.Now().After(deadline.Add(5 * time.Second)) {
			return fmt.Errorf("containerd pid %d (left by an earlier agent) does not exit", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return os.Remove(c.pidFile)
}

func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	// A zombie (not our child) still answers kill 0; its state says.
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
}

// run starts one containerd; the channel gets its exit.
func (c *Containerd) run(ctx context.Context) (<-chan error, error) {
	// One old log is kept: containerd.log moves to containerd.log.1 once
	// it passes maxLogSize, at a (re)start.
	if st, err := os.Stat(c.log); err == nil && st.Size() > maxLogSize {
		_ = os.Rename(c.log, c.log+".1")
	}
	logFile, err := os.OpenFile(c.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(c.opts.Binary, "containerd", "--config", c.config)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Dir = c.base
	cmd.Env = childEnv(os.Environ(), c.binDir)
	// Its own process group: signals to the agent's group (Ctrl-C) do not
	// reach it; the agent stops it itself.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s containerd: %w", c.opts.Binary, err)
	}
	logFile.Close()
	if err := writeFileAtomic(c.pidFile, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o600); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, err
	}
	c.mu.Lock()
	c.child = cmd.Process
	c.mu.Unlock()
	klog.FromContext(ctx).Info("Started containerd", "pid", cmd.Process.Pid, "socket", c.socket, "log", c.log)
	exited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		if err == nil {
			err = errors.New("exited with status 0")
		}
		exited <- err
	}()
	return exited, nil
}

// childEnv is env with binDir first on PATH (where containerd finds the
// shim) and without the shim marker.
func childEnv(env []string, binDir string) []string {
	out := make([]string, 0, len(env)+1)
	path := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, kv := range env {
		switch {
		case strings.HasPrefix(kv, "PATH="):
			path = strings.TrimPrefix(kv, "PATH=")
		case strings.HasPrefix(kv, "SKIFF_CONTAINERD_SHIM="), strings.HasPrefix(kv, "NOTIFY_SOCKET="):
		default:
			out = append(out, kv)
		}
	}
	return append(out, "PATH="+binDir+string(os.PathListSeparator)+path)
}

// stop stops the running containerd: SIGTERM to it alone (not to a group:
// the shims keep the containers), SIGKILL after StopTimeout.
func (c *Containerd) stop(logger klog.Logger, exited <-chan error) {
	c.mu.Lock()
	p := c.child
	c.mu.Unlock()
	if p == nil {
		return
	}
	_ = p.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(c.opts.StopTimeout):
		logger.Info("containerd did not stop in time; killing it", "timeout", c.opts.StopTimeout)
		_ = p.Kill()
		<-exited
	}
	_ = os.Remove(c.pidFile)
	logger.Info("Stopped containerd")
}

// Kill kills the running containerd with SIGKILL (the supervisor restarts
// it); for tests of restart safety.
func (c *Containerd) Kill() (pid int, err error) {
	c.mu.Lock()
	p := c.child
	c.mu.Unlock()
	if p == nil {
		return 0, errors.New("containerd is not running")
	}
	return p.Pid, p.Kill()
}

// Pid is the running containerd's process id (0 before it starts).
func (c *Containerd) Pid() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.child == nil {
		return 0
	}
	return c.child.Pid
}

// awaitReady waits until CRI answers, imports the pause image and the
// images dir, and closes Ready.
func (c *Containerd) awaitReady(ctx context.Context, snapshotter string) {
	logger := klog.FromContext(ctx)
	start := time.Now()
	if err := c.waitCRI(ctx); err != nil {
		return // ctx done
	}
	logger.V(1).Info("CRI answers", "after", time.Since(start))
	for {
		err := c.importStartImages(ctx, snapshotter)
		if err == nil {
			break
		}
		logger.Error(err, "Import the start images; retrying")
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
	}
	logger.Info("containerd is ready", "endpoint", c.Endpoint(), "snapshotter", snapshotter, "after", time.Since(start).Round(time.Millisecond))
	c.readyOnce.Do(func() { close(c.ready) })
}

func (c *Containerd) waitCRI(ctx context.Context) error {
	for {
		if err := c.criVersion(ctx); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (c *Containerd) criVersion(ctx context.Context) error {
	if _, err := os.Stat(c.socket); err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	rs, err := criclient.NewRemoteRuntimeService(cctx, c.Endpoint(), 2*time.Second, nil, false)
	if err != nil {
		return err
	}
	defer rs.Close(ctx)
	_, err = rs.Version(cctx, "v1")
	return err
}

// importStartImages imports the pause image (pinned, so image garbage
// collection keeps it) unless the sandbox image is another, and every
// tarball in the images dir. A tarball that fails is logged, not retried.
func (c *Containerd) importStartImages(ctx context.Context, snapshotter string) error {
	client, err := containerdclient.New(c.socket, containerdclient.WithTimeout(5*time.Second))
	if err != nil {
		return err
	}
	defer client.Close()
	if c.opts.SandboxImage == pause.Ref {
		var buf bytes.Buffer
		if err := pause.WriteImage(&buf); err != nil {
			return fmt.Errorf("pause image: %w", err)
		}
		if _, err := images.Import(ctx, client, &buf, images.ImportOptions{
			Snapshotter: snapshotter,
			Labels:      map[string]string{images.PinnedLabel: "pinned"},
		}); err != nil {
			return fmt.Errorf("pause image: %w", err)
		}
	}
	_ = images.ImportDir(ctx, client, c.imagesDir, images.ImportOptions{Snapshotter: snapshotter})
	return nil
}

// SocketPath is the containerd socket of the agent whose data directory is
// dataDir.
func SocketPath(dataDir string) string { return newPaths(dataDir).socket }

// ConfiguredSnapshotter is the snapshotter the agent's containerd was last
// configured with (images imported by hand must be unpacked for it);
// "overlayfs" when there is no config yet.
func ConfiguredSnapshotter(dataDir string) string {
	b, err := os.ReadFile(newPaths(dataDir).config)
	if err != nil {
		return "overlayfs"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "snapshotter = "); ok {
			if s, err := strconv.Unquote(v); err == nil && s != "" {
				return s
			}
		}
	}
	return "overlayfs"
}
