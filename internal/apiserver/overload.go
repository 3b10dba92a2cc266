package apiserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/apiserver/authn"
	"github.com/skiff-sh/skiff/internal/apiserver/flowcontrol"
	"github.com/skiff-sh/skiff/internal/apiserver/metrics"
	regflowcontrol "github.com/skiff-sh/skiff/internal/apiserver/registry/flowcontrol"
	"github.com/skiff-sh/skiff/internal/storage"
)

// Upstream's defaults for the limits a client meets (kube-apiserver flags).
const (
	// DefaultRequestTimeout is --request-timeout: a request that is not
	// long-running gets 504 after this.
	DefaultRequestTimeout = 60 * time.Second
	// DefaultMinRequestTimeout is --min-request-timeout: a watch without
	// timeoutSeconds lasts between this and twice this, at random, and no
	// watch lasts longer than twice this.
	DefaultMinRequestTimeout = 1800 * time.Second
	// DefaultMaxRequestsInflight and DefaultMaxMutatingRequestsInflight
	// are --max-requests-inflight and --max-mutating-requests-inflight;
	// with API Priority and Fairness their sum is the server's seats.
	DefaultMaxRequestsInflight         = 400
	DefaultMaxMutatingRequestsInflight = 200
	// DefaultHTTP2MaxStreamsPerConnection is what upstream gives HTTP/2
	// clients when --http2-max-streams-per-connection is 0.
	DefaultHTTP2MaxStreamsPerConnection = 100
	// DefaultEtcdCallTimeout bounds one etcd call, so that a request
	// fails instead of hanging while etcd is unreachable.
	DefaultEtcdCallTimeout = 30 * time.Second
)

// longRunning says whether a request is exempt from the request timeout
// and from flow control, as upstream's (watch, proxy; attach, exec, log,
// portforward and proxy subresources).
func longRunning(info RequestInfo) bool {
	switch info.Verb {
	case "watch", "watchlist", "proxy", "connect":
		return true
	}
	switch info.Subresource {
	case "attach", "exec", "log", "portforward", "proxy":
		return true
	}
	return false
}

// serveLimited runs the request under the server's limits: flow control
// (API Priority and Fairness, or the max-in-flight limits) and, for
// requests that are not long-running, the request timeout.
func (s *Server) serveLimited(w http.ResponseWriter, r *http.Request, info RequestInfo) {
	lr := longRunning(info)
	serve := func() {
		if lr {
			s.route(w, r, info)
			return
		}
		s.serveWithTimeout(w, r, info)
	}
	if s.flow == nil || lr {
		serve()
		return
	}
	user, _ := authn.UserFrom(r.Context())
	req := flowcontrol.Request{
		Mutating:        mutatingVerb(info.Verb, r.Method),
		Verb:            info.Verb,
		APIGroup:        info.APIGroup,
		Resource:        info.Resource,
		Namespace:       info.Namespace,
		Path:            r.URL.Path,
		ResourceRequest: info.IsResourceRequest,
		Subresource:     info.Subresource,
		Seats:           s.listSeats(info, r),
	}
	if user != nil {
		req.User, req.Groups = user.Name, user.Groups
	}
	if !info.IsResourceRequest {
		req.Verb = methodVerb(r.Method)
	}
	if err := s.flow.Do(r.Context(), req, serve); err != nil {
		var rej *flowcontrol.RejectedError
		if errors.As(err, &rej) {
			if rej.PriorityLevel != "" {
				w.Header().Set("X-Kubernetes-PF-PriorityLevel-UID", rej.PriorityLevelUID)
				w.Header().Set("X-Kubernetes-PF-FlowSchema-UID", rej.FlowSchemaUID)
			}
			s.codecs.writeError(w, apierrors.NewTooManyRequests("Too many requests, please try again later.", rej.RetryAfterSeconds))
			return
		}
		s.codecs.writeError(w, apierrors.NewTimeoutError("request did not complete within the allotted timeout", 0))
	}
}

func mutatingVerb(verb, method string) bool {
	switch verb {
	case "get", "list", "watch", "watchlist":
		return false
	case "":
		return method != http.MethodGet && method != http.MethodHead && method != http.MethodOptions
	}
	return true
}

func methodVerb(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead:
		return "get"
	case http.MethodPost:
		return "post"
	case http.MethodPut:
		return "put"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	}
	return "other"
}

// serveWithTimeout routes the request with a deadline of the request
// timeout. If the handler has not answered by then the client gets 504
// (upstream's message); a handler that had begun answering has its
// connection reset, since its answer can no longer be completed.
func (s *Server) serveWithTimeout(w http.ResponseWriter, r *http.Request, info RequestInfo) {
	s.runWithTimeout(w, r, func(w http.ResponseWriter, r *http.Request) { s.route(w, r, info) })
}

func (s *Server) runWithTimeout(w http.ResponseWriter, r *http.Request, handler http.HandlerFunc) {
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	tw := &timeoutWriter{w: w}
	done := make(chan struct{})
	var panicked any
	go func() {
		defer close(done)
		defer func() {
			if p := recover(); p != nil {
				panicked = p
			}
		}()
		handler(tw, r.WithContext(ctx))
	}()
	select {
	case <-done:
		if panicked != nil {
			panic(panicked)
		}
		return
	case <-ctx.Done():
	}
	if r.Context().Err() != nil {
		// The client went away: nobody to answer.
		tw.timeout()
		return
	}
	if tw.timeout() {
		s.codecs.writeError(w, apierrors.NewTimeoutError("request did not complete within the allotted timeout", 0))
		klog.FromContext(r.Context()).V(2).Info("Request timed out", "path", r.URL.Path, "timeout", s.cfg.RequestTimeout)
		return
	}
	// Headers are out: the response cannot be completed.
	panic(http.ErrAbortHandler)
}

// timeoutWriter passes writes through until the request times out, then
// refuses them.
type timeoutWriter struct {
	mu       sync.Mutex
	w        http.ResponseWriter
	wrote    bool
	timedOut bool
}

// timeout marks the request timed out; true when nothing was written yet
// (so the caller may answer 504).
func (t *timeoutWriter) timeout() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.timedOut = true
	return !t.wrote
}

func (t *timeoutWriter) Header() http.Header { return t.w.Header() }

func (t *timeoutWriter) WriteHeader(code int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.timedOut || t.wrote {
		return
	}
	t.wrote = true
	t.w.WriteHeader(code)
}

func (t *timeoutWriter) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.timedOut {
		return 0, http.ErrHandlerTimeout
	}
	t.wrote = true
	return t.w.Write(b)
}

func (t *timeoutWriter) Flush() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.timedOut {
		return
	}
	if f, ok := t.w.(http.Flusher); ok {
		f.Flush()
	}
}

func (t *timeoutWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return nil, nil, errors.New("hijack not supported on a request with a timeout")
}

// metricLabels keeps the metric labels bounded: a request for a resource
// the server does not serve, or for an unknown non-resource path (or one
// that answered 404), is counted under the path "other", so random paths
// cannot grow the metrics without bound.
func (s *Server) metricLabels(l metrics.RequestLabels, info RequestInfo, path string, code int) metrics.RequestLabels {
	known := false
	if info.IsResourceRequest {
		known = s.servesResource(info)
	} else {
		known = code != http.StatusNotFound && (path == "/metrics" || s.servesProfiles(path) || s.health.Handles(path) || s.disco.Handles(path) ||
			s.openapi.Handles(path))
	}
	if known {
		return l
	}
	return metrics.RequestLabels{Verb: l.Verb, DryRun: l.DryRun, Subresource: "other", Component: l.Component}
}

// servesResource says the request names a built-in resource the server
// serves.
func (s *Server) servesResource(info RequestInfo) bool {
	return s.handlers[schema.GroupVersionResource{Group: info.APIGroup, Version: info.APIVersion, Resource: info.Resource}] != nil
}

// panicError is what a client sees of a panic: no internal detail.
func panicError() error {
	return apierrors.NewInternalError(fmt.Errorf("an internal error occurred while serving the request"))
}

func withOverloadDefaults(cfg Config) Config {
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.MinRequestTimeout <= 0 {
		cfg.MinRequestTimeout = DefaultMinRequestTimeout
	}
	if cfg.MaxRequestsInflight == 0 {
		cfg.MaxRequestsInflight = DefaultMaxRequestsInflight
	}
	if cfg.MaxMutatingRequestsInflight == 0 {
		cfg.MaxMutatingRequestsInflight = DefaultMaxMutatingRequestsInflight
	}
	if cfg.HTTP2MaxStreamsPerConnection <= 0 {
		cfg.HTTP2MaxStreamsPerConnection = DefaultHTTP2MaxStreamsPerConnection
	}
	if cfg.EtcdCallTimeout <= 0 {
		cfg.EtcdCallTimeout = DefaultEtcdCallTimeout
	}
	return cfg
}

// newFlowControl builds the limiter: API Priority and Fairness with the
// max-in-flight sum as its seats, or the max-in-flight limits alone.
func newFlowControl(cfg Config) (flowcontrol.Limiter, *flowcontrol.APF) {
	m := flowcontrol.NewMetrics(cfg.Registry)
	if cfg.DisablePriorityAndFairness {
		return flowcontrol.NewMaxInFlight(cfg.MaxRequestsInflight, cfg.MaxMutatingRequestsInflight, m), nil
	}
	seats := max(cfg.MaxRequestsInflight, 0) + max(cfg.MaxMutatingRequestsInflight, 0)
	apf := flowcontrol.NewAPF(flowcontrol.Options{ServerConcurrencyLimit: seats, Metrics: m})
	return apf, apf
}

// http2Config is upstream's HTTP/2 setting: the streams a client may open
// on one connection, and 256 KiB frames and per-stream buffers (the 99th
// percentile of a resource's size).
func http2Config(streams int) *http.HTTP2Config {
	const body99 = 256 * 1024
	return &http.HTTP2Config{
		MaxConcurrentStreams:          streams,
		MaxReadFrameSize:              body99,
		MaxReceiveBufferPerStream:     body99,
		MaxReceiveBufferPerConnection: body99 * streams,
	}
}

// startFlowControl writes upstream's mandatory and suggested flow-control
// objects where missing (mandatory ones are put back to upstream's spec
// unless annotated apf.kubernetes.io/autoupdate-spec=false), then keeps
// API Priority and Fairness in step with the stored objects.
func (s *Server) startFlowControl(ctx, loopCtx context.Context, wg *sync.WaitGroup) {
	if s.apf == nil {
		return
	}
	if err := s.ensureFlowControl(ctx); err != nil {
		klog.FromContext(ctx).Error(err, "Writing the flow-control configuration objects failed; serving with upstream's defaults")
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = s.apf.Start(loopCtx, flowSource{srv: s}, time.Second)
	}()
}

const autoUpdateAnnotation = "apf.kubernetes.io/autoupdate-spec"

func (s *Server) ensureFlowControl(ctx context.Context) error {
	fss, pls := flowcontrol.Bootstrap()
	mandatory := map[string]bool{
		flowcontrolv1.FlowSchemaNameExempt: true, flowcontrolv1.FlowSchemaNameCatchAll: true,
	}
	fsH := s.handlers[flowcontrolv1.SchemeGroupVersion.WithResource("flowschemas")]
	plH := s.handlers[flowcontrolv1.SchemeGroupVersion.WithResource("prioritylevelconfigurations")]
	if fsH == nil || plH == nil {
		return nil
	}
	now := metav1.NewTime(s.clock.Now().Truncate(time.Second))
	var errs []error
	for i := range pls {
		pl := &pls[i]
		regflowcontrol.DefaultPriorityLevel(pl)
		pl.UID, pl.CreationTimestamp = uuid.NewUUID(), now
		setAutoUpdate(&pl.ObjectMeta)
		errs = append(errs, ensureObject(ctx, plH, pl.Name, pl, mandatory[pl.Name], func(cur runtime.Object) bool {
			return equality.Semantic.DeepEqual(cur.(*flowcontrolv1.PriorityLevelConfiguration).Spec, pl.Spec)
		}, func(cur runtime.Object) runtime.Object {
			c := cur.(*flowcontrolv1.PriorityLevelConfiguration).DeepCopy()
			c.Spec = pl.Spec
			return c
		}))
	}
	for i := range fss {
		fs := &fss[i]
		regflowcontrol.DefaultFlowSchema(fs)
		fs.UID, fs.CreationTimestamp = uuid.NewUUID(), now
		setAutoUpdate(&fs.ObjectMeta)
		errs = append(errs, ensureObject(ctx, fsH, fs.Name, fs, mandatory[fs.Name], func(cur runtime.Object) bool {
			return equality.Semantic.DeepEqual(cur.(*flowcontrolv1.FlowSchema).Spec, fs.Spec)
		}, func(cur runtime.Object) runtime.Object {
			c := cur.(*flowcontrolv1.FlowSchema).DeepCopy()
			c.Spec = fs.Spec
			return c
		}))
	}
	return errors.Join(errs...)
}

func setAutoUpdate(m *metav1.ObjectMeta) {
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[autoUpdateAnnotation] = "true"
}

// ensureObject creates obj if missing; a mandatory one that differs from
// upstream's spec is put back, unless its owner turned auto-update off.
func ensureObject(ctx context.Context, h *resourceHandler, name string, obj runtime.Object, mandatory bool, same func(runtime.Object) bool, reset func(runtime.Object) runtime.Object) error {
	key := h.key("", name)
	err := h.store.Create(ctx, key, obj, h.res.New())
	if err == nil || !storage.IsExists(err) {
		return err
	}
	if !mandatory {
		return nil
	}
	return h.store.GuaranteedUpdate(ctx, key, h.res.New(), nil, func(cur runtime.Object) (runtime.Object, error) {
		m, err := meta.Accessor(cur)
		if err != nil {
			return nil, err
		}
		if m.GetAnnotations()[autoUpdateAnnotation] == "false" || same(cur) {
			return cur, nil
		}
		return reset(cur), nil
	})
}

// flowSource reads the flow-control objects from the watch cache.
type flowSource struct{ srv *Server }

func (f flowSource) FlowControlObjects(ctx context.Context) ([]flowcontrolv1.FlowSchema, []flowcontrolv1.PriorityLevelConfiguration, error) {
	fsList := &flowcontrolv1.FlowSchemaList{}
	plList := &flowcontrolv1.PriorityLevelConfigurationList{}
	for _, l := range []struct {
		res  string
		into runtime.Object
	}{{"flowschemas", fsList}, {"prioritylevelconfigurations", plList}} {
		h := f.srv.handlers[flowcontrolv1.SchemeGroupVersion.WithResource(l.res)]
		if h == nil || h.store == nil {
			return nil, nil, fmt.Errorf("%s are not served", l.res)
		}
		if err := h.store.List(ctx, h.listPrefix(""), storage.ListOptions{ResourceVersion: "0"}, l.into); err != nil {
			return nil, nil, err
		}
	}
	return fsList.Items, plList.Items, nil
}

// listSeats is upstream's work estimate of a list: one seat per 100
// objects it may return (the cache knows how many there are, a limit
// caps it), at least 1 and at most 10.
func (s *Server) listSeats(info RequestInfo, r *http.Request) int {
	if info.Verb != "list" {
		return 1
	}
	h := s.handlers[schema.GroupVersionResource{Group: info.APIGroup, Version: info.APIVersion, Resource: info.Resource}]
	if h == nil || h.store == nil {
		return 1
	}
	n := int64(h.store.Count())
	if lim, err := strconv.ParseInt(r.URL.Query().Get("limit"), 10, 64); err == nil && lim > 0 && lim < n {
		n = lim
	}
	return int(min(max((n+99)/100, 1), 10))
}

// SetComponentHealth makes componentstatuses report name ("scheduler",
// "controller-manager") through check, for a component running in this
// process; otherwise it is probed on upstream's healthz address.
func (s *Server) SetComponentHealth(name string, check func(context.Context) error) {
	s.components.Set(name, check)
}
