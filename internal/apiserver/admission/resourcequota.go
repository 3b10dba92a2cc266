package admission

import (
	"context"
	"fmt"
	"hash/fnv"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/quota"
)

var resourceQuotasGVR = corev1.SchemeGroupVersion.WithResource("resourcequotas")

// QuotaStatusWriter writes a ResourceQuota's status if its
// resourceVersion is still the stored one (a 409 Conflict otherwise), and
// leaves the written object in q.
type QuotaStatusWriter interface {
	UpdateQuotaStatus(ctx context.Context, q *corev1.ResourceQuota) error
}

// quotaRetries is how many times a charge is tried again after a
// conflicting write of the same quota (by another request or the
// controller).
const quotaRetries = 10

// ResourceQuota charges each create (and each update that changes usage)
// to the ResourceQuotas of its namespace that match it, and refuses it
// when a quota's status.used would exceed status.hard, as upstream's
// plugin of that name does: "exceeded quota: <name>, requested: ...,
// used: ..., limited: ..." (403). A quota the resource-quota controller
// has not yet measured refuses with "status unknown for quota". Charges
// are written to status.used with compare-and-swap before the object is
// stored; a write that fails afterwards leaves the charge until the
// controller recounts. Requests of one namespace are charged one at a
// time.
type ResourceQuota struct {
	quotas *namespacedLister
	r      registry.Reader
	writer QuotaStatusWriter
	clock  clock.PassiveClock

	locks [64]sync.Mutex

	mu sync.Mutex
	// written: the quotas this plugin wrote last (namespace/name), newer
	// than the cache until the cache catches up.
	written map[string]*corev1.ResourceQuota
}

var _ Validator = (*ResourceQuota)(nil)

// NewResourceQuota reads quotas through r and writes charges through w.
func NewResourceQuota(r registry.Reader, w QuotaStatusWriter, c clock.PassiveClock) *ResourceQuota {
	return &ResourceQuota{
		quotas:  newNamespacedLister(r, resourceQuotasGVR, c, func() runtime.Object { return &corev1.ResourceQuotaList{} }),
		r:       r,
		writer:  w,
		clock:   c,
		written: map[string]*corev1.ResourceQuota{},
	}
}

// Name is the upstream name.
func (*ResourceQuota) Name() string { return "ResourceQuota" }

// Handles creates and updates.
func (*ResourceQuota) Handles(op Operation) bool { return op == Create || op == Update }

// charges says the request may change what is charged.
func charges(a *Attributes) bool {
	gr := a.Resource.GroupResource()
	if a.Namespace == "" || a.Object == nil || quota.Ignored(gr) {
		return false
	}
	if a.Operation == Create {
		return a.Subresource == ""
	}
	switch gr {
	case quota.Pods:
		if a.Subresource == "resize" {
			return true
		}
		pod, ok1 := a.Object.(*corev1.Pod)
		old, ok2 := a.OldObject.(*corev1.Pod)
		return a.Subresource == "" && ok1 && ok2 && quota.IsTerminating(pod) != quota.IsTerminating(old)
	case quota.Services, quota.PersistentVolumeClaims:
		return a.Subresource == ""
	}
	return false
}

// Validate charges the request to the matching quotas.
func (p *ResourceQuota) Validate(ctx context.Context, a *Attributes) error {
	if !charges(a) {
		return nil
	}
	// Most namespaces have no quota: answer them without the lock.
	if quotas, err := p.list(ctx, a.Namespace, false); err == nil && len(quotas) == 0 {
		return nil
	}
	lock := p.lock(a.Namespace)
	lock.Lock()
	defer lock.Unlock()
	done := map[string]bool{} // quotas already charged, by name
	live := false
	for attempt := 0; attempt <= quotaRetries; attempt++ {
		quotas, err := p.list(ctx, a.Namespace, live)
		if err != nil {
			return apierrors.NewInternalError(fmt.Errorf("list resource quotas: %w", err))
		}
		pending := quotas[:0]
		for _, q := range quotas {
			if !done[q.Name] {
				pending = append(pending, q)
			}
		}
		if len(pending) == 0 {
			return nil
		}
		changed, err := p.evaluate(a, pending)
		if err != nil || a.DryRun {
			return err
		}
		conflict := false
		for _, q := range changed {
			err := p.writer.UpdateQuotaStatus(ctx, q)
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				conflict = true
				continue
			}
			if err != nil {
				return apierrors.NewInternalError(fmt.Errorf("update resource quota %s: %w", q.Name, err))
			}
			done[q.Name] = true
			p.remember(q)
		}
		if !conflict {
			return nil
		}
		live = true
	}
	return apierrors.NewInternalError(fmt.Errorf("resource quota evaluation timed out"))
}

func (p *ResourceQuota) lock(ns string) *sync.Mutex {
	h := fnv.New32a()
	h.Write([]byte(ns))
	return &p.locks[h.Sum32()%uint32(len(p.locks))]
}

// list reads the namespace's quotas (copies): from the cache, or from
// etcd when live, each replaced by the one this plugin wrote last when
// that is newer.
func (p *ResourceQuota) list(ctx context.Context, ns string, live bool) ([]*corev1.ResourceQuota, error) {
	var items []runtime.Object
	var err error
	if live {
		items, err = p.quotas.read(ctx, ns, true)
	} else {
		items, err = p.quotas.list(ctx, ns)
	}
	if err != nil {
		return nil, err
	}
	out := make([]*corev1.ResourceQuota, 0, len(items))
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := map[string]bool{}
	for _, o := range items {
		q := o.(*corev1.ResourceQuota)
		key := ns + "/" + q.Name
		seen[key] = true
		if w, ok := p.written[key]; ok {
			if w.UID == q.UID && newerRV(w.ResourceVersion, q.ResourceVersion) {
				q = w
			} else {
				delete(p.written, key)
			}
		}
		out = append(out, q.DeepCopy())
	}
	for key, w := range p.written {
		if w.Namespace == ns && !seen[key] {
			delete(p.written, key)
		}
	}
	return out, nil
}

func (p *ResourceQuota) remember(q *corev1.ResourceQuota) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.written[q.Namespace+"/"+q.Name] = q.DeepCopy()
}

// newerRV says resourceVersion a is after b.
func newerRV(a, b string) bool {
	x, err1 := strconv.ParseInt(a, 10, 64)
	y, err2 := strconv.ParseInt(b, 10, 64)
	return err1 == nil && err2 == nil && x > y
}

// evaluate computes the quotas' new status.used with the request charged,
// or refuses it. It returns the quotas whose usage changes.
func (p *ResourceQuota) evaluate(a *Attributes, quotas []*corev1.ResourceQuota) ([]*corev1.ResourceQuota, error) {
	gr := a.Resource.GroupResource()
	now := p.clock.Now()
	var matched []*corev1.ResourceQuota
	for _, q := range quotas {
		ok, err := quota.Matches(q, gr, a.Object)
		if err != nil {
			return nil, forbidden(a, fmt.Errorf("error matching scopes of quota %s, err: %v", q.Name, err))
		}
		if !ok {
			continue
		}
		restricted := quota.MatchingResources(gr, quota.ResourceNames(q.Status.Hard))
		if err := quota.Constraints(gr, restricted, a.Object); err != nil {
			return nil, forbidden(a, fmt.Errorf("failed quota: %s: %v", q.Name, err))
		}
		for _, n := range restricted {
			if _, ok := q.Status.Used[n]; !ok {
				return nil, forbidden(a, fmt.Errorf("status unknown for quota: %s, resources: %s", q.Name, quota.NamesString(restricted)))
			}
		}
		matched = append(matched, q)
	}
	if len(matched) == 0 {
		return nil, nil
	}
	usage := quota.Usage(gr, a.Object, now)
	if neg := quota.Negative(usage); len(neg) > 0 {
		return nil, forbidden(a, fmt.Errorf("quota usage is negative for resource(s): %s", quota.NamesString(neg)))
	}
	var changed []*corev1.ResourceQuota
	for _, q := range matched {
		delta := usage
		if a.Operation == Update && a.OldObject != nil {
			if ok, _ := quota.Matches(q, gr, a.OldObject); ok {
				delta = quota.SubtractNonNegative(usage, quota.Usage(gr, a.OldObject, now))
			}
		}
		requested := quota.RemoveZeros(quota.Mask(delta, quota.ResourceNames(q.Status.Hard)))
		if len(requested) == 0 {
			continue
		}
		used := quota.Add(q.Status.Used, requested)
		if a.Subresource != "status" {
			if ok, exceeded := quota.LessThanOrEqual(quota.Mask(used, quota.ResourceNames(requested)), q.Status.Hard); !ok {
				return nil, forbidden(a, fmt.Errorf("exceeded quota: %s, requested: %s, used: %s, limited: %s",
					q.Name, quota.String(quota.Mask(requested, exceeded)), quota.String(quota.Mask(q.Status.Used, exceeded)), quota.String(quota.Mask(q.Status.Hard, exceeded))))
			}
		}
		q.Status.Used = used
		changed = append(changed, q)
	}
	return changed, nil
}
