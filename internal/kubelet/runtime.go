package kubelet

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/kubelet/podstate"
)

// Labels and annotations on CRI objects: upstream's names, so the objects
// are recognised after a restart (and by crictl users).
const (
	labelPodName       = "io.kubernetes.pod.name"
	labelPodNamespace  = "io.kubernetes.pod.namespace"
	labelPodUID        = "io.kubernetes.pod.uid"
	labelContainerName = "io.kubernetes.container.name"
	labelContainerType = "io.kubernetes.container.type" // not upstream: init, sidecar or regular

	annotationHash              = "io.kubernetes.container.hash"
	annotationRestartCount      = "io.kubernetes.container.restartCount"
	annotationTermMessagePath   = "io.kubernetes.container.terminationMessagePath"
	annotationTermMessagePolicy = "io.kubernetes.container.terminationMessagePolicy"
	annotationPreStop           = "io.kubernetes.container.preStopHandler"
	annotationGracePeriod       = "io.kubernetes.pod.terminationGracePeriod"
	annotationSpecImage         = "skiff.sh/container-image"
	annotationTermMessageFile   = "skiff.sh/termination-message-file"

	// runtimeScheme prefixes container ids in the API ("containerd://...").
	maxTerminationMessage = 4096
	fallbackLogLines      = 80
)

// podLogDir is where the runtime writes the pod's container logs:
// <logs>/<namespace>_<name>_<uid>.
func podLogDir(root string, pod *corev1.Pod) string {
	return filepath.Join(root, pod.Namespace+"_"+pod.Name+"_"+string(pod.UID))
}

// readState returns what the runtime shows of the pod with the given uid,
// newest first.
func (k *Kubelet) readState(ctx context.Context, uid string) (*podstate.Pod, error) {
	sandboxes, err := k.runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{labelPodUID: uid}})
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	containers, err := k.runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{labelPodUID: uid}})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	st := &podstate.Pod{}
	sort.Slice(sandboxes, func(i, j int) bool { return sandboxes[i].CreatedAt > sandboxes[j].CreatedAt })
	for i, s := range sandboxes {
		sb := podstate.Sandbox{ID: s.Id, Attempt: int(s.GetMetadata().GetAttempt()), Ready: s.State == runtimeapi.PodSandboxState_SANDBOX_READY,
			CreatedAt: time.Unix(0, s.CreatedAt)}
		if i == 0 {
			resp, err := k.runtime.PodSandboxStatus(ctx, s.Id, false)
			if err == nil && resp.GetStatus() != nil {
				ss := resp.GetStatus()
				sb.HostNetwork = ss.GetLinux().GetNamespaces().GetOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE
				if ip := ss.GetNetwork().GetIp(); ip != "" {
					sb.IPs = append(sb.IPs, ip)
					for _, extra := range ss.GetNetwork().GetAdditionalIps() {
						sb.IPs = append(sb.IPs, extra.GetIp())
					}
				}
			}
		}
		st.Sandboxes = append(st.Sandboxes, sb)
	}
	sort.Slice(containers, func(i, j int) bool { return containers[i].CreatedAt > containers[j].CreatedAt })
	for _, c := range containers {
		pc := podstate.Container{
			ID:          c.Id,
			ContainerID: k.runtimeName + "://" + c.Id,
			Name:        c.GetMetadata().GetName(),
			SandboxID:   c.PodSandboxId,
			CreatedAt:   time.Unix(0, c.CreatedAt),
			Image:       c.Annotations[annotationSpecImage],
			ImageRef:    c.ImageRef,
			Hash:        c.Annotations[annotationHash],
		}
		pc.Attempt, _ = strconv.Atoi(c.Annotations[annotationRestartCount])
		switch c.State {
		case runtimeapi.ContainerState_CONTAINER_CREATED:
			pc.State = podstate.Created
		case runtimeapi.ContainerState_CONTAINER_RUNNING:
			pc.State = podstate.Running
		case runtimeapi.ContainerState_CONTAINER_EXITED:
			pc.State = podstate.Exited
		default:
			pc.State = podstate.Unknown
		}
		resp, err := k.runtime.ContainerStatus(ctx, c.Id, false)
		if err == nil && resp.GetStatus() != nil {
			cs := resp.GetStatus()
			if cs.StartedAt > 0 {
				pc.StartedAt = time.Unix(0, cs.StartedAt)
			}
			if cs.FinishedAt > 0 {
				pc.FinishedAt = time.Unix(0, cs.FinishedAt)
			}
			pc.ExitCode = cs.ExitCode
			pc.Reason = cs.Reason
			pc.Message = cs.Message
			if pc.ImageRef == "" {
				pc.ImageRef = cs.ImageRef
			}
			if pc.Image == "" {
				pc.Image = cs.GetImage().GetImage()
			}
			if pc.State == podstate.Exited {
				pc.Message = terminationMessage(c.Annotations, cs, pc.ExitCode)
			}
		}
		st.Containers = append(st.Containers, pc)
	}
	return st, nil
}

// terminationMessage reads what the container wrote to its termination
// message file, or with FallbackToLogsOnError and a failure, the tail of
// its log.
func terminationMessage(ann map[string]string, cs *runtimeapi.ContainerStatus, exitCode int32) string {
	msg := cs.Message
	if file := ann[annotationTermMessageFile]; file != "" {
		if b, err := readLimited(file, maxTerminationMessage); err == nil && len(b) > 0 {
			return string(b)
		}
	}
	if ann[annotationTermMessagePolicy] == string(corev1.TerminationMessageFallbackToLogsOnError) && exitCode != 0 && cs.LogPath != "" {
		if tail := logTail(cs.LogPath, fallbackLogLines, 2048); tail != "" {
			return tail
		}
	}
	return msg
}

func readLimited(path string, max int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, max)
	n, _ := f.Read(buf)
	return buf[:n], nil
}

// logTail returns the last lines of a CRI-format log, message text only.
func logTail(path string, lines, maxBytes int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	var out strings.Builder
	for _, l := range all {
		// <time> <stream> <P|F> <message>
		parts := strings.SplitN(l, " ", 4)
		if len(parts) == 4 {
			out.WriteString(parts[3])
			if parts[2] == "F" {
				out.WriteByte('\n')
			}
		}
	}
	s := out.String()
	if len(s) > maxBytes {
		s = s[len(s)-maxBytes:]
	}
	return s
}

func marshalHandler(h *corev1.LifecycleHandler) string {
	if h == nil {
		return ""
	}
	b, _ := json.Marshal(h)
	return string(b)
}
