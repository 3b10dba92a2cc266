package apiserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/proxy"
	"k8s.io/klog/v2"
	"k8s.io/streaming/pkg/httpstream/wsstream"
)

// The kubelet connection: pods/log, exec, attach, portforward and
// nodes/proxy (proxy.go) reach the node's kubelet API (port 10250) at the node's
// InternalIP (then ExternalIP, then Hostname) and the port in
// status.daemonEndpoints.kubeletEndpoint, presenting the
// apiserver-kubelet-client certificate (Config.KubeletClientTLS) and
// verifying the kubelet's serving certificate against the cluster CA.
// Streaming upgrades (SPDY, websockets) pass through untouched; the
// kubelet translates what its runtime does not speak.

const defaultKubeletPort = 10250

// kubeletClient holds the transport to kubelets, built once.
type kubeletClient struct {
	once      sync.Once
	transport *http.Transport
}

func (s *Server) kubeletTransport() (*http.Transport, error) {
	if s.cfg.KubeletClientTLS == nil {
		return nil, apierrors.NewServiceUnavailable("this API server has no kubelet client credentials")
	}
	s.kubelet.once.Do(func() {
		s.kubelet.transport = &http.Transport{
			TLSClientConfig:     s.cfg.KubeletClientTLS.Clone(),
			DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			TLSHandshakeTimeout: 10 * time.Second,
			MaxIdleConnsPerHost: 8,
			IdleConnTimeout:     90 * time.Second,
		}
	})
	return s.kubelet.transport, nil
}

// kubeletURL is the base URL of a node's kubelet API.
func (s *Server) kubeletURL(ctx context.Context, nodeName string) (*url.URL, error) {
	h := s.handlers[corev1.SchemeGroupVersion.WithResource("nodes")]
	if h == nil {
		return nil, apierrors.NewServiceUnavailable("nodes are not served")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	obj, err := h.get(ctx, req, RequestInfo{Name: nodeName})
	if err != nil {
		return nil, err
	}
	node := obj.(*corev1.Node)
	host := nodeAddress(node)
	if host == "" {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("node %q has no address to reach its kubelet (known addresses: %v)", nodeName, node.Status.Addresses))
	}
	port := int(node.Status.DaemonEndpoints.KubeletEndpoint.Port)
	if port <= 0 {
		port = defaultKubeletPort
	}
	return &url.URL{Scheme: "https", Host: net.JoinHostPort(host, strconv.Itoa(port))}, nil
}

// nodeAddress picks the address to reach a kubelet at.
func nodeAddress(node *corev1.Node) string {
	for _, t := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP, corev1.NodeHostName} {
		for _, a := range node.Status.Addresses {
			if a.Type == t && a.Address != "" {
				return a.Address
			}
		}
	}
	return ""
}

// proxyToKubelet proxies r to loc on the kubelet: upgrades (SPDY,
// websockets) are dialled and copied both ways; plain requests go through a
// reverse proxy that streams the response.
func (s *Server) proxyToKubelet(w http.ResponseWriter, r *http.Request, loc *url.URL, upgradeRequired bool, gr schema.GroupResource, name string) {
	transport, err := s.kubeletTransport()
	if err != nil {
		s.codecs.writeError(w, err)
		return
	}
	h := proxy.NewUpgradeAwareHandler(loc, transport, false, upgradeRequired, kubeletResponder{s: s, gr: gr, name: name})
	h.UseLocationHost = true
	h.FlushInterval = 100 * time.Millisecond
	h.RejectForwardingRedirects = true
	h.ServeHTTP(w, r)
}

// kubeletResponder turns a failure to reach the kubelet into 503.
type kubeletResponder struct {
	s    *Server
	gr   schema.GroupResource
	name string
}

func (k kubeletResponder) Error(w http.ResponseWriter, r *http.Request, err error) {
	klog.FromContext(r.Context()).V(2).Info("Kubelet proxy failed", "path", r.URL.Path, "err", err)
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		k.s.codecs.writeError(w, err)
		return
	}
	k.s.codecs.writeError(w, apierrors.NewServiceUnavailable(fmt.Sprintf("error trying to reach the kubelet: %v", err)))
}

// streamFromKubelet GETs loc and copies the kubelet's answer to w as it
// arrives (pods/log). A kubelet error becomes a Status with its code and
// text, as upstream's response checker makes it.
func (s *Server) streamFromKubelet(w http.ResponseWriter, r *http.Request, loc *url.URL, gr schema.GroupResource, name string) {
	transport, err := s.kubeletTransport()
	if err != nil {
		s.codecs.writeError(w, err)
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, loc.String(), nil)
	if err != nil {
		s.codecs.writeError(w, apierrors.NewInternalError(err))
		return
	}
	resp, err := transport.RoundTrip(req)
	if err != nil {
		s.codecs.writeError(w, apierrors.NewServiceUnavailable(fmt.Sprintf("error trying to reach the kubelet: %v", err)))
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 206 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 50000))
		text := strings.TrimSpace(string(body))
		switch resp.StatusCode {
		case http.StatusInternalServerError:
			s.codecs.writeError(w, apierrors.NewInternalError(errors.New(text)))
		case http.StatusBadRequest:
			s.codecs.writeError(w, apierrors.NewBadRequest(text))
		default:
			s.codecs.writeError(w, apierrors.NewGenericServerResponse(resp.StatusCode, "", gr, name, text, 0, false))
		}
		return
	}
	if wsstream.IsWebSocketRequest(r) {
		// As upstream's stream responses: over a websocket each read is
		// a message, raw ("binary.k8s.io" or no protocol) or base64
		// ("base64.binary.k8s.io"), with pings while the log is quiet.
		_ = wsstream.NewReader(resp.Body, true, wsstream.NewDefaultReaderProtocols()).Copy(w, r)
		return
	}
	ct := resp.Header.Get("Content-Type")
	if ct == "" {
		ct = "text/plain"
	}
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	buf := make([]byte, 32*1024)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		if rerr != nil {
			return
		}
	}
}
