package apiserver

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/skiff-sh/skiff/internal/apiserver/audit"
	"github.com/skiff-sh/skiff/internal/apiserver/authz"
)

// beginAudit starts the audit of a request (nil when Config.Audit is unset
// or the policy keeps nothing of it); the response then passes through the
// auditor's recorder.
func (s *Server) beginAudit(w *statusWriter, r *http.Request, info RequestInfo, attrs authz.Attributes) *audit.Request {
	q, rw := s.cfg.Audit.Begin(w.ResponseWriter, r, audit.Attributes{
		User: attrs.User, Verb: attrs.Verb, APIGroup: attrs.APIGroup, Resource: attrs.Resource, Subresource: attrs.Subresource,
		Namespace: attrs.Namespace, Name: attrs.Name, Path: attrs.Path, ResourceRequest: attrs.ResourceRequest,
	}, info.APIVersion, s.auditJSON)
	w.ResponseWriter = rw
	return q
}

// The audit annotations of the authorization decision, upstream's.
const (
	auditDecisionKey = "authorization.k8s.io/decision"
	auditReasonKey   = "authorization.k8s.io/reason"
)

// auditUnauthenticated logs a request refused for its credentials.
func (s *Server) auditUnauthenticated(w *statusWriter, r *http.Request, info RequestInfo) {
	attrs := requestAttributes(r, info, nil)
	s.cfg.Audit.Unauthenticated(w, r, audit.Attributes{
		Verb: attrs.Verb, APIGroup: attrs.APIGroup, Resource: attrs.Resource, Subresource: attrs.Subresource,
		Namespace: attrs.Namespace, Name: attrs.Name, Path: attrs.Path, ResourceRequest: attrs.ResourceRequest,
	}, info.APIVersion)
}

// endAudit logs the end of an audited request: ResponseComplete with its
// code, or Panic (and the panic goes on to the chain's recovery).
func (s *Server) endAudit(q *audit.Request, w *statusWriter) {
	if p := recover(); p != nil {
		q.End(0, true)
		panic(p)
	}
	q.End(w.code, false)
}

// auditJSON turns a protobuf or YAML body into JSON for the audit log.
func (s *Server) auditJSON(contentType string, body []byte) ([]byte, bool) {
	switch {
	case strings.HasPrefix(contentType, "application/vnd.kubernetes.protobuf"):
		obj, _, err := s.codecs.protobuf.Decode(body, nil, nil)
		if err != nil {
			return nil, false
		}
		b, err := json.Marshal(obj)
		return b, err == nil
	case strings.Contains(contentType, "yaml"):
		b, err := yamlToJSON(body)
		return b, err == nil
	}
	return nil, false
}
