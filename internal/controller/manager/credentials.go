package manager

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/oauth2"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
	"k8s.io/utils/clock"
)

// ServiceAccountNamespace holds the controllers' service accounts.
const ServiceAccountNamespace = "kube-system"

// TokenExpiration is the lifetime the controllers' tokens are requested
// with (upstream's builder asks for an hour too); a token is renewed once
// 80% of its lifetime has passed, or at once after a 401.
const TokenExpiration = time.Hour

// serviceAccounts are the kube-system service accounts each controller's
// clients authenticate as with --use-service-account-credentials:
// upstream's names, each bound by the bootstrap policy to its
// system:controller:<account> role. "" keeps the controller manager's own
// credentials (upstream's tokens controller mints tokens for every
// account, and so runs with the root client).
var serviceAccounts = map[string]string{
	"clusterrole-aggregation":             "clusterrole-aggregation-controller",
	"cronjob":                             "cronjob-controller",
	"csrapproving":                        "certificate-controller",
	"csrsigning":                          "certificate-controller",
	"daemonset":                           "daemon-set-controller",
	"deployment":                          "deployment-controller",
	"disruption":                          "disruption-controller",
	"endpoints":                           "endpoint-controller",
	"endpointslice":                       "endpointslice-controller",
	"endpointslicemirroring":              "endpointslicemirroring-controller",
	"ephemeral-volume-controller":         "ephemeral-volume-controller",
	"garbagecollector":                    "generic-garbage-collector",
	"horizontalpodautoscaling":            "horizontal-pod-autoscaler",
	"job":                                 "job-controller",
	"namespace":                           "namespace-controller",
	"node-ipam-controller":                "node-controller",
	"nodelifecycle":                       "node-controller",
	"persistentvolume-binder":             "persistent-volume-binder",
	"persistentvolume-expander":           "expand-controller",
	"podgc":                               "pod-garbage-collector",
	"pv-protection":                       "pv-protection-controller",
	"pvc-protection":                      "pvc-protection-controller",
	"replicaset":                          "replicaset-controller",
	"replicationcontroller":               "replication-controller",
	"resourceclaim-controller":            "resource-claim-controller",
	"resourcequota":                       "resourcequota-controller",
	"root-ca-cert-publisher":              "root-ca-cert-publisher",
	"serviceaccount":                      "service-account-controller",
	"serviceaccount-token":                "",
	"service-cidr-controller":             "service-cidrs-controller",
	"statefulset":                         "statefulset-controller",
	"storage-version-migrator-controller": "storage-version-migrator-controller",
	"ttl-after-finished":                  "ttl-after-finished-controller",

	"validatingadmissionpolicy-status-controller": "validatingadmissionpolicy-status-controller",
}

// ServiceAccountName is the kube-system service account controller runs
// as with --use-service-account-credentials, and whether it has one.
func ServiceAccountName(controller string) (string, bool) {
	sa, ok := serviceAccounts[controller]
	return sa, ok && sa != ""
}

// accountCredentials hands out client configs that authenticate as
// kube-system service accounts, with tokens from the TokenRequest API
// obtained through root (the controller manager's own identity, whose
// system:kube-controller-manager role may create the accounts and their
// tokens). Each account gets one cached token source.
type accountCredentials struct {
	root  kubernetes.Interface
	base  *rest.Config // the manager's config without its credentials
	clock clock.PassiveClock

	mu      sync.Mutex
	sources map[string]transport.ResettableTokenSource
}

func newAccountCredentials(root kubernetes.Interface, config *rest.Config, c clock.PassiveClock) *accountCredentials {
	return &accountCredentials{root: root, base: rest.AnonymousClientConfig(config), clock: c, sources: map[string]transport.ResettableTokenSource{}}
}

// config is a client config authenticating as kube-system/<account>.
func (a *accountCredentials) config(account string) *rest.Config {
	a.mu.Lock()
	src, ok := a.sources[account]
	if !ok {
		src = transport.NewCachedTokenSource(&accountTokenSource{creds: a, account: account})
		a.sources[account] = src
	}
	a.mu.Unlock()
	c := rest.CopyConfig(a.base)
	c.WrapTransport = transport.ResettableTokenSourceWrapTransport(src)
	return c
}

// accountTokenSource requests a new token for one account, creating the
// account first if it is missing (so a deleted account comes back at the
// next renewal, which a 401 triggers).
type accountTokenSource struct {
	creds   *accountCredentials
	account string
}

func (s *accountTokenSource) Token() (*oauth2.Token, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	accounts := s.creds.root.CoreV1().ServiceAccounts(ServiceAccountNamespace)
	if _, err := accounts.Get(ctx, s.account, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: s.account, Namespace: ServiceAccountNamespace}}
		if _, err := accounts.Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create service account %s/%s: %w", ServiceAccountNamespace, s.account, err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("get service account %s/%s: %w", ServiceAccountNamespace, s.account, err)
	}
	seconds := int64(TokenExpiration / time.Second)
	now := s.creds.clock.Now()
	tr, err := accounts.CreateToken(ctx, s.account, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token for service account %s/%s: %w", ServiceAccountNamespace, s.account, err)
	}
	// Renew once 80% of the lifetime has passed.
	lifetime := tr.Status.ExpirationTimestamp.Time.Sub(now)
	return &oauth2.Token{AccessToken: tr.Status.Token, TokenType: "Bearer", Expiry: now.Add(lifetime * 8 / 10)}, nil
}
