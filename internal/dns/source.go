package dns

import (
	"strings"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"
)

// Index names on the informers' indexers.
const (
	byIP      = "ip"
	byService = "service"
)

// IndexFuncs are the indexers the Source needs on the Service informer.
func ServiceIndexers() cache.Indexers {
	return cache.Indexers{
		byIP: func(obj any) ([]string, error) {
			s, ok := obj.(*v1.Service)
			if !ok {
				return nil, nil
			}
			var ips []string
			for _, ip := range s.Spec.ClusterIPs {
				if ip != "" && ip != v1.ClusterIPNone {
					ips = append(ips, ip)
				}
			}
			return ips, nil
		},
	}
}

// SliceIndexers are the indexers the Source needs on the EndpointSlice
// informer: by owning service (ns/name) and by address.
func SliceIndexers() cache.Indexers {
	return cache.Indexers{
		byService: func(obj any) ([]string, error) {
			s, ok := obj.(*discoveryv1.EndpointSlice)
			if !ok || s.Labels[discoveryv1.LabelServiceName] == "" {
				return nil, nil
			}
			return []string{s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName]}, nil
		},
		byIP: func(obj any) ([]string, error) {
			s, ok := obj.(*discoveryv1.EndpointSlice)
			if !ok {
				return nil, nil
			}
			var ips []string
			for _, e := range s.Endpoints {
				ips = append(ips, e.Addresses...)
			}
			return ips, nil
		},
	}
}

// Source answers the lookups DNS needs from informer indexers (or, in
// tests, indexers filled by hand).
type Source struct {
	Services cache.Indexer
	Slices   cache.Indexer
}

// Service is ns/name, or nil.
func (s Source) Service(ns, name string) *v1.Service {
	obj, ok, err := s.Services.GetByKey(ns + "/" + name)
	if err != nil || !ok {
		return nil
	}
	svc, _ := obj.(*v1.Service)
	return svc
}

// HasNamespace says whether any Service lives in ns (the name
// ns.svc.<zone> then exists, with no records of its own).
func (s Source) HasNamespace(ns string) bool {
	keys, err := s.Services.IndexKeys(cache.NamespaceIndex, ns)
	if err == nil {
		return len(keys) > 0
	}
	for _, k := range s.Services.ListKeys() {
		if strings.HasPrefix(k, ns+"/") {
			return true
		}
	}
	return false
}

// EndpointSlices of service ns/name.
func (s Source) EndpointSlices(ns, name string) []*discoveryv1.EndpointSlice {
	objs, err := s.Slices.ByIndex(byService, ns+"/"+name)
	if err != nil {
		return nil
	}
	out := make([]*discoveryv1.EndpointSlice, 0, len(objs))
	for _, o := range objs {
		if sl, ok := o.(*discoveryv1.EndpointSlice); ok {
			out = append(out, sl)
		}
	}
	return out
}

// ServicesByIP are the Services with that ClusterIP.
func (s Source) ServicesByIP(ip string) []*v1.Service {
	objs, _ := s.Services.ByIndex(byIP, ip)
	var out []*v1.Service
	for _, o := range objs {
		if svc, ok := o.(*v1.Service); ok {
			out = append(out, svc)
		}
	}
	return out
}

// SlicesByIP are the EndpointSlices holding that address.
func (s Source) SlicesByIP(ip string) []*discoveryv1.EndpointSlice {
	objs, _ := s.Slices.ByIndex(byIP, ip)
	var out []*discoveryv1.EndpointSlice
	for _, o := range objs {
		if sl, ok := o.(*discoveryv1.EndpointSlice); ok {
			out = append(out, sl)
		}
	}
	return out
}
