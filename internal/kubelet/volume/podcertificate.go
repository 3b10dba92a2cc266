package volume

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	mathrand "math/rand/v2"
	"os"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// CertificateRequester talks to the API server, as the node, for
// podCertificate sources.
type CertificateRequester interface {
	CreatePodCertificateRequest(ctx context.Context, pcr *certificatesv1.PodCertificateRequest) (*certificatesv1.PodCertificateRequest, error)
	GetPodCertificateRequest(ctx context.Context, namespace, name string) (*certificatesv1.PodCertificateRequest, error)
	// ServiceAccountUID is the UID of the pod's service account.
	ServiceAccountUID(ctx context.Context, namespace, name string) (types.UID, error)
	// NodeUID is this node's UID (empty until the Node is known).
	NodeUID() types.UID
}

// Rules of upstream's pod certificate manager.
const (
	// pcrAbandonAfter: a request not found this long after its creation
	// is taken as deleted and asked for again.
	pcrAbandonAfter = 10 * time.Minute
	// refreshOverdue: past beginRefreshAt by this much, the pod gets a
	// CertificateOverdueForRefresh event.
	refreshOverdue = 10 * time.Minute
	// certMaxJitter spreads refreshes (and abandonment) of many pods.
	certMaxJitter = 5 * time.Minute
)

// Certificates fills projected podCertificate sources, as upstream's
// kubelet: for each (pod, volume, source) it makes a private key of the
// source's keyType, asks the source's signer for a certificate with a
// PodCertificateRequest (bound to the pod, its service account and this
// node, with a stub PKCS#10 request signed by the key as proof of
// possession), and waits for the signer's answer: Issued (the chain is
// kept with the key), Denied or Failed (for good: the volume cannot be
// set up, and the pod gets a warning event). Once beginRefreshAt (plus up
// to 5 minutes of jitter) has passed, a new key and request are made; the
// old credentials are served until the new ones are issued. Setup is
// called at every pod sync, so each call does one step of that and the
// pod's volume is rewritten once credentials change.
type Certificates struct {
	api    CertificateRequester
	clock  clock.PassiveClock
	jitter func() time.Duration
	// Event records an event on the pod (nil: none).
	Event func(pod *corev1.Pod, eventType, reason, message string)

	mu    sync.Mutex
	state map[certKey]*certState
}

type certKey struct {
	pod    types.UID
	volume string
	source int
}

// certState is one source's credentials: issued ones (key, chain), a
// request waiting for the signer (pending), or a final refusal (final).
type certState struct {
	mu             sync.Mutex
	key, chain     []byte
	beginRefreshAt time.Time
	notAfter       time.Time
	pending        *pendingRequest
	final          error
	warnedOverdue  bool
	warnedExpired  bool
}

type pendingRequest struct {
	key       []byte
	name      string
	abandonAt time.Time
}

// NewCertificates asks api for certificates; c is the time (nil: the real
// clock).
func NewCertificates(api CertificateRequester, c clock.PassiveClock) *Certificates {
	if c == nil {
		c = clock.RealClock{}
	}
	return &Certificates{
		api: api, clock: c,
		jitter: func() time.Duration { return time.Duration(mathrand.Int64N(int64(certMaxJitter))) },
		state:  map[certKey]*certState{},
	}
}

// Bundle returns the PEM private key and certificate chain for the
// source'th source of the pod's projected volume, after moving the
// source's request one step on. An error means the pod cannot have them
// (yet, or for good).
func (c *Certificates) Bundle(ctx context.Context, pod *corev1.Pod, volume string, source int, src *corev1.PodCertificateProjection) (key, chain []byte, err error) {
	k := certKey{pod: pod.UID, volume: volume, source: source}
	c.mu.Lock()
	st := c.state[k]
	if st == nil {
		st = &certState{}
		c.state[k] = st
	}
	c.mu.Unlock()

	st.mu.Lock()
	defer st.mu.Unlock()
	if st.final != nil {
		return nil, nil, st.final
	}
	now := c.clock.Now()
	if st.pending != nil {
		if err := c.check(ctx, pod, st); err != nil {
			return nil, nil, err
		}
	}
	if st.final != nil {
		return nil, nil, st.final
	}
	issued := st.chain != nil
	if st.pending == nil && (!issued || !now.Before(st.beginRefreshAt)) {
		p, err := c.request(ctx, pod, src)
		if err != nil {
			if !issued {
				return nil, nil, err
			}
			// Keep serving what was issued; try again at the next sync.
		} else {
			st.pending = p
		}
	}
	if issued {
		if now.After(st.beginRefreshAt.Add(refreshOverdue)) && !st.warnedOverdue {
			st.warnedOverdue = true
			c.event(pod, corev1.EventTypeWarning, "CertificateOverdueForRefresh", "PodCertificate refresh overdue")
		}
		if now.After(st.notAfter) && !st.warnedExpired {
			st.warnedExpired = true
			c.event(pod, corev1.EventTypeWarning, "CertificateExpired", "PodCertificate expired")
		}
		return st.key, st.chain, nil
	}
	return nil, nil, fmt.Errorf("credential bundle is not issued yet")
}

// check looks at the pending request: issued, refused, gone, or still
// waiting.
func (c *Certificates) check(ctx context.Context, pod *corev1.Pod, st *certState) error {
	p := st.pending
	pcr, err := c.api.GetPodCertificateRequest(ctx, pod.Namespace, p.name)
	if apierrors.IsNotFound(err) && c.clock.Now().After(p.abandonAt) {
		st.pending = nil // deleted: ask again
		return nil
	}
	if err != nil {
		if st.chain != nil {
			return nil // serve the issued credentials meanwhile
		}
		return fmt.Errorf("while getting PodCertificateRequest %q: %w", pod.Namespace+"/"+p.name, err)
	}
	for _, cond := range pcr.Status.Conditions {
		switch cond.Type {
		case certificatesv1.PodCertificateRequestConditionTypeDenied:
			st.final = fmt.Errorf("PodCertificateRequest was permanently denied: reason=%q message=%q", cond.Reason, cond.Message)
			st.pending = nil
			c.event(pod, corev1.EventTypeWarning, cond.Type, fmt.Sprintf("PodCertificateRequest %s was denied, reason=%q, message=%q", pod.Namespace+"/"+pcr.Name, cond.Reason, cond.Message))
			return nil
		case certificatesv1.PodCertificateRequestConditionTypeFailed:
			st.final = fmt.Errorf("PodCertificateRequest was permanently failed: reason=%q message=%q", cond.Reason, cond.Message)
			st.pending = nil
			c.event(pod, corev1.EventTypeWarning, cond.Type, fmt.Sprintf("PodCertificateRequest %s failed, reason=%q, message=%q", pod.Namespace+"/"+pcr.Name, cond.Reason, cond.Message))
			return nil
		case certificatesv1.PodCertificateRequestConditionTypeIssued:
			if pcr.Status.BeginRefreshAt == nil || pcr.Status.NotAfter == nil || pcr.Status.CertificateChain == "" {
				continue // not fully written (the API server refuses this)
			}
			st.key, st.chain = p.key, CleanCertificateChain([]byte(pcr.Status.CertificateChain))
			st.beginRefreshAt = pcr.Status.BeginRefreshAt.Time.Add(c.jitter())
			st.notAfter = pcr.Status.NotAfter.Time
			st.pending, st.warnedOverdue, st.warnedExpired = nil, false, false
			return nil
		}
	}
	return nil // still waiting for the signer
}

// request makes a key and asks for a certificate for it.
func (c *Certificates) request(ctx context.Context, pod *corev1.Pod, src *corev1.PodCertificateProjection) (*pendingRequest, error) {
	node := c.api.NodeUID()
	if node == "" {
		return nil, fmt.Errorf("node object not known yet")
	}
	sa, err := c.api.ServiceAccountUID(ctx, pod.Namespace, pod.Spec.ServiceAccountName)
	if err != nil {
		return nil, fmt.Errorf("while fetching service account: %w", err)
	}
	key, stub, err := GenerateKeyAndStub(src.KeyType)
	if err != nil {
		return nil, fmt.Errorf("while generating keypair: %w", err)
	}
	keyPEM, err := EncodeKey(key)
	if err != nil {
		return nil, err
	}
	pcr := &certificatesv1.PodCertificateRequest{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       pod.Namespace,
			GenerateName:    "req-",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}},
		},
		Spec: certificatesv1.PodCertificateRequestSpec{
			SignerName:                src.SignerName,
			PodName:                   pod.Name,
			PodUID:                    pod.UID,
			ServiceAccountName:        pod.Spec.ServiceAccountName,
			ServiceAccountUID:         sa,
			NodeName:                  types.NodeName(pod.Spec.NodeName),
			NodeUID:                   node,
			MaxExpirationSeconds:      src.MaxExpirationSeconds,
			StubPKCS10Request:         stub,
			UnverifiedUserAnnotations: src.UserAnnotations,
		},
	}
	created, err := c.api.CreatePodCertificateRequest(ctx, pcr)
	if err != nil {
		return nil, fmt.Errorf("while creating PodCertificateRequest: %w", err)
	}
	return &pendingRequest{key: keyPEM, name: created.Name, abandonAt: c.clock.Now().Add(pcrAbandonAfter + c.jitter())}, nil
}

func (c *Certificates) event(pod *corev1.Pod, eventType, reason, message string) {
	if c.Event != nil {
		c.Event(pod, eventType, reason, message)
	}
}

// Forget drops the credentials of a pod that is gone.
func (c *Certificates) Forget(pod types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.state {
		if k.pod == pod {
			delete(c.state, k)
		}
	}
}

// GenerateKeyAndStub makes a private key of a podCertificate keyType
// (RSA3072, RSA4096, ECDSAP256, ECDSAP384, ECDSAP521, ED25519) and the
// empty PKCS#10 request signed with it that proves its possession.
func GenerateKeyAndStub(keyType string) (crypto.Signer, []byte, error) {
	var key crypto.Signer
	var err error
	switch keyType {
	case "RSA3072":
		key, err = rsa.GenerateKey(rand.Reader, 3072)
	case "RSA4096":
		key, err = rsa.GenerateKey(rand.Reader, 4096)
	case "ECDSAP256":
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "ECDSAP384":
		key, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case "ECDSAP521":
		key, err = ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	case "ED25519":
		_, key, err = ed25519.GenerateKey(rand.Reader)
	default:
		return nil, nil, fmt.Errorf("unknown key type %q", keyType)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("generate %s key: %w", keyType, err)
	}
	stub, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		return nil, nil, fmt.Errorf("while generating stub PKCS#10 request: %w", err)
	}
	return key, stub, nil
}

// EncodeKey is the key as a PKCS#8 "PRIVATE KEY" PEM block.
func EncodeKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("while marshaling key to PKCS#8: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// CleanCertificateChain keeps only the PEM blocks of a chain, each as a
// plain CERTIFICATE block without headers, dropping text between them.
func CleanCertificateChain(in []byte) []byte {
	var out bytes.Buffer
	for rest := in; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return out.Bytes()
		}
		out.Write(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: b.Bytes}))
	}
}

// certificatePayload is the files of a podCertificate source.
func (m *Manager) certificatePayload(ctx context.Context, pod *corev1.Pod, volume string, source int, src *corev1.PodCertificateProjection, defaultMode *int32) (map[string]File, error) {
	if m.Certificates == nil {
		return nil, fmt.Errorf("podCertificate projection is not supported on this node")
	}
	key, chain, err := m.Certificates.Bundle(ctx, pod, volume, source, src)
	if err != nil {
		return nil, err
	}
	mode := os.FileMode(corev1.ProjectedVolumeSourceDefaultMode)
	if defaultMode != nil {
		mode = os.FileMode(*defaultMode)
	}
	out := map[string]File{}
	if src.CredentialBundlePath != "" {
		out[src.CredentialBundlePath] = File{Data: append(append([]byte{}, key...), chain...), Mode: mode}
	}
	if src.KeyPath != "" {
		out[src.KeyPath] = File{Data: key, Mode: mode}
	}
	if src.CertificateChainPath != "" {
		out[src.CertificateChainPath] = File{Data: chain, Mode: mode}
	}
	return out, nil
}
