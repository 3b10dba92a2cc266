package server

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Rotation defaults, as upstream's --container-log-max-size and
// --container-log-max-files.
const (
	DefaultContainerLogMaxSize  = 10 * 1024 * 1024
	DefaultContainerLogMaxFiles = 5
	rotatedSuffixFormat         = "20060102-150405"
	compressedSuffix            = ".gz"
)

// RotatorOptions tune the LogRotator; the zero value gives the defaults.
type RotatorOptions struct {
	// MaxSize is the size in bytes at which a container's log is rotated
	// (default 10Mi).
	MaxSize int64
	// MaxFiles is how many files a container's log may have, the live one
	// included (default 5, at least 2).
	MaxFiles int
	// Interval between checks (default 10 s, upstream's monitor period).
	Interval time.Duration
	Clock    clock.WithTicker
}

// LogRotator rotates the CRI log files of running containers as upstream's
// container log manager does: when the live file reaches MaxSize it is
// renamed to "<file>.<YYYYMMDD-HHMMSS>", the runtime is told to reopen it
// (CRI ReopenContainerLog), rotated files but the newest are gzipped, and
// the oldest are removed so that at most MaxFiles remain.
type LogRotator struct {
	runtime internalapi.RuntimeService
	opts    RotatorOptions
}

// NewLogRotator builds a rotator; it does nothing until Start.
func NewLogRotator(runtime internalapi.RuntimeService, opts RotatorOptions) (*LogRotator, error) {
	if opts.MaxSize == 0 {
		opts.MaxSize = DefaultContainerLogMaxSize
	}
	if opts.MaxFiles == 0 {
		opts.MaxFiles = DefaultContainerLogMaxFiles
	}
	if opts.MaxFiles < 2 {
		return nil, fmt.Errorf("container log max files must be at least 2, got %d", opts.MaxFiles)
	}
	if opts.MaxSize < 0 {
		return nil, fmt.Errorf("container log max size must not be negative, got %d", opts.MaxSize)
	}
	if opts.Interval == 0 {
		opts.Interval = 10 * time.Second
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &LogRotator{runtime: runtime, opts: opts}, nil
}

// Start checks every Interval until ctx is done.
func (l *LogRotator) Start(ctx context.Context) error {
	t := l.opts.Clock.NewTicker(l.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
		if err := l.RotateOnce(ctx); err != nil {
			klog.FromContext(ctx).V(2).Info("Container log rotation incomplete", "err", err)
		}
	}
}

// RotateOnce checks every running container once.
func (l *LogRotator) RotateOnce(ctx context.Context) error {
	cs, err := l.runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	if err != nil {
		return fmt.Errorf("list running containers: %w", err)
	}
	var errs []error
	for _, c := range cs {
		st, err := l.runtime.ContainerStatus(ctx, c.Id, false)
		if err != nil || st.GetStatus() == nil {
			continue // gone meanwhile
		}
		if err := l.rotateContainer(ctx, c.Id, st.Status.LogPath); err != nil {
			errs = append(errs, fmt.Errorf("container %s: %w", c.Id, err))
		}
	}
	return errors.Join(errs...)
}

func (l *LogRotator) rotateContainer(ctx context.Context, id, path string) error {
	if path == "" {
		return nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		if !os.IsNotExist(err) {
			return err
		}
		// The live file went missing (removed by hand): ask for a new one.
		return l.runtime.ReopenContainerLog(ctx, id)
	}
	if fi.Size() < l.opts.MaxSize {
		return nil
	}
	// After this rotation the live file and one fresh rotated file exist,
	// so keep MaxFiles-2 older ones.
	rotated, err := rotatedFiles(path)
	if err != nil {
		return err
	}
	if keep := l.opts.MaxFiles - 2; len(rotated) > keep {
		for _, f := range rotated[:len(rotated)-keep] {
			if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
				return err
			}
		}
		rotated = rotated[len(rotated)-keep:]
	}
	for _, f := range rotated {
		if !strings.HasSuffix(f, compressedSuffix) {
			if err := compressFile(f); err != nil {
				return fmt.Errorf("compress %s: %w", f, err)
			}
		}
	}
	dest := path + "." + l.opts.Clock.Now().Format(rotatedSuffixFormat)
	if _, err := os.Stat(dest); err == nil {
		// Rotated twice within a second: wait for the next check.
		return nil
	}
	if err := os.Rename(path, dest); err != nil {
		return err
	}
	if err := l.runtime.ReopenContainerLog(ctx, id); err != nil {
		// Put the file back so that the runtime keeps writing where we read.
		if rerr := os.Rename(dest, path); rerr != nil {
			return errors.Join(err, rerr)
		}
		return fmt.Errorf("reopen container log: %w", err)
	}
	return nil
}

// rotatedFiles are the rotated siblings of a live log, oldest first
// (their timestamp suffixes sort in time order).
func rotatedFiles(path string) ([]string, error) {
	matches, err := filepath.Glob(path + ".*")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range matches {
		if strings.HasSuffix(m, ".tmp") {
			_ = os.Remove(m) // left by an interrupted compression
			continue
		}
		out = append(out, m)
	}
	sort.Strings(out)
	return out, nil
}

// compressFile gzips f into f.gz through a temporary file and removes f.
func compressFile(f string) error {
	in, err := os.Open(f)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := f + compressedSuffix + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		return err
	}
	zw := gzip.NewWriter(out)
	if _, err := io.Copy(zw, in); err != nil {
		out.Close()
		os.Remove(tmp)
		return err
	}
	if err := zw.Close(); err != nil {
		out.Close()
		os.Remove(tmp)
		return err
	}
	if err := out.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, f+compressedSuffix); err != nil {
		return err
	}
	return os.Remove(f)
}

// ParseRotation validates --container-log-max-size (a quantity such as
// "10Mi") and --container-log-max-files into RotatorOptions.
func ParseRotation(maxSize string, maxFiles int) (RotatorOptions, error) {
	q, err := resource.ParseQuantity(maxSize)
	if err != nil {
		return RotatorOptions{}, fmt.Errorf("--container-log-max-size %q: %w", maxSize, err)
	}
	if q.Sign() <= 0 {
		return RotatorOptions{}, fmt.Errorf("--container-log-max-size must be positive, got %s", maxSize)
	}
	if maxFiles < 2 {
		return RotatorOptions{}, fmt.Errorf("--container-log-max-files must be at least 2, got %d", maxFiles)
	}
	return RotatorOptions{MaxSize: q.Value(), MaxFiles: maxFiles}, nil
}
