package volume

import (
	"context"
	"encoding/pem"
	"fmt"
	"os"
	"slices"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// TrustBundleGetter reads ClusterTrustBundles.
type TrustBundleGetter interface {
	ClusterTrustBundle(ctx context.Context, name string) (*certificatesv1.ClusterTrustBundle, error)
	ClusterTrustBundles(ctx context.Context, selector labels.Selector) ([]certificatesv1.ClusterTrustBundle, error)
}

// maxTrustBundleSelector is upstream's limit on a rendered label selector.
const maxTrustBundleSelector = 100 * 1024

// trustBundlePayload is the file of a clusterTrustBundle source: the
// certificates of the named bundle, or of every bundle of signerName
// matching labelSelector (a missing selector matches none, as upstream),
// deduplicated, sorted by their DER bytes and written as plain
// CERTIFICATE blocks. Nothing found is an error unless the source is
// optional (then the file is empty).
func (m *Manager) trustBundlePayload(ctx context.Context, src *corev1.ClusterTrustBundleProjection, defaultMode *int32) (map[string]File, error) {
	if m.TrustBundles == nil {
		return nil, fmt.Errorf("ClusterTrustBundle projection is not supported on this node")
	}
	optional := src.Optional != nil && *src.Optional
	var bundles []certificatesv1.ClusterTrustBundle
	switch {
	case src.Name != nil:
		b, err := m.TrustBundles.ClusterTrustBundle(ctx, *src.Name)
		if apierrors.IsNotFound(err) && optional {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("while getting ClusterTrustBundle: %w", err)
		}
		bundles = append(bundles, *b)
	case src.SignerName != nil:
		sel, err := metav1.LabelSelectorAsSelector(src.LabelSelector)
		if err != nil {
			return nil, fmt.Errorf("while parsing label selector: %w", err)
		}
		if n := len(sel.String()); n > maxTrustBundleSelector {
			return nil, fmt.Errorf("label selector length (%d) is larger than %d", n, maxTrustBundleSelector)
		}
		var all []certificatesv1.ClusterTrustBundle
		if src.LabelSelector != nil { // nil selects nothing
			if all, err = m.TrustBundles.ClusterTrustBundles(ctx, sel); err != nil {
				return nil, fmt.Errorf("while listing ClusterTrustBundles matching label selector %v: %w", src.LabelSelector, err)
			}
		}
		for _, b := range all {
			if b.Spec.SignerName == *src.SignerName {
				bundles = append(bundles, b)
			}
		}
		if len(bundles) == 0 && !optional {
			return nil, fmt.Errorf("combination of signerName and labelSelector matched zero ClusterTrustBundles")
		}
	default:
		return nil, fmt.Errorf("ClusterTrustBundle projection requires either name or signerName to be set")
	}
	mode := os.FileMode(corev1.ProjectedVolumeSourceDefaultMode)
	if defaultMode != nil {
		mode = os.FileMode(*defaultMode)
	}
	return map[string]File{src.Path: {Data: NormalizeTrustAnchors(bundles), Mode: mode}}, nil
}

// NormalizeTrustAnchors is the bundles' certificates, each once, sorted
// by DER bytes, as CERTIFICATE PEM blocks without headers.
func NormalizeTrustAnchors(bundles []certificatesv1.ClusterTrustBundle) []byte {
	var ders []string
	for _, b := range bundles {
		for rest := []byte(b.Spec.TrustBundle); ; {
			var blk *pem.Block
			blk, rest = pem.Decode(rest)
			if blk == nil {
				break
			}
			ders = append(ders, string(blk.Bytes))
		}
	}
	slices.Sort(ders)
	ders = slices.Compact(ders)
	out := []byte{}
	for _, d := range ders {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte(d)})...)
	}
	return out
}
