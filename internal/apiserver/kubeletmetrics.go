package apiserver

import (
	"context"
	"fmt"
	"io"
	"net/http"

	corev1 "k8s.io/api/core/v1"
)

// kubeletMetrics is the resource metrics pipeline's way to the nodes: the
// nodes from the server's own cache, each kubelet's /metrics/resource over
// the same client certificate the log and exec proxies use.
type kubeletMetrics struct{ s *Server }

// Nodes lists the nodes that have an address to reach a kubelet at.
func (k kubeletMetrics) Nodes(ctx context.Context) ([]string, error) {
	var nodes corev1.NodeList
	if err := (reader{srv: k.s}).List(ctx, corev1.SchemeGroupVersion.WithResource("nodes"), "", false, &nodes); err != nil {
		return nil, err
	}
	var out []string
	for i := range nodes.Items {
		if nodeAddress(&nodes.Items[i]) != "" {
			out = append(out, nodes.Items[i].Name)
		}
	}
	return out, nil
}

// Scrape reads one kubelet's /metrics/resource.
func (k kubeletMetrics) Scrape(ctx context.Context, node string) (io.ReadCloser, error) {
	u, err := k.s.kubeletURL(ctx, node)
	if err != nil {
		return nil, err
	}
	u.Path = "/metrics/resource"
	transport, err := k.s.kubeletTransport()
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := transport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("kubelet on %s answered %s", node, resp.Status)
	}
	return resp.Body, nil
}
