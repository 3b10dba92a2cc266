package apiserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/proxy"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/apiserver/servicerouting"
)

// The proxy subresources, as upstream's: nodes/proxy, pods/proxy and
// services/proxy relay any HTTP request (GET, HEAD, POST, PUT, PATCH,
// DELETE, OPTIONS, and upgrades to SPDY or websockets) with the rest of
// the URL path and the query to what the object names:
//
//   - nodes/[scheme:]NAME[:port]/proxy: the node's kubelet API (its port
//     and the kubelet client credentials), or another port of the node's
//     address, dialled as a pod is.
//   - pods/[scheme:]NAME[:port]/proxy: the pod's first pod IP, at port or
//     else the first port its containers declare (400 "address not
//     allowed" unless the address is a global unicast one, so the API
//     server is never pointed at its own loopback).
//   - services/[scheme:]NAME[:port]/proxy: a ready endpoint of the
//     service's port (a name, or a number the service declares),
//     servicerouting.Resolver.ProxyEndpoint; none is 503 "no endpoints
//     available for service".
//
// The scheme is http or https (pods and services are dialled without
// verifying their certificates: they serve for names the API server does
// not dial). Responses stream back; HTML links, Location headers and
// cookies' paths are rewritten under the proxy's URL and a request for
// the bare .../proxy with GET or HEAD is redirected (301) to .../proxy/,
// by apimachinery's UpgradeAwareHandler, as upstream. Each request is a
// CONNECT to admission with the v1 NodeProxyOptions, PodProxyOptions or
// ServiceProxyOptions (path: the rest of the URL path), before the object
// is read; authorization is the method's verb on the proxy subresource
// (get for GET and HEAD, create for POST, and so on; OPTIONS has none).

// proxyDialTimeout bounds one connection to a pod or an endpoint.
const proxyDialTimeout = 30 * time.Second

// proxyClient holds the transport to pods and endpoints, built once.
type proxyClient struct {
	once      sync.Once
	transport *http.Transport
}

// proxyTransport is the transport of pods/proxy, services/proxy and
// nodes/proxy to ports other than the kubelet's: TLS without verification
// (addresses are IPs, as upstream's proxy transport), no proxy from the
// environment.
func (s *Server) proxyTransport() *http.Transport {
	s.proxy.once.Do(func() {
		s.proxy.transport = &http.Transport{
			TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // pods serve for names the API server does not dial, as upstream
			DialContext:         (&net.Dialer{Timeout: proxyDialTimeout, KeepAlive: 30 * time.Second}).DialContext,
			TLSHandshakeTimeout: 10 * time.Second,
			MaxIdleConnsPerHost: 8,
			IdleConnTimeout:     90 * time.Second,
		}
	})
	return s.proxy.transport
}

// serveProxy serves nodes/proxy, pods/proxy and services/proxy.
func serveProxy(ctx context.Context, h *resourceHandler, w http.ResponseWriter, r *http.Request, info RequestInfo, _ output) {
	if len(r.URL.Query()["dryRun"]) > 0 {
		h.codecs.writeError(w, apierrors.NewBadRequest("dryRun is not supported"))
		return
	}
	path := proxyPath(r.URL.Path, info)
	if err := h.connectAdmission(ctx, info, proxyOptions(h.res.Kind, path)); err != nil {
		h.codecs.writeError(w, err)
		return
	}
	var loc *url.URL
	var transport http.RoundTripper
	var err error
	switch h.gr.Resource {
	case "nodes":
		loc, transport, err = h.srv.nodeProxyLocation(ctx, info.Name)
	case "pods":
		loc, err = podProxyLocation(ctx, h, r, info)
		transport = h.srv.proxyTransport()
	case "services":
		loc, err = h.srv.serviceProxyLocation(ctx, info)
		transport = h.srv.proxyTransport()
	default:
		err = apierrors.NewNotFound(h.gr, info.Name)
	}
	if err != nil {
		h.codecs.writeError(w, err)
		return
	}
	loc.Path = utilnet.JoinPreservingTrailingSlash(loc.Path, path)
	// A handler a request: ServeHTTP sets its link-rewriting transport
	// from the request's URL.
	p := proxy.NewUpgradeAwareHandler(loc, transport, true, false, proxyResponder{h: h})
	p.ServeHTTP(w, r)
}

// proxyPath is the part of the URL path after .../{name}/proxy, with a
// leading slash, and a trailing one when the request had it (upstream's
// subpath of a CONNECT): "" for .../proxy, "/" for .../proxy/.
func proxyPath(urlPath string, info RequestInfo) string {
	skip := 3 // api, v1, {resource}, then {name}, proxy
	if info.APIPrefix == "apis" {
		skip++
	}
	if info.Namespace != "" {
		skip += 2
	}
	parts := splitPath(urlPath)
	p := ""
	if len(parts) > skip+2 {
		p = strings.Join(parts[skip+2:], "/")
	}
	if p != "" && !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	if strings.HasSuffix(urlPath, "/") && !strings.HasSuffix(p, "/") {
		p += "/"
	}
	return p
}

// proxyOptions is the options object admission sees for a proxy request
// to a resource of kind.
func proxyOptions(kind, path string) runtime.Object {
	meta := func(k string) metav1.TypeMeta { return metav1.TypeMeta{APIVersion: "v1", Kind: k} }
	switch kind {
	case "Pod":
		return &corev1.PodProxyOptions{TypeMeta: meta("PodProxyOptions"), Path: path}
	case "Service":
		return &corev1.ServiceProxyOptions{TypeMeta: meta("ServiceProxyOptions"), Path: path}
	}
	return &corev1.NodeProxyOptions{TypeMeta: meta("NodeProxyOptions"), Path: path}
}

// splitProxyName splits a proxy subresource's [scheme:]name[:port]; an
// invalid one is 400 "invalid <what> request".
func splitProxyName(id, what string) (scheme, name, port string, err error) {
	scheme, name, port, ok := utilnet.SplitSchemeNamePort(id)
	if !ok {
		return "", "", "", apierrors.NewBadRequest(fmt.Sprintf("invalid %s request %q", what, id))
	}
	return scheme, name, port, nil
}

// nodeProxyLocation is where nodes/proxy sends a request: the kubelet API
// with its credentials when no port or the kubelet's is asked for, else
// the node's address at that port over the pod proxy transport.
func (s *Server) nodeProxyLocation(ctx context.Context, id string) (*url.URL, http.RoundTripper, error) {
	scheme, name, port, err := splitProxyName(id, "node")
	if err != nil {
		return nil, nil, err
	}
	kubelet, err := s.kubeletURL(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	if port == "" || port == kubelet.Port() {
		transport, err := s.kubeletTransport()
		if err != nil {
			return nil, nil, err
		}
		return kubelet, transport, nil
	}
	return &url.URL{Scheme: scheme, Host: net.JoinHostPort(kubelet.Hostname(), port)}, s.proxyTransport(), nil
}

// podProxyLocation is where pods/proxy sends a request, as upstream's pod
// ResourceLocation.
func podProxyLocation(ctx context.Context, h *resourceHandler, r *http.Request, info RequestInfo) (*url.URL, error) {
	scheme, name, port, err := splitProxyName(info.Name, "pod")
	if err != nil {
		return nil, err
	}
	getReq := r.Clone(ctx)
	getReq.URL.RawQuery = ""
	obj, err := h.get(ctx, getReq, RequestInfo{Namespace: info.Namespace, Name: name})
	if err != nil {
		return nil, err
	}
	pod := obj.(*corev1.Pod)
	if port == "" {
		for _, c := range pod.Spec.Containers {
			if len(c.Ports) > 0 {
				port = strconv.Itoa(int(c.Ports[0].ContainerPort))
				break
			}
		}
	}
	ip := ""
	if len(pod.Status.PodIPs) > 0 {
		ip = pod.Status.PodIPs[0].IP
	}
	if addr := net.ParseIP(ip); addr == nil || !addr.IsGlobalUnicast() {
		return nil, apierrors.NewBadRequest("address not allowed")
	}
	loc := &url.URL{Scheme: scheme, Host: net.JoinHostPort(ip, port)}
	if port == "" {
		loc.Host = ip
		if strings.Contains(ip, ":") {
			loc.Host = "[" + ip + "]"
		}
	}
	return loc, nil
}

// serviceProxyLocation is where services/proxy sends a request.
func (s *Server) serviceProxyLocation(ctx context.Context, info RequestInfo) (*url.URL, error) {
	scheme, name, port, err := splitProxyName(info.Name, "service")
	if err != nil {
		return nil, err
	}
	hostPort, err := servicerouting.New(reader{srv: s}).ProxyEndpoint(ctx, info.Namespace, name, port, s.primaryServiceFamily())
	if err != nil {
		return nil, err
	}
	return &url.URL{Scheme: scheme, Host: hostPort}, nil
}

// primaryServiceFamily is the IP family of the first service CIDR.
func (s *Server) primaryServiceFamily() corev1.IPFamily {
	first, _, _ := strings.Cut(s.cfg.ServiceCIDR, ",")
	if strings.Contains(first, ":") {
		return corev1.IPv6Protocol
	}
	return corev1.IPv4Protocol
}

// proxyResponder writes the errors of a proxied request: API errors as
// they are (the link-rewriting transport makes a connection failure 503
// "error trying to reach service"), others as a 500 Status with the
// error's text, as upstream's connect responder.
type proxyResponder struct{ h *resourceHandler }

func (p proxyResponder) Error(w http.ResponseWriter, r *http.Request, err error) {
	klog.FromContext(r.Context()).V(2).Info("Proxy failed", "path", r.URL.Path, "err", err)
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		err = &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Message: err.Error()}}
	}
	p.h.codecs.writeError(w, err)
}
