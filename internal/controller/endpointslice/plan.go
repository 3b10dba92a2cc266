package endpointslice

import (
	"fmt"
	"hash/fnv"
	"sort"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// ManagedBy is the value of the managed-by label on our slices.
	ManagedBy = "endpointslice-controller.k8s.io"
	// HeadlessLabel marks the slices of headless services.
	HeadlessLabel = "service.kubernetes.io/headless"
)

// changes is what one sync writes.
type changes struct {
	create, update, delete []*discoveryv1.EndpointSlice
}

// plan computes the slices of svc from its desired groups and its
// existing managed slices. Endpoints stay in the slice they are in when
// they can; new ones fill free room, then new slices of at most max
// endpoints. A service without endpoints keeps one empty slice.
// Slice names are deterministic (service, group hash, index), so that a
// sync from a stale cache fails with AlreadyExists or Conflict instead of
// making duplicates.
func plan(svc *corev1.Service, existing []*discoveryv1.EndpointSlice, groups map[string]*group, max int) changes {
	var out changes
	used := map[string]bool{}
	byGroup := map[string][]*discoveryv1.EndpointSlice{}
	for _, s := range existing {
		used[s.Name] = true
		if !metav1.IsControlledBy(s, svc) {
			out.delete = append(out.delete, s)
			continue
		}
		k := groupKey(s.AddressType, s.Ports)
		byGroup[k] = append(byGroup[k], s)
	}
	total := 0
	for _, g := range groups {
		total += len(g.endpoints)
	}
	if total == 0 {
		at := addressTypes(svc)[0]
		groups = map[string]*group{groupKey(at, nil): {addressType: at, ports: []discoveryv1.EndpointPort{}, endpoints: map[string]discoveryv1.Endpoint{}}}
	}
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		g := groups[key]
		slices := byGroup[key]
		delete(byGroup, key)
		sort.Slice(slices, func(i, j int) bool { return slices[i].Name < slices[j].Name })
		placed := map[string]bool{}
		contents := make([][]discoveryv1.Endpoint, len(slices))
		for i, s := range slices {
			for _, ep := range s.Endpoints {
				k := endpointKey(ep)
				if d, ok := g.endpoints[k]; ok && !placed[k] && len(contents[i]) < max {
					contents[i] = append(contents[i], d)
					placed[k] = true
				}
			}
		}
		var rest []string
		for k := range g.endpoints {
			if !placed[k] {
				rest = append(rest, k)
			}
		}
		sort.Strings(rest)
		for i := range slices {
			for len(contents[i]) < max && len(rest) > 0 {
				contents[i] = append(contents[i], g.endpoints[rest[0]])
				rest = rest[1:]
			}
		}
		for i, s := range slices {
			if len(contents[i]) == 0 && !(len(g.endpoints) == 0 && i == 0) {
				out.delete = append(out.delete, s)
				continue
			}
			want := newSlice(svc, s.Name, g, contents[i])
			if !sameSlice(s, want) {
				next := s.DeepCopy()
				next.Labels, next.OwnerReferences = want.Labels, want.OwnerReferences
				next.Endpoints, next.Ports = want.Endpoints, want.Ports
				out.update = append(out.update, next)
			}
		}
		n := 0
		nextName := func() string {
			for {
				name := sliceName(svc.Name, key, n)
				n++
				if !used[name] {
					used[name] = true
					return name
				}
			}
		}
		if len(slices) == 0 && len(g.endpoints) == 0 {
			out.create = append(out.create, newSlice(svc, nextName(), g, nil))
		}
		for len(rest) > 0 {
			chunk := max
			if len(rest) < chunk {
				chunk = len(rest)
			}
			var eps []discoveryv1.Endpoint
			for _, k := range rest[:chunk] {
				eps = append(eps, g.endpoints[k])
			}
			rest = rest[chunk:]
			out.create = append(out.create, newSlice(svc, nextName(), g, eps))
		}
	}
	var stale []string
	for k := range byGroup {
		stale = append(stale, k)
	}
	sort.Strings(stale)
	for _, k := range stale {
		out.delete = append(out.delete, byGroup[k]...)
	}
	return out
}

// sliceName is "<service>-<group hash>-<index>".
func sliceName(service, groupKey string, i int) string {
	h := fnv.New32a()
	h.Write([]byte(groupKey))
	if len(service) > 200 {
		service = service[:200]
	}
	return fmt.Sprintf("%s-%08x-%d", service, h.Sum32(), i)
}

// newSlice is the slice named name holding eps of group g.
func newSlice(svc *corev1.Service, name string, g *group, eps []discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	labels := map[string]string{}
	for k, v := range svc.Labels {
		labels[k] = v
	}
	labels[discoveryv1.LabelServiceName] = svc.Name
	labels[discoveryv1.LabelManagedBy] = ManagedBy
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		labels[HeadlessLabel] = ""
	} else {
		delete(labels, HeadlessLabel)
	}
	eps = append([]discoveryv1.Endpoint(nil), eps...)
	sortEndpoints(eps)
	ports := append([]discoveryv1.EndpointPort(nil), g.ports...)
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       svc.Namespace,
			Labels:          labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(svc, corev1.SchemeGroupVersion.WithKind("Service"))},
		},
		AddressType: g.addressType,
		Endpoints:   eps,
		Ports:       ports,
	}
}

// sameSlice compares what the controller owns in a slice, treating nil
// and empty alike.
func sameSlice(a, b *discoveryv1.EndpointSlice) bool {
	norm := func(s *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
		c := &discoveryv1.EndpointSlice{AddressType: s.AddressType}
		c.Labels, c.OwnerReferences = s.Labels, s.OwnerReferences
		if len(c.Labels) == 0 {
			c.Labels = nil
		}
		if len(s.Endpoints) > 0 {
			c.Endpoints = append([]discoveryv1.Endpoint(nil), s.Endpoints...)
			sortEndpoints(c.Endpoints)
		}
		if len(s.Ports) > 0 {
			c.Ports = s.Ports
		}
		return c
	}
	return apiequality.Semantic.DeepEqual(norm(a), norm(b))
}
