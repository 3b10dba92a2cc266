package crd

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/uuid"
)

// Converter converts a custom resource to another version of its CRD.
type Converter interface {
	Convert(obj *unstructured.Unstructured, to schema.GroupVersion) (*unstructured.Unstructured, error)
}

// noneConverter is conversion None: only apiVersion changes.
type noneConverter struct{}

func (noneConverter) Convert(obj *unstructured.Unstructured, to schema.GroupVersion) (*unstructured.Unstructured, error) {
	out := obj.DeepCopy()
	out.SetAPIVersion(to.String())
	return out, nil
}

// webhookConverter is conversion Webhook: a ConversionReview POSTed to the
// CRD's webhook (a URL, or a service reference dialed through the
// server's ServiceDialer), whose answer must carry the object in the
// asked version with its identity unchanged, as upstream checks.
type webhookConverter struct {
	crd     string
	url     string
	review  string // the ConversionReview apiVersion the webhook accepts
	client  *http.Client
	timeout time.Duration
}

// ServiceDialer dials the endpoints of a service
// (servicerouting.Resolver): a connection to <name>.<namespace>.svc:port
// goes to one of the service's ready endpoints.
type ServiceDialer interface {
	DialContext(namespace, name string, port int32) func(ctx context.Context, network, addr string) (net.Conn, error)
}

func newConverter(crd *apiextensionsv1.CustomResourceDefinition, services ServiceDialer) (Converter, error) {
	conv := crd.Spec.Conversion
	if conv == nil || conv.Strategy != apiextensionsv1.WebhookConverter {
		return noneConverter{}, nil
	}
	if conv.Webhook == nil || conv.Webhook.ClientConfig == nil {
		return nil, fmt.Errorf("conversion webhook of %s has no client config", crd.Name)
	}
	cc := conv.Webhook.ClientConfig
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(cc.CABundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(cc.CABundle) {
			return nil, fmt.Errorf("conversion webhook of %s: caBundle holds no certificate", crd.Name)
		}
		tlsConfig.RootCAs = pool
	}
	transport := &http.Transport{TLSClientConfig: tlsConfig}
	var target string
	switch {
	case cc.URL != nil:
		target = *cc.URL
	case cc.Service != nil:
		if services == nil {
			return nil, fmt.Errorf("conversion webhook of %s: service references cannot be resolved here", crd.Name)
		}
		svc := cc.Service
		port := int32(443)
		if svc.Port != nil {
			port = *svc.Port
		}
		// https://<name>.<namespace>.svc:<port><path>, verified against that
		// name, dialed to an endpoint (upstream's webhook client).
		u := url.URL{Scheme: "https", Host: net.JoinHostPort(svc.Name+"."+svc.Namespace+".svc", strconv.Itoa(int(port)))}
		if svc.Path != nil {
			u.Path = *svc.Path
		}
		target = u.String()
		transport.DialContext = services.DialContext(svc.Namespace, svc.Name, port)
	default:
		return nil, fmt.Errorf("conversion webhook of %s has neither url nor service", crd.Name)
	}
	review := ""
	for _, v := range conv.Webhook.ConversionReviewVersions {
		if v == "v1" || v == "v1beta1" {
			review = "apiextensions.k8s.io/" + v
			break
		}
	}
	if review == "" {
		return nil, fmt.Errorf("conversion webhook of %s accepts none of the ConversionReview versions v1, v1beta1", crd.Name)
	}
	return &webhookConverter{crd: crd.Name, url: target, review: review, timeout: 30 * time.Second,
		client: &http.Client{Transport: transport}}, nil
}

type conversionReview struct {
	metav1.TypeMeta
	Request  *conversionRequest  `json:"request,omitempty"`
	Response *conversionResponse `json:"response,omitempty"`
}

type conversionRequest struct {
	UID               string            `json:"uid"`
	DesiredAPIVersion string            `json:"desiredAPIVersion"`
	Objects           []json.RawMessage `json:"objects"`
}

type conversionResponse struct {
	UID              string                   `json:"uid"`
	ConvertedObjects []map[string]interface{} `json:"convertedObjects"`
	Result           metav1.Status            `json:"result"`
}

func (w *webhookConverter) Convert(obj *unstructured.Unstructured, to schema.GroupVersion) (*unstructured.Unstructured, error) {
	if obj.GetAPIVersion() == to.String() {
		return obj.DeepCopy(), nil
	}
	fail := func(format string, a ...any) error {
		return fmt.Errorf("conversion webhook for %v failed: %s", obj.GroupVersionKind(), fmt.Sprintf(format, a...))
	}
	raw, err := json.Marshal(obj.Object)
	if err != nil {
		return nil, fail("%v", err)
	}
	uid := string(uuid.NewUUID())
	req := conversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: w.review, Kind: "ConversionReview"},
		Request:  &conversionRequest{UID: uid, DesiredAPIVersion: to.String(), Objects: []json.RawMessage{raw}},
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fail("%v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return nil, fail("%v", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	resp, err := w.client.Do(hreq)
	if err != nil {
		return nil, fail("%v", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 3<<20))
	if err != nil {
		return nil, fail("%v", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fail("the server answered %d", resp.StatusCode)
	}
	var out conversionReview
	if err := json.Unmarshal(data, &out); err != nil || out.Response == nil {
		return nil, fail("malformed ConversionReview response: %v", err)
	}
	r := out.Response
	if r.UID != uid {
		return nil, fail("expected response uid %q, got %q", uid, r.UID)
	}
	if r.Result.Status != metav1.StatusSuccess {
		return nil, fail("%s", r.Result.Message)
	}
	if len(r.ConvertedObjects) != 1 {
		return nil, fail("expected 1 converted object, got %d", len(r.ConvertedObjects))
	}
	conv := &unstructured.Unstructured{Object: r.ConvertedObjects[0]}
	if conv.GetAPIVersion() != to.String() || conv.GetKind() != obj.GetKind() {
		return nil, fail("converted object has apiVersion %s kind %s, want %s %s", conv.GetAPIVersion(), conv.GetKind(), to, obj.GetKind())
	}
	// The webhook may change labels and annotations only; the rest of the
	// metadata is the original's, as upstream restores it.
	md := obj.DeepCopy()
	md.SetLabels(conv.GetLabels())
	md.SetAnnotations(conv.GetAnnotations())
	conv.Object["metadata"] = md.Object["metadata"]
	return conv, nil
}
