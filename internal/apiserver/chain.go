package apiserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/apiserver/audit"
	"github.com/skiff-sh/skiff/internal/apiserver/authn"
	"github.com/skiff-sh/skiff/internal/apiserver/authz"
	"github.com/skiff-sh/skiff/internal/apiserver/metrics"
)

// publicPaths answer without authentication, as upstream's
// system:public-info-viewer role allows.
func publicPath(p string) bool {
	for _, pre := range []string{"/healthz", "/livez", "/readyz", "/version"} {
		if p == pre || strings.HasPrefix(p, pre+"/") {
			return true
		}
	}
	return false
}

// hasCredentials says whether r carries a bearer token or basic
// credentials or a client certificate.
func hasCredentials(r *http.Request) bool {
	return r.Header.Get("Authorization") != "" || (r.TLS != nil && len(r.TLS.PeerCertificates) > 0)
}

type ctxKey int

const warningsKey ctxKey = iota

type warningRecorder struct {
	mu sync.Mutex
	w  http.ResponseWriter
	n  int
}

func (r *warningRecorder) add(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n >= 100 {
		return
	}
	r.n++
	r.w.Header().Add("Warning", fmt.Sprintf("299 - %q", msg))
}

func warningsFrom(ctx context.Context) *warningRecorder {
	r, _ := ctx.Value(warningsKey).(*warningRecorder)
	return r
}

// statusWriter remembers the response code and keeps Flush working for
// watches.
type statusWriter struct {
	http.ResponseWriter
	code int
	size int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.size += n
	return n, err
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if h, ok := w.ResponseWriter.(http.Hijacker); ok {
		return h.Hijack()
	}
	return nil, nil, errors.New("hijack not supported")
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// buildChain wraps the router: panic recovery, metrics, authentication,
// authorization.
func (s *Server) buildChain() http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		start := time.Now()
		info := parseRequestInfo(r)
		w := &statusWriter{ResponseWriter: rw}
		mi := metrics.RequestInfo{
			Method: r.Method, Verb: info.Verb, ContentType: r.Header.Get("Content-Type"), DryRun: r.URL.Query()["dryRun"],
			IsResourceRequest: info.IsResourceRequest, APIGroup: info.APIGroup, APIVersion: info.APIVersion,
			Resource: info.Resource, Subresource: info.Subresource, Namespace: info.Namespace, Name: info.Name, Path: r.URL.Path,
		}
		labels := s.metricLabels(metrics.LabelsFor(mi, metrics.ComponentAPIServer), info, r.URL.Path, 0)
		if info.Verb == "watch" {
			done := s.metrics.TrackLongRunning(labels)
			defer done()
		} else {
			done := s.metrics.TrackInflight(r.Method != http.MethodGet && r.Method != http.MethodHead)
			defer done()
		}
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				klog.FromContext(r.Context()).Error(fmt.Errorf("%v", p), "panic serving request", "path", r.URL.Path)
				if w.code == 0 {
					s.codecs.writeError(w, panicError()) // no internal detail to the client
				}
			}
			if w.code == 0 {
				w.code = http.StatusOK
			}
			if info.Verb != "watch" {
				s.metrics.ObserveRequestSize(s.metricLabels(labels, info, r.URL.Path, w.code), w.code, time.Since(start), w.size)
			}
		}()
		ctx := context.WithValue(r.Context(), warningsKey, &warningRecorder{w: w})

		user, ok, err := s.authn.Authenticate(r)
		if err != nil || !ok {
			// Only a request without credentials is anonymous: refused
			// ones are 401 on every path, as upstream's (its bearer token
			// authenticator calls an unknown token invalid).
			if !hasCredentials(r) && (publicPath(r.URL.Path) || s.serviceAccounts.discoveryPath(r.URL.Path)) {
				user = &authn.User{Name: "system:anonymous", Groups: []string{"system:unauthenticated"}}
			} else {
				// Audited as upstream audits failed authentication.
				s.auditUnauthenticated(w, r, info)
				s.codecs.writeError(w, apierrors.NewUnauthorized("Unauthorized"))
				return
			}
		}
		if ok && err == nil {
			// The credentials have done their work: what the request is
			// relayed to (a pod, a service, a kubelet) never sees them, as
			// upstream's authentication filter drops them.
			r.Header.Del("Authorization")
		}
		ctx = authn.WithUser(ctx, user)
		attrs := requestAttributes(r, info, user)
		// The audit log (auditing.go), for what the policy keeps.
		ar := s.beginAudit(w, r, info, attrs)
		defer s.endAudit(ar, w)
		// Authorization, admission plugins, webhooks and policies annotate
		// the event through the context.
		ctx = audit.WithRequest(ctx, ar)
		// Impersonate-* headers (impersonation.go): the request then acts
		// as the impersonated user.
		imp, err := impersonate(r.WithContext(ctx), s.authz, attrs)
		if err != nil {
			s.codecs.writeError(w, err)
			return
		}
		if imp != nil {
			ar.Impersonated(imp.User)
			user, attrs.User = imp.User, imp.User
			ctx = authn.WithUser(ctx, user)
		}
		if !publicPath(r.URL.Path) {
			// An authorizer may meet errors and still allow (upstream).
			decision, reason, err := s.authz.Authorize(ctx, attrs)
			if decision == authz.Allow {
				ar.Annotate(auditDecisionKey, "allow")
				ar.Annotate(auditReasonKey, reason)
			} else {
				if err != nil {
					klog.FromContext(ctx).V(2).Info("Authorization error", "err", err)
				}
				ar.Annotate(auditDecisionKey, "forbid")
				ar.Annotate(auditReasonKey, reason)
				msg := authz.ForbiddenMessage(attrs)
				if reason != "" {
					msg += ": " + reason
				}
				s.codecs.writeError(w, apierrors.NewForbidden(schema.GroupResource{Group: info.APIGroup, Resource: info.Resource}, info.Name, errors.New(msg)))
				return
			}
		}
		s.serveLimited(w, r.WithContext(ctx), info) // flow control and timeouts (overload.go), then route
	})
}

func (s *Server) route(w http.ResponseWriter, r *http.Request, info RequestInfo) {
	switch {
	case r.URL.Path == "/metrics":
		s.metrics.Handler().ServeHTTP(w, r)
		return
	case s.health.Handles(r.URL.Path):
		s.health.ServeHTTP(w, r)
		return
	case s.servesProfiles(r.URL.Path):
		serveProfiles(w, r)
		return
	case s.aggregation.agg.ServeProxy(w, r): // remote group versions (aggregation.go)
		return
	case s.disco.Handles(r.URL.Path):
		s.disco.ServeHTTP(w, r)
		return
	case s.openapi.Handles(r.URL.Path):
		s.openapi.ServeHTTP(w, r)
		return
	case s.serviceAccounts.serveDiscovery(w, r):
		return
	}
	if info.IsResourceRequest {
		h := s.handlerFor(schema.GroupVersionResource{Group: info.APIGroup, Version: info.APIVersion, Resource: info.Resource})
		if h != nil {
			h.serve(w, r, info)
			return
		}
	}
	s.codecs.writeError(w, apierrors.NewGenericServerResponse(http.StatusNotFound, "", schema.GroupResource{}, "", "the server could not find the requested resource", 0, false))
}
