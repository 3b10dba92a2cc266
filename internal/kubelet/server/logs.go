package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// logQuery is PodLogOptions as the kubelet reads them from a query.
type logQuery struct {
	follow, previous, timestamps bool
	sinceSeconds                 *int64
	sinceTime                    *time.Time
	tailLines, limitBytes        *int64
}

// parseLogQuery reads upstream's query names (and the legacy "tail") and
// validates them as upstream's ValidatePodLogOptions does.
func parseLogQuery(q url.Values) (logQuery, error) {
	var o logQuery
	flag := func(k string) (bool, error) {
		v := q.Get(k)
		if v == "" {
			return false, nil
		}
		return strconv.ParseBool(v)
	}
	num := func(k string) (*int64, error) {
		v := q.Get(k)
		if v == "" {
			return nil, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		return &n, nil
	}
	var err error
	if o.follow, err = flag("follow"); err != nil {
		return o, err
	}
	if o.previous, err = flag("previous"); err != nil {
		return o, err
	}
	if o.timestamps, err = flag("timestamps"); err != nil {
		return o, err
	}
	if tail := q.Get("tail"); tail != "" && q.Get("tailLines") == "" && tail != "all" {
		q = cloneValues(q)
		q.Set("tailLines", tail)
	}
	if o.tailLines, err = num("tailLines"); err != nil {
		return o, err
	}
	if o.limitBytes, err = num("limitBytes"); err != nil {
		return o, err
	}
	if o.sinceSeconds, err = num("sinceSeconds"); err != nil {
		return o, err
	}
	if v := q.Get("sinceTime"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return o, fmt.Errorf("sinceTime: %w", err)
		}
		o.sinceTime = &t
	}
	switch {
	case o.tailLines != nil && *o.tailLines < 0:
		return o, fmt.Errorf("tailLines: must be greater than or equal to 0")
	case o.limitBytes != nil && *o.limitBytes < 1:
		return o, fmt.Errorf("limitBytes: must be greater than 0")
	case o.sinceSeconds != nil && *o.sinceSeconds < 1:
		return o, fmt.Errorf("sinceSeconds: must be greater than 0")
	case o.sinceSeconds != nil && o.sinceTime != nil:
		return o, fmt.Errorf("at most one of sinceTime or sinceSeconds may be specified")
	}
	return o, nil
}

func cloneValues(q url.Values) url.Values {
	c := url.Values{}
	for k, v := range q {
		c[k] = append([]string(nil), v...)
	}
	return c
}

// readerOptions turns the query into the log reader's options.
func (o logQuery) readerOptions(now time.Time) readOptions {
	opts := readOptions{tailLines: o.tailLines, limitBytes: o.limitBytes, follow: o.follow, timestamps: o.timestamps}
	switch {
	case o.sinceSeconds != nil:
		opts.since = now.Add(-time.Duration(*o.sinceSeconds) * time.Second)
	case o.sinceTime != nil:
		opts.since = *o.sinceTime
	}
	return opts
}

// containerRunning asks the runtime; an unreachable runtime counts as
// running (containers outlive a restarting runtime), as upstream does.
func (s *Server) containerRunning(id string) func(context.Context) bool {
	return func(ctx context.Context) bool {
		st, err := s.runtime.ContainerStatus(ctx, id, false)
		if err != nil {
			return status.Code(err) == codes.Unavailable
		}
		return st.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING
	}
}

func (s *Server) serveContainerLogs(w http.ResponseWriter, r *http.Request) {
	ns, name, container := r.PathValue("ns"), r.PathValue("pod"), r.PathValue("container")
	q, err := parseLogQuery(r.URL.Query())
	if err != nil {
		http.Error(w, fmt.Sprintf(`{"message": "Invalid request: %s"}`, err), http.StatusUnprocessableEntity)
		return
	}
	pod, ok := s.host.GetPodByName(ns, name)
	if !ok {
		http.Error(w, fmt.Sprintf("pod %q does not exist", name), http.StatusNotFound)
		return
	}
	if !hasContainer(pod, container) {
		http.Error(w, fmt.Sprintf("container %q not found in pod %q", container, name), http.StatusNotFound)
		return
	}
	containerID, err := logContainer(pod, container, q.previous)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	id := runtimeID(containerID)
	st, err := s.runtime.ContainerStatus(r.Context(), id, false)
	if err != nil || st.GetStatus() == nil {
		http.Error(w, fmt.Sprintf("failed to get container status %q: %v", containerID, err), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	fw := &flushWriter{w: w}
	if f, ok := w.(http.Flusher); ok {
		fw.f = f
	}
	if err := readCRILog(r.Context(), st.Status.LogPath, q.readerOptions(s.opts.Clock.Now()), s.containerRunning(id), s.opts.Clock, fw); err != nil && !fw.wrote {
		http.Error(w, err.Error(), http.StatusBadRequest)
	}
}

// flushWriter flushes after each write, so that followed logs arrive as
// they are written.
type flushWriter struct {
	w     io.Writer
	f     http.Flusher
	wrote bool
}

func (fw *flushWriter) Write(p []byte) (int, error) {
	fw.wrote = true
	n, err := fw.w.Write(p)
	if fw.f != nil {
		fw.f.Flush()
	}
	return n, err
}

func hasContainer(pod *corev1.Pod, name string) bool {
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}

// logContainer picks the container instance whose log to read from the
// pod's status, with upstream's rules and messages.
func logContainer(pod *corev1.Pod, name string, previous bool) (string, error) {
	var cs *corev1.ContainerStatus
	for _, list := range [][]corev1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses, pod.Status.EphemeralContainerStatuses} {
		for i := range list {
			if list[i].Name == name {
				cs = &list[i]
			}
		}
		if cs != nil {
			break
		}
	}
	if cs == nil {
		return "", fmt.Errorf("container %q in pod %q is not available", name, pod.Name)
	}
	last := cs.LastTerminationState.Terminated
	state := cs.State
	switch {
	case previous:
		if last == nil || last.ContainerID == "" {
			return "", fmt.Errorf("previous terminated container %q in pod %q not found", name, pod.Name)
		}
		return last.ContainerID, nil
	case state.Running != nil:
		return cs.ContainerID, nil
	case state.Terminated != nil:
		if state.Terminated.ContainerID != "" {
			return state.Terminated.ContainerID, nil
		}
		if last != nil && last.ContainerID != "" {
			return last.ContainerID, nil
		}
		return "", fmt.Errorf("container %q in pod %q is terminated", name, pod.Name)
	case last != nil:
		if last.ContainerID == "" {
			return "", fmt.Errorf("container %q in pod %q is terminated", name, pod.Name)
		}
		return last.ContainerID, nil
	case state.Waiting != nil:
		switch state.Waiting.Reason {
		case "ErrImagePull":
			return "", fmt.Errorf("container %q in pod %q is waiting to start: image can't be pulled", name, pod.Name)
		case "ImagePullBackOff":
			return "", fmt.Errorf("container %q in pod %q is waiting to start: trying and failing to pull image", name, pod.Name)
		default:
			return "", fmt.Errorf("container %q in pod %q is waiting to start: %v", name, pod.Name, state.Waiting.Reason)
		}
	default:
		return "", fmt.Errorf("container %q in pod %q is waiting to start - no logs yet", name, pod.Name)
	}
}
