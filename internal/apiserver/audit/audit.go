package audit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/google/uuid"
	"gopkg.in/natefinch/lumberjack.v2"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/apiserver/authn"
)

// LogOptions say where events go, as upstream's --audit-log-* flags.
type LogOptions struct {
	// Path is the log file; "-" is stdout.
	Path string
	// MaxSize is the size in megabytes at which the file is rotated
	// (0: never); MaxBackups the rotated files kept (0: all); MaxAge the
	// days they are kept (0: forever).
	MaxSize, MaxBackups, MaxAge int
	// Compress gzips rotated files.
	Compress bool
	// Webhook sends the events to a remote service too (webhook.go); with
	// it, Path may be empty.
	Webhook WebhookOptions
}

// Auditor applies a policy and writes the events.
type Auditor struct {
	policy *Policy
	clock  clock.PassiveClock
	mu     sync.Mutex
	out    io.WriteCloser // nil: no log file
	hook   *webhook       // nil: no webhook
}

// maxBody bounds the request and response bodies kept in an event.
const maxBody = 1 << 20

// New builds an auditor writing to opts.Path. c is the time of events (nil:
// the real clock).
func New(policy *Policy, opts LogOptions, c clock.PassiveClock) (*Auditor, error) {
	if c == nil {
		c = clock.RealClock{}
	}
	a := &Auditor{policy: policy, clock: c}
	if opts.Webhook.ConfigFile != "" {
		w, err := newWebhook(opts.Webhook)
		if err != nil {
			return nil, err
		}
		a.hook = w
	}
	switch opts.Path {
	case "":
		if a.hook == nil {
			return nil, errors.New("audit: a log path is required")
		}
	case "-":
		a.out = nopCloser{os.Stdout}
	default:
		// Fail now, not at the first request, when the file cannot be made.
		f, err := os.OpenFile(opts.Path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return nil, err
		}
		f.Close()
		a.out = &lumberjack.Logger{Filename: opts.Path, MaxSize: opts.MaxSize, MaxBackups: opts.MaxBackups, MaxAge: opts.MaxAge, Compress: opts.Compress}
	}
	return a, nil
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// Close closes the log.
func (a *Auditor) Close() error {
	if a == nil {
		return nil
	}
	if a.hook != nil {
		a.hook.close()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.out == nil {
		return nil
	}
	return a.out.Close()
}

func (a *Auditor) write(ev *auditv1.Event) {
	ev.TypeMeta = metav1.TypeMeta{APIVersion: "audit.k8s.io/v1", Kind: "Event"}
	b, err := json.Marshal(ev)
	if err != nil {
		klog.ErrorS(err, "Audit event not written", "auditID", ev.AuditID)
		return
	}
	if a.hook != nil {
		a.hook.process(ev)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.out == nil {
		return
	}
	if _, err := a.out.Write(append(b, '\n')); err != nil {
		klog.ErrorS(err, "Audit event not written", "auditID", ev.AuditID)
	}
}

// Request is one audited request in flight.
type Request struct {
	a      *Auditor
	toJSON func(string, []byte) ([]byte, bool)
	ev     auditv1.Event
	omit   []auditv1.Stage
	long   bool
	resp   *bodyRecorder
	mu     sync.Mutex
	ended  bool
}

// Begin decides whether a request is audited; when it is, it logs the
// RequestReceived stage, keeps the request body (level Request and above)
// and returns the Request whose End must be called. It sets the Audit-Id
// response header as upstream. w is the response writer to record the
// response through (level RequestResponse); use the one returned.
//
// toJSON turns a body of some content type into JSON (protobuf and YAML
// bodies are logged as upstream logs them, as JSON objects); false means it
// cannot, and the body is left out.
func (a *Auditor) Begin(w http.ResponseWriter, r *http.Request, attrs Attributes, apiVersion string, toJSON func(contentType string, body []byte) ([]byte, bool)) (*Request, http.ResponseWriter) {
	if a == nil {
		return nil, w
	}
	id := r.Header.Get("Audit-ID")
	if id == "" {
		id = uuid.NewString()
	}
	w.Header().Set("Audit-Id", id)
	level, omit := a.policy.Decide(attrs)
	if level == auditv1.LevelNone {
		return nil, w
	}
	now := metav1.NewMicroTime(a.clock.Now())
	ev := auditv1.Event{
		Level: level, AuditID: types.UID(id), Stage: auditv1.StageRequestReceived,
		RequestURI: r.URL.RequestURI(), Verb: attrs.Verb, UserAgent: r.UserAgent(),
		SourceIPs:                sourceIPs(r),
		RequestReceivedTimestamp: now, StageTimestamp: now,
	}
	if attrs.User != nil {
		ev.User = userInfo(attrs.User)
	}
	if attrs.ResourceRequest {
		ev.ObjectRef = &auditv1.ObjectReference{Resource: attrs.Resource, Namespace: attrs.Namespace, Name: attrs.Name,
			APIGroup: attrs.APIGroup, APIVersion: apiVersion, Subresource: attrs.Subresource}
	}
	req := &Request{a: a, ev: ev, omit: omit, toJSON: toJSON, long: attrs.Verb == "watch" || strings.HasPrefix(r.Header.Get("Upgrade"), "SPDY") || attrs.Subresource == "exec" || attrs.Subresource == "attach" || attrs.Subresource == "portforward"}
	// The request body: kept from level Request on; for a create, the
	// object's name goes into objectRef at every level (as upstream).
	wantBody := level != auditv1.LevelMetadata || (attrs.Verb == "create" && attrs.Name == "")
	if wantBody && r.Body != nil && r.ContentLength != 0 {
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
		if js, ok := req.json(r.Header.Get("Content-Type"), body); err == nil && len(body) <= maxBody && ok {
			body = js
			if level != auditv1.LevelMetadata {
				req.ev.RequestObject = &runtime.Unknown{Raw: body, ContentType: runtime.ContentTypeJSON}
			}
			var obj struct {
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if req.ev.ObjectRef != nil && req.ev.ObjectRef.Name == "" && json.Unmarshal(body, &obj) == nil {
				req.ev.ObjectRef.Name = obj.Metadata.Name
			}
		}
	}
	req.emit(auditv1.StageRequestReceived)
	req.resp = &bodyRecorder{ResponseWriter: w, req: req, keep: level == auditv1.LevelRequestResponse && !req.long}
	return req, req.resp
}

// Impersonated records the user the request acts as.
func (q *Request) Impersonated(u *authn.User) {
	if q == nil || u == nil {
		return
	}
	ui := userInfo(u)
	q.mu.Lock()
	q.ev.ImpersonatedUser = &ui
	q.mu.Unlock()
}

// Annotate adds an annotation (e.g. authorization.k8s.io/decision) to
// the stages logged from now on. The first value of a key stands, as
// upstream's: a later, different one is dropped with a log line.
func (q *Request) Annotate(key, value string) {
	if q == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if old, ok := q.ev.Annotations[key]; ok {
		if old != value {
			klog.InfoS("Audit annotation already set, new value dropped", "auditID", q.ev.AuditID, "key", key, "value", old, "dropped", value)
		}
		return
	}
	if q.ev.Annotations == nil {
		q.ev.Annotations = map[string]string{}
	}
	q.ev.Annotations[key] = value
}

type requestKey struct{}

// WithRequest returns a context that carries q, so that the handlers the
// request passes (authorization, admission plugins, webhooks, policies)
// can annotate its event (AddAnnotations). q may be nil (not audited).
func WithRequest(ctx context.Context, q *Request) context.Context {
	return context.WithValue(ctx, requestKey{}, q)
}

// AddAnnotations adds key, value pairs to the audit event of the
// request in ctx (WithRequest), as upstream's audit.AddAuditAnnotations;
// nothing happens when the request is not audited.
func AddAnnotations(ctx context.Context, keysAndValues ...string) {
	q, _ := ctx.Value(requestKey{}).(*Request)
	if q == nil {
		return
	}
	for i := 0; i+1 < len(keysAndValues); i += 2 {
		q.Annotate(keysAndValues[i], keysAndValues[i+1])
	}
}

// Unauthenticated logs a request whose credentials were refused (401), as
// upstream's failed-authentication audit: the policy decides for the
// request without a user, and a ResponseStarted event (unless the rule
// omits it) carries the code and which credentials were tried
// ("Authentication failed, attempted: bearer"). The response gets its
// Audit-Id header.
func (a *Auditor) Unauthenticated(w http.ResponseWriter, r *http.Request, attrs Attributes, apiVersion string) {
	if a == nil {
		return
	}
	id := r.Header.Get("Audit-ID")
	if id == "" {
		id = uuid.NewString()
	}
	w.Header().Set("Audit-Id", id)
	attrs.User = nil
	level, omit := a.policy.Decide(attrs)
	if level == auditv1.LevelNone || slices.Contains(omit, auditv1.StageResponseStarted) {
		return
	}
	now := metav1.NewMicroTime(a.clock.Now())
	ev := auditv1.Event{
		Level: level, AuditID: types.UID(id), Stage: auditv1.StageResponseStarted,
		RequestURI: r.URL.RequestURI(), Verb: attrs.Verb, UserAgent: r.UserAgent(), SourceIPs: sourceIPs(r),
		ResponseStatus:           &metav1.Status{Code: http.StatusUnauthorized, Message: failedAuthMessage(r)},
		RequestReceivedTimestamp: now, StageTimestamp: now,
	}
	if attrs.ResourceRequest {
		ev.ObjectRef = &auditv1.ObjectReference{Resource: attrs.Resource, Namespace: attrs.Namespace, Name: attrs.Name,
			APIGroup: attrs.APIGroup, APIVersion: apiVersion, Subresource: attrs.Subresource}
	}
	a.write(&ev)
}

// failedAuthMessage names the credentials a refused request carried, in
// upstream's words.
func failedAuthMessage(r *http.Request) string {
	var tried []string
	if _, _, ok := r.BasicAuth(); ok {
		tried = append(tried, "basic")
	}
	if parts := strings.Split(strings.TrimSpace(r.Header.Get("Authorization")), " "); len(parts) > 1 && strings.EqualFold(parts[0], "bearer") {
		tried = append(tried, "bearer")
	}
	if strings.TrimSpace(r.URL.Query().Get("access_token")) != "" {
		tried = append(tried, "access_token")
	}
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		tried = append(tried, "x509")
	}
	if len(tried) == 0 {
		return "Authentication failed, no credentials provided"
	}
	return "Authentication failed, attempted: " + strings.Join(tried, ", ")
}

// End logs ResponseComplete with the response's code (200 when nothing
// was written), or Panic when panicked.
func (q *Request) End(code int, panicked bool) {
	if q == nil {
		return
	}
	q.mu.Lock()
	if q.ended {
		q.mu.Unlock()
		return
	}
	q.ended = true
	q.mu.Unlock()
	if code == 0 {
		code = http.StatusOK
	}
	q.ev.ResponseStatus = &metav1.Status{Code: int32(code)}
	stage := auditv1.StageResponseComplete
	if panicked {
		stage = auditv1.StagePanic
		q.ev.ResponseStatus = &metav1.Status{Code: http.StatusInternalServerError, Status: metav1.StatusFailure, Message: "APIServer panic'd"}
	} else if code >= 400 {
		q.ev.ResponseStatus.Status = metav1.StatusFailure
		if st := q.resp.status(); st != nil {
			q.ev.ResponseStatus.Message, q.ev.ResponseStatus.Reason = st.Message, st.Reason
		}
	}
	if q.resp.keep && q.ev.Level == auditv1.LevelRequestResponse && q.resp.buf.Len() > 0 && !q.resp.overflow {
		if js, ok := q.json(q.resp.Header().Get("Content-Type"), q.resp.buf.Bytes()); ok {
			q.ev.ResponseObject = &runtime.Unknown{Raw: js, ContentType: runtime.ContentTypeJSON}
		}
	}
	q.emit(stage)
}

func (q *Request) emit(stage auditv1.Stage) {
	if slices.Contains(q.omit, stage) {
		return
	}
	q.mu.Lock()
	ev := q.ev
	ev.Annotations = maps.Clone(q.ev.Annotations) // later annotations may be added meanwhile
	q.mu.Unlock()
	ev.Stage = stage
	ev.StageTimestamp = metav1.NewMicroTime(q.a.clock.Now())
	if stage == auditv1.StageRequestReceived || stage == auditv1.StageResponseStarted {
		ev.ResponseObject, ev.ResponseStatus = nil, nil
	}
	q.a.write(&ev)
}

func userInfo(u *authn.User) authnv1.UserInfo {
	ui := authnv1.UserInfo{Username: u.Name, UID: u.UID, Groups: u.Groups}
	if len(u.Extra) > 0 {
		ui.Extra = map[string]authnv1.ExtraValue{}
		for k, v := range u.Extra {
			ui.Extra[k] = v
		}
	}
	return ui
}

func sourceIPs(r *http.Request) []string {
	var ips []string
	for _, f := range strings.Split(r.Header.Get("X-Forwarded-For"), ",") {
		if f = strings.TrimSpace(f); net.ParseIP(f) != nil {
			ips = append(ips, f)
		}
	}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil && !slices.Contains(ips, host) {
		ips = append(ips, host)
	}
	return ips
}

// json is body as JSON: as it is when it is JSON, else through toJSON.
func (q *Request) json(contentType string, body []byte) ([]byte, bool) {
	ct := strings.ToLower(strings.TrimSpace(strings.Split(contentType, ";")[0]))
	if ct == "" || ct == "application/json" || strings.HasSuffix(ct, "+json") {
		return body, json.Valid(body)
	}
	if q.toJSON == nil {
		return nil, false
	}
	return q.toJSON(ct, body)
}

// bodyRecorder passes a response through, keeping its body (up to
// maxBody) for RequestResponse, and logs ResponseStarted for long-running
// requests when the headers go out.
type bodyRecorder struct {
	http.ResponseWriter
	req      *Request
	keep     bool
	buf      bytes.Buffer
	overflow bool
	started  bool
	code     int
	errBody  bytes.Buffer
}

func (b *bodyRecorder) WriteHeader(code int) {
	if !b.started {
		b.started, b.code = true, code
		if b.req.long {
			b.req.ev.ResponseStatus = &metav1.Status{Code: int32(code)}
			b.req.emit(auditv1.StageResponseStarted)
		}
	}
	b.ResponseWriter.WriteHeader(code)
}

func (b *bodyRecorder) Write(p []byte) (int, error) {
	if !b.started {
		b.WriteHeader(http.StatusOK)
	}
	if b.keep && !b.overflow {
		if b.buf.Len()+len(p) > maxBody {
			b.overflow = true
		} else {
			b.buf.Write(p)
		}
	}
	if b.code >= 400 && b.errBody.Len() < 64<<10 {
		b.errBody.Write(p)
	}
	return b.ResponseWriter.Write(p)
}

// status is the metav1.Status an error response carried, if any.
func (b *bodyRecorder) status() *metav1.Status {
	var st metav1.Status
	if b.errBody.Len() == 0 || json.Unmarshal(b.errBody.Bytes(), &st) != nil {
		return nil
	}
	return &st
}

func (b *bodyRecorder) Flush() {
	if f, ok := b.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (b *bodyRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if h, ok := b.ResponseWriter.(http.Hijacker); ok {
		if !b.started {
			b.started = true
			if b.req.long {
				b.req.ev.ResponseStatus = &metav1.Status{Code: http.StatusSwitchingProtocols}
				b.req.emit(auditv1.StageResponseStarted)
			}
		}
		return h.Hijack()
	}
	return nil, nil, errors.New("hijack not supported")
}

func (b *bodyRecorder) Unwrap() http.ResponseWriter { return b.ResponseWriter }
