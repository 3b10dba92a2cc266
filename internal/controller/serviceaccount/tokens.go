package serviceaccount

import (
	"bytes"
	"context"
	"crypto"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/controller/controllercontext"
	"github.com/skiff-sh/skiff/internal/controller/worker"
	"github.com/skiff-sh/skiff/internal/satoken"
)

// TokensName is the tokens controller's name in the manager's registry
// (upstream's "serviceaccount-token").
const TokensName = "serviceaccount-token"

// Tokens is upstream's legacy tokens controller: a Secret of type
// kubernetes.io/service-account-token that names an account in its
// kubernetes.io/service-account.name annotation gets a legacy token signed
// with the service-account key, the cluster CA and the namespace in its
// data (and the account's UID in kubernetes.io/service-account.uid); a
// Secret whose account is gone, or was recreated with another UID, is
// deleted. Nothing creates such Secrets on its own (upstream stopped in
// v1.24): only a Secret that asks gets a token.
type Tokens struct {
	client   kubernetes.Interface
	signer   *satoken.Signer
	rootCA   []byte
	secrets  corelisters.SecretLister
	accounts corelisters.ServiceAccountLister
	synced   []cache.InformerSynced
	queue    *worker.Queue[string]
}

// NewTokens builds the controller from the manager's options: it signs
// with Options.ServiceAccountPrivateKeyFile (empty: the controller is off).
func NewTokens(ctx context.Context, cc controllercontext.Context) (controllercontext.Controller, error) {
	if cc.Options.ServiceAccountPrivateKeyFile == "" {
		klog.FromContext(ctx).Info("No service-account private key configured; legacy token Secrets will not be filled")
		return nil, nil
	}
	key, err := satoken.LoadPrivateKey(cc.Options.ServiceAccountPrivateKeyFile)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", TokensName, err)
	}
	return NewTokensWithKey(cc, key)
}

// NewTokensWithKey builds the controller signing with key.
func NewTokensWithKey(cc controllercontext.Context, key crypto.Signer) (*Tokens, error) {
	signer, err := satoken.NewSigner(satoken.LegacyIssuer, key)
	if err != nil {
		return nil, err
	}
	secInf := cc.Informers.Core().V1().Secrets()
	saInf := cc.Informers.Core().V1().ServiceAccounts()
	c := &Tokens{
		client: cc.Client, signer: signer, rootCA: cc.Options.RootCAPEM,
		secrets: secInf.Lister(), accounts: saInf.Lister(),
		synced: []cache.InformerSynced{secInf.Informer().HasSynced, saInf.Informer().HasSynced},
	}
	c.queue = worker.NewQueue(TokensName, c.sync, worker.Options[string]{Workers: 1, Clock: cc.Clock})
	enqueue := func(obj any) {
		if s, ok := obj.(*corev1.Secret); ok && s.Type == corev1.SecretTypeServiceAccountToken {
			c.queue.Add(s.Namespace + "/" + s.Name)
		}
	}
	if _, err := secInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return nil, fmt.Errorf("%s: secret handler: %w", TokensName, err)
	}
	accountChanged := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		sa, ok := obj.(*corev1.ServiceAccount)
		if !ok {
			return
		}
		secrets, _ := c.secrets.Secrets(sa.Namespace).List(labels.Everything())
		for _, s := range secrets {
			if s.Type == corev1.SecretTypeServiceAccountToken && s.Annotations[corev1.ServiceAccountNameKey] == sa.Name {
				c.queue.Add(s.Namespace + "/" + s.Name)
			}
		}
	}
	if _, err := saInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: accountChanged, DeleteFunc: accountChanged,
	}); err != nil {
		return nil, fmt.Errorf("%s: serviceaccount handler: %w", TokensName, err)
	}
	return c, nil
}

// Start runs the worker until ctx is done.
func (c *Tokens) Start(ctx context.Context) error {
	return worker.Run(ctx, TokensName, c.synced, c.queue)
}

func (c *Tokens) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	s, err := c.secrets.Secrets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if s.Type != corev1.SecretTypeServiceAccountToken || s.DeletionTimestamp != nil {
		return nil
	}
	saName := s.Annotations[corev1.ServiceAccountNameKey]
	sa, err := c.accounts.ServiceAccounts(ns).Get(saName)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if sa != nil && err == nil && sa.DeletionTimestamp == nil {
		if uid := s.Annotations[corev1.ServiceAccountUIDKey]; uid != "" && uid != string(sa.UID) {
			sa = nil // the account was recreated: this Secret was another's
		}
	} else {
		// The live read: the cache may not have a new account yet.
		live, lerr := c.client.CoreV1().ServiceAccounts(ns).Get(ctx, saName, metav1.GetOptions{})
		switch {
		case lerr == nil && live.DeletionTimestamp == nil:
			sa = live
		case lerr == nil || apierrors.IsNotFound(lerr):
			sa = nil
		default:
			return lerr
		}
	}
	if sa == nil {
		err := c.client.CoreV1().Secrets(ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &s.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("delete secret %s of a gone service account: %w", key, err)
		}
		return nil
	}
	want := s.DeepCopy()
	if want.Annotations == nil {
		want.Annotations = map[string]string{}
	}
	want.Annotations[corev1.ServiceAccountUIDKey] = string(sa.UID)
	if want.Data == nil {
		want.Data = map[string][]byte{}
	}
	if len(want.Data[corev1.ServiceAccountTokenKey]) == 0 {
		tok, err := c.signer.Sign(satoken.LegacyClaims(satoken.Account{Namespace: ns, Name: sa.Name, UID: string(sa.UID)}, name))
		if err != nil {
			return err
		}
		want.Data[corev1.ServiceAccountTokenKey] = []byte(tok)
	}
	if len(c.rootCA) > 0 && !bytes.Equal(want.Data[corev1.ServiceAccountRootCAKey], c.rootCA) {
		want.Data[corev1.ServiceAccountRootCAKey] = c.rootCA
	}
	want.Data[corev1.ServiceAccountNamespaceKey] = []byte(ns)
	if equalSecret(s, want) {
		return nil
	}
	if _, err := c.client.CoreV1().Secrets(ns).Update(ctx, want, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("fill token secret %s: %w", key, err)
	}
	return nil
}

func equalSecret(a, b *corev1.Secret) bool {
	if len(a.Data) != len(b.Data) || a.Annotations[corev1.ServiceAccountUIDKey] != b.Annotations[corev1.ServiceAccountUIDKey] {
		return false
	}
	for k, v := range b.Data {
		if !bytes.Equal(a.Data[k], v) {
			return false
		}
	}
	return true
}
