package admission

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// LiveLookupWindow is how long after a namespace's delete its lookups
// skip the cache, which may not show the deletion yet (upstream's
// forceLiveLookupTTL is 30s; Skiff keeps a minute).
const LiveLookupWindow = time.Minute

// immortalNamespaces may not be deleted (upstream's kube-apiserver list).
var immortalNamespaces = map[string]bool{
	metav1.NamespaceDefault: true, metav1.NamespaceSystem: true, metav1.NamespacePublic: true,
}

var namespacesGVR = corev1.SchemeGroupVersion.WithResource("namespaces")

// NamespaceLifecycle refuses to create objects in a namespace that does
// not exist or is being deleted, as upstream's plugin of that name does.
// After a namespace's delete it reads the namespace from etcd, not the
// cache, for LiveLookupWindow. The default, kube-system and kube-public
// namespaces may not be deleted.
type NamespaceLifecycle struct {
	namespaces registry.Reader
	clock      clock.PassiveClock

	mu sync.Mutex
	// deleted: namespace name → when its delete was admitted.
	deleted map[string]time.Time
}

var _ Mutator = (*NamespaceLifecycle)(nil)

// NewNamespaceLifecycle reads namespaces through r.
func NewNamespaceLifecycle(r registry.Reader, c clock.PassiveClock) *NamespaceLifecycle {
	return &NamespaceLifecycle{namespaces: r, clock: c, deleted: map[string]time.Time{}}
}

// Name is the upstream name.
func (*NamespaceLifecycle) Name() string { return "NamespaceLifecycle" }

// Handles creates (the check) and deletes (of namespaces: the live-lookup
// window).
func (*NamespaceLifecycle) Handles(op Operation) bool { return op == Create || op == Delete }

// Admit checks a create's namespace, and notes a namespace's delete.
func (l *NamespaceLifecycle) Admit(ctx context.Context, a *Attributes) error {
	if a.Resource.GroupResource() == namespacesGVR.GroupResource() {
		if a.Operation == Delete {
			if immortalNamespaces[a.Name] {
				return forbidden(a, errors.New("this namespace may not be deleted"))
			}
			l.mu.Lock()
			l.deleted[a.Name] = l.clock.Now()
			l.mu.Unlock()
		}
		return nil
	}
	if a.Operation != Create || a.Namespace == "" || l.namespaces == nil {
		return nil
	}
	ns := &corev1.Namespace{}
	if err := l.namespaces.Get(ctx, namespacesGVR, "", a.Namespace, l.liveLookup(a.Namespace), ns); err != nil {
		if apierrors.IsNotFound(err) {
			return apierrors.NewNotFound(namespacesGVR.GroupResource(), a.Namespace)
		}
		return apierrors.NewInternalError(err)
	}
	if ns.DeletionTimestamp != nil || ns.Status.Phase == corev1.NamespaceTerminating {
		return apierrors.NewForbidden(a.Resource.GroupResource(), "", fmt.Errorf("unable to create new content in namespace %s because it is being terminated", a.Namespace))
	}
	return nil
}

// liveLookup says the namespace was deleted a moment ago.
func (l *NamespaceLifecycle) liveLookup(name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.deleted[name]
	if !ok {
		return false
	}
	if l.clock.Since(t) < LiveLookupWindow {
		return true
	}
	delete(l.deleted, name)
	return false
}
