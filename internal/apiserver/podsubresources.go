package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// servePodStream answers the streaming pod subresources by proxying them to
// the kubelet of the pod's node, as upstream's pod registry does: the
// container is checked against the spec first (400 when it must be named
// or is not in the pod), a pod without a node gets 400 (an empty log for
// pods/log), and a kubelet that cannot be reached 503.
func servePodStream(ctx context.Context, h *resourceHandler, w http.ResponseWriter, r *http.Request, info RequestInfo, out output) {
	allowed := map[string][]string{"log": {"get"}, "exec": {"get", "create"}, "attach": {"get", "create"}, "portforward": {"get", "create"}}
	ok := false
	for _, v := range allowed[info.Subresource] {
		if v == info.Verb {
			ok = true
		}
	}
	if !ok {
		h.codecs.writeError(w, methodNotSupported(h.gr, info.Verb))
		return
	}
	q := r.URL.Query()
	if info.Subresource != "log" {
		// exec, attach and portforward are CONNECTs: admission sees the
		// options before the pod is looked at, as upstream's connect
		// handler.
		opts, err := podConnectOptions(info.Subresource, q)
		if err != nil {
			h.codecs.writeError(w, err)
			return
		}
		if err := h.connectAdmission(ctx, info, opts); err != nil {
			h.codecs.writeError(w, err)
			return
		}
	}
	getReq := r.Clone(ctx)
	getReq.URL.RawQuery = ""
	obj, err := h.get(ctx, getReq, RequestInfo{Namespace: info.Namespace, Name: info.Name})
	if err != nil {
		h.codecs.writeError(w, err)
		return
	}
	pod := obj.(*corev1.Pod)
	params := url.Values{}
	container := ""
	if info.Subresource != "portforward" {
		if container, err = podContainer(q.Get("container"), pod); err != nil {
			h.codecs.writeError(w, err)
			return
		}
	}
	switch info.Subresource {
	case "log":
		if params, err = logParams(q); err != nil {
			h.codecs.writeError(w, err)
			return
		}
		if pod.Spec.NodeName == "" {
			// Upstream streams nothing for a pod that has no node yet.
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusOK)
			return
		}
	case "exec", "attach":
		for _, p := range [][2]string{{"stdin", "input"}, {"stdout", "output"}, {"stderr", "error"}, {"tty", "tty"}} {
			if queryBool(q, p[0]) || queryBool(q, p[1]) {
				params.Set(p[1], "1")
			}
		}
		if info.Subresource == "exec" {
			if len(q["command"]) == 0 {
				h.codecs.writeError(w, apierrors.NewBadRequest("you must specify at least one command for the container"))
				return
			}
			params["command"] = q["command"]
		}
		if params.Get("input") == "" && params.Get("output") == "" && params.Get("error") == "" {
			h.codecs.writeError(w, apierrors.NewBadRequest("you must specify at least 1 of stdin, stdout, stderr"))
			return
		}
	case "portforward":
		params["port"] = q["ports"]
		if len(params["port"]) == 0 {
			params["port"] = q["port"]
		}
	}
	if pod.Spec.NodeName == "" {
		h.codecs.writeError(w, apierrors.NewBadRequest(fmt.Sprintf("pod %s does not have a host assigned", pod.Name)))
		return
	}
	base, err := h.srv.kubeletURL(ctx, pod.Spec.NodeName)
	if err != nil {
		if apierrors.IsNotFound(err) {
			err = apierrors.NewServiceUnavailable(fmt.Sprintf("node %q of pod %s is not registered", pod.Spec.NodeName, pod.Name))
		}
		h.codecs.writeError(w, err)
		return
	}
	loc := *base
	loc.RawQuery = params.Encode()
	gr := schema.GroupResource{Resource: "pods"}
	switch info.Subresource {
	case "log":
		loc.Path = fmt.Sprintf("/containerLogs/%s/%s/%s", pod.Namespace, pod.Name, container)
		h.srv.streamFromKubelet(w, r, &loc, gr, pod.Name)
	case "portforward":
		loc.Path = fmt.Sprintf("/portForward/%s/%s", pod.Namespace, pod.Name)
		h.srv.proxyToKubelet(w, r, &loc, true, gr, pod.Name)
	default:
		loc.Path = fmt.Sprintf("/%s/%s/%s/%s", info.Subresource, pod.Namespace, pod.Name, container)
		h.srv.proxyToKubelet(w, r, &loc, true, gr, pod.Name)
	}
}

// queryBool reads a boolean query parameter as upstream's parameter codec
// does: absent, "0" and "false" are false, anything else true.
func queryBool(q url.Values, k string) bool {
	v, ok := q[k]
	return ok && len(v) > 0 && v[0] != "0" && !strings.EqualFold(v[0], "false")
}

// podConnectOptions is the options object of a CONNECT to pods/exec,
// attach or portforward, decoded from the query as upstream's parameter
// codec does (v1 PodExecOptions, PodAttachOptions, PodPortForwardOptions;
// Skiff also reads the legacy input/output/error names of the streams).
// Ports that are not numbers are 400.
func podConnectOptions(sub string, q url.Values) (runtime.Object, error) {
	meta := func(kind string) metav1.TypeMeta { return metav1.TypeMeta{APIVersion: "v1", Kind: kind} }
	stream := func(name, legacy string) bool { return queryBool(q, name) || queryBool(q, legacy) }
	switch sub {
	case "exec":
		return &corev1.PodExecOptions{
			TypeMeta: meta("PodExecOptions"), Container: q.Get("container"), Command: q["command"],
			Stdin: stream("stdin", "input"), Stdout: stream("stdout", "output"), Stderr: stream("stderr", "error"), TTY: queryBool(q, "tty"),
		}, nil
	case "attach":
		return &corev1.PodAttachOptions{
			TypeMeta: meta("PodAttachOptions"), Container: q.Get("container"),
			Stdin: stream("stdin", "input"), Stdout: stream("stdout", "output"), Stderr: stream("stderr", "error"), TTY: queryBool(q, "tty"),
		}, nil
	case "portforward":
		o := &corev1.PodPortForwardOptions{TypeMeta: meta("PodPortForwardOptions")}
		if ports := q["ports"]; len(ports) > 0 {
			if err := metav1.Convert_Slice_string_To_Slice_int32(&ports, &o.Ports, nil); err != nil {
				return nil, apierrors.NewBadRequest(err.Error())
			}
		}
		return o, nil
	}
	return nil, apierrors.NewBadRequest(fmt.Sprintf("no connect options for pods/%s", sub))
}

// podContainer checks the requested container against the pod as
// upstream's validateContainer does.
func podContainer(name string, pod *corev1.Pod) (string, error) {
	var names []string
	for _, c := range pod.Spec.InitContainers {
		names = append(names, c.Name)
	}
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		names = append(names, c.Name)
	}
	if name == "" {
		switch len(pod.Spec.Containers) {
		case 1:
			return pod.Spec.Containers[0].Name, nil
		case 0:
			return "", apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s", pod.Name))
		default:
			return "", apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s, choose one of: %s", pod.Name, names))
		}
	}
	for _, n := range names {
		if n == name {
			return name, nil
		}
	}
	return "", apierrors.NewBadRequest(fmt.Sprintf("container %s is not valid for pod %s", name, pod.Name))
}

// logParams validates PodLogOptions from the query (422 as upstream's
// validation) and returns the kubelet's query.
func logParams(q url.Values) (url.Values, error) {
	params := url.Values{}
	var errs field.ErrorList
	for _, k := range []string{"follow", "previous", "timestamps"} {
		if v := q.Get(k); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, apierrors.NewBadRequest(fmt.Sprintf("%s: %v", k, err))
			}
			if b {
				params.Set(k, "true")
			}
		}
	}
	nums := map[string]int64{}
	for _, k := range []string{"sinceSeconds", "tailLines", "limitBytes"} {
		if v := q.Get(k); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, apierrors.NewBadRequest(fmt.Sprintf("%s: %v", k, err))
			}
			nums[k] = n
			params.Set(k, v)
		}
	}
	if n, ok := nums["tailLines"]; ok && n < 0 {
		errs = append(errs, field.Invalid(field.NewPath("tailLines"), n, "must be greater than or equal to 0"))
	}
	if n, ok := nums["limitBytes"]; ok && n < 1 {
		errs = append(errs, field.Invalid(field.NewPath("limitBytes"), n, "must be greater than 0"))
	}
	if n, ok := nums["sinceSeconds"]; ok && n < 1 {
		errs = append(errs, field.Invalid(field.NewPath("sinceSeconds"), n, "must be greater than 0"))
	}
	if v := q.Get("sinceTime"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("sinceTime: %v", err))
		}
		if _, ok := nums["sinceSeconds"]; ok {
			errs = append(errs, field.Forbidden(field.NewPath("sinceSeconds"), "at most one of `sinceTime` or `sinceSeconds` may be specified"))
		}
		params.Set("sinceTime", t.Format(time.RFC3339))
	}
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Kind: "PodLogOptions"}, "", errs)
	}
	return params, nil
}
