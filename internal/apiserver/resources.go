package apiserver

import (
	"context"
	"fmt"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skiff-sh/skiff/internal/apiserver/allocator"
	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/apps"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/coordination"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core"
	coreevent "github.com/skiff-sh/skiff/internal/apiserver/registry/core/event"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/discovery"
	eventsk8s "github.com/skiff-sh/skiff/internal/apiserver/registry/events/event"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/more"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/scheduling"
	"github.com/skiff-sh/skiff/internal/storage"
)

// builtinResources is every resource the server serves, built in one
// place.
func builtinResources(s *Server, alloc *allocator.Services) []registry.Resource {
	rs := core.CoreResourcesPart1()
	for i := range rs {
		if rs[i].GroupVersion == corev1.SchemeGroupVersion && rs[i].Resource == "pods" {
			rs[i] = withSub(rs[i], "log", "exec", "attach", "portforward", "eviction")
		}
		if rs[i].GroupVersion == eventsv1.SchemeGroupVersion {
			rs[i].Stored = eventsStoredAsCore
		}
	}
	rs = append(rs, core.CoreResourcesPart2(alloc)...)
	rs = append(rs, apps.Resources()...)
	rs = append(rs, coordination.Resource(), discovery.Resource())
	rs = append(rs, more.IssueThreeResourcesA()...)
	for _, r := range more.IssueThreeResourcesB() {
		if r.GroupVersion == schedulingv1.SchemeGroupVersion && r.Resource == "priorityclasses" {
			r = scheduling.Resource(s.listPriorityClasses)
		}
		rs = append(rs, r)
	}
	return s.virtualize(rs)
}

// listPriorityClasses reads every PriorityClass (for the single
// globalDefault rule).
func (s *Server) listPriorityClasses(ctx context.Context) ([]schedulingv1.PriorityClass, error) {
	h := s.handlers[schedulingv1.SchemeGroupVersion.WithResource("priorityclasses")]
	if h == nil {
		return nil, nil
	}
	list := &schedulingv1.PriorityClassList{}
	if err := h.store.List(ctx, h.prefix(), storage.ListOptions{}, list); err != nil {
		return nil, err
	}
	return list.Items, nil
}

func generic(gv schema.GroupVersion, plural, kind, singular string, namespaced bool, prefix string, short, cats []string, newFn, newList func() runtime.Object) registry.Resource {
	return registry.Resource{
		GroupVersion: gv, Resource: plural, Kind: kind, ListKind: kind + "List", SingularName: singular,
		ShortNames: short, Categories: cats, Namespaced: namespaced, StoragePrefix: prefix,
		New: newFn, NewList: newList, Strategy: registry.DefaultStrategy{},
	}
}

func withSub(r registry.Resource, subs ...string) registry.Resource {
	if r.Subresources == nil {
		r.Subresources = map[string]bool{}
	}
	for _, s := range subs {
		r.Subresources[s] = true
	}
	return r
}

// storageCodec is how a resource's objects are kept in etcd.
func storageCodec(res registry.Resource, gvk schema.GroupVersionKind) storage.Codec {
	if st := res.Stored; st != nil {
		return storage.ConvertingCodec{
			Storage: storage.ProtobufCodec{GVK: st.GVK}, NewStored: st.New,
			ToStored: st.ToStored, FromStored: st.FromStored, GVK: gvk,
		}
	}
	return storage.ProtobufCodec{GVK: gvk}
}

// storageTTL is how long a resource's objects live (events: one hour, as
// upstream's --event-ttl).
func storageTTL(res registry.Resource) int64 {
	if res.Resource == "events" {
		return int64(coreevent.TTLSeconds)
	}
	return 0
}

// appsScaler serves /scale of deployments and replicasets.
type appsScaler struct{}

func (appsScaler) ScaleOf(obj runtime.Object) (*autoscalingv1.Scale, error) { return apps.ScaleOf(obj) }
func (appsScaler) ApplyScale(obj runtime.Object, s *autoscalingv1.Scale) error {
	return apps.ApplyScale(obj, s)
}

// eventsStoredAsCore keeps events.k8s.io/v1 Events as core/v1 Events.
var eventsStoredAsCore = &registry.StoredVersion{
	GVK: corev1.SchemeGroupVersion.WithKind("Event"),
	New: func() runtime.Object { return &corev1.Event{} },
	ToStored: func(o runtime.Object) (runtime.Object, error) {
		ev, ok := o.(*eventsv1.Event)
		if !ok {
			return nil, fmt.Errorf("expected events.k8s.io/v1 Event, got %T", o)
		}
		return eventsk8s.ToCore(ev), nil
	},
	FromStored: func(stored, into runtime.Object) error {
		*into.(*eventsv1.Event) = *eventsk8s.FromCore(stored.(*corev1.Event))
		return nil
	},
}
