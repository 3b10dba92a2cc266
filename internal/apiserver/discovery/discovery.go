package discovery

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/version"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Discovery serves the discovery documents. It is safe for concurrent use;
// SetResources swaps the served set atomically (for custom resources).
type Discovery struct {
	version version.Info
	scheme  *runtime.Scheme
	codecs  serializer.CodecFactory
	docs    atomic.Pointer[documents]

	mu        sync.Mutex // serializes builds
	priority  Priority
	resources []registry.Resource // the last set
}

// Priority gives a group version's APIService priorities:
// groupPriorityMinimum and versionPriority. Groups are listed by the
// highest group priority of their versions (ties by the APIService name,
// "<version>.<group>"), versions by their priority, then by Kubernetes
// version order, as upstream's aggregator lists them: this order is what
// clients' RESTMappers prefer when two groups have a resource of the same
// name (networking.k8s.io's networkpolicies before a CRD's).
type Priority func(schema.GroupVersion) (group, version int32)

// documents is one immutable snapshot of everything served.
type documents struct {
	// coreVersions are the versions of the core group ("v1").
	coreVersions []string
	// groups are the non-core groups, in priority order (see Priority).
	groups []metav1.APIGroup
	// resources by group/version ("v1", "apps/v1").
	resources map[string]*metav1.APIResourceList
	// aggregated documents for /api and /apis.
	aggregatedCore *apidiscoveryv2.APIGroupDiscoveryList
	aggregatedAPIs *apidiscoveryv2.APIGroupDiscoveryList
}

// New builds the discovery documents for resources. info is served at
// /version (see VersionInfo). Until SetPriority, groups are listed by name
// and versions in Kubernetes version order.
func New(resources []registry.Resource, info version.Info) *Discovery {
	d := &Discovery{version: info, scheme: NewScheme()}
	d.codecs = serializer.NewCodecFactory(d.scheme)
	d.SetResources(resources)
	return d
}

// NewScheme returns a scheme holding the discovery types: the unversioned
// metav1 documents and Status, and apidiscovery.k8s.io/v2. Tests use it to
// decode responses.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	s.AddUnversionedTypes(metav1.Unversioned,
		&metav1.Status{}, &metav1.APIVersions{}, &metav1.APIGroupList{}, &metav1.APIGroup{}, &metav1.APIResourceList{})
	if err := apidiscoveryv2.AddToScheme(s); err != nil {
		panic(fmt.Sprintf("register apidiscovery/v2: %v", err)) // static registration, cannot fail
	}
	return s
}

// SetResources replaces the served resources.
func (d *Discovery) SetResources(resources []registry.Resource) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.resources = resources
	d.docs.Store(build(resources, d.priority))
}

// SetPriority sets the order of groups and versions (see Priority) and
// rebuilds the documents with it; call it again when priorities change.
func (d *Discovery) SetPriority(p Priority) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.priority = p
	d.docs.Store(build(d.resources, p))
}

// StorageVersionHash is upstream's hash of a storage version: the first 8
// bytes of SHA-256 of "group/version/kind", base64-encoded. Clients only
// compare it for equality; it changes when the storage version does.
func StorageVersionHash(gv schema.GroupVersion, kind string) string {
	sum := sha256.Sum256([]byte(gv.Group + "/" + gv.Version + "/" + kind))
	return base64.StdEncoding.EncodeToString(sum[:8])
}

// verbsOf are r's verbs, sorted.
func verbsOf(r registry.Resource) []string {
	out := append([]string(nil), r.Verbs()...)
	sort.Strings(out)
	return out
}

func build(resources []registry.Resource, priority Priority) *documents {
	if priority == nil {
		priority = func(schema.GroupVersion) (int32, int32) { return 0, 0 }
	}
	docs := &documents{resources: map[string]*metav1.APIResourceList{}}
	// group -> versions, and gv -> resources, in input order first.
	byGV := map[schema.GroupVersion][]registry.Resource{}
	versionsByGroup := map[string][]string{}
	for _, r := range resources {
		gv := r.GroupVersion
		if _, seen := byGV[gv]; !seen {
			versionsByGroup[gv.Group] = append(versionsByGroup[gv.Group], gv.Version)
		}
		byGV[gv] = append(byGV[gv], r)
	}
	for g := range versionsByGroup {
		sortVersions(g, versionsByGroup[g], priority)
	}

	// Every version of a resource reports the hash of its storage version,
	// taken to be the highest-priority version that serves it.
	storageVersion := map[schema.GroupResource]string{}
	for g, versions := range versionsByGroup {
		for i := len(versions) - 1; i >= 0; i-- {
			for _, r := range byGV[schema.GroupVersion{Group: g, Version: versions[i]}] {
				storageVersion[schema.GroupResource{Group: g, Resource: r.Resource}] = versions[i]
			}
		}
	}
	for gv, rs := range byGV {
		docs.resources[gv.String()] = resourceList(gv, rs, storageVersion)
	}

	docs.coreVersions = versionsByGroup[""]
	groupNames := make([]string, 0, len(versionsByGroup))
	for g := range versionsByGroup {
		if g != "" {
			groupNames = append(groupNames, g)
		}
	}
	sortGroups(groupNames, versionsByGroup, priority)
	for _, g := range groupNames {
		group := metav1.APIGroup{Name: g}
		for _, v := range versionsByGroup[g] {
			gv := schema.GroupVersion{Group: g, Version: v}
			group.Versions = append(group.Versions, metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: v})
		}
		group.PreferredVersion = group.Versions[0]
		docs.groups = append(docs.groups, group)
	}

	docs.aggregatedCore = aggregatedList()
	if len(docs.coreVersions) > 0 {
		docs.aggregatedCore.Items = append(docs.aggregatedCore.Items, aggregatedGroup("", docs.coreVersions, byGV))
	}
	docs.aggregatedAPIs = aggregatedList()
	for _, g := range groupNames {
		docs.aggregatedAPIs.Items = append(docs.aggregatedAPIs.Items, aggregatedGroup(g, versionsByGroup[g], byGV))
	}
	return docs
}

// sortVersions orders the versions of group by their versionPriority,
// then by Kubernetes version order: GA before beta before alpha, higher
// numbers first (v2, v1, v1beta2, v1beta1, v1alpha1).
func sortVersions(group string, vs []string, priority Priority) {
	sort.SliceStable(vs, func(i, j int) bool {
		_, pi := priority(schema.GroupVersion{Group: group, Version: vs[i]})
		_, pj := priority(schema.GroupVersion{Group: group, Version: vs[j]})
		if pi != pj {
			return pi > pj
		}
		return version.CompareKubeAwareVersionStrings(vs[i], vs[j]) > 0
	})
}

// sortGroups orders groups as upstream's aggregator: by the highest
// groupPriorityMinimum of their versions, ties by that APIService's name.
func sortGroups(gs []string, versionsByGroup map[string][]string, priority Priority) {
	type rank struct {
		priority int32
		name     string
	}
	ranks := map[string]rank{}
	for _, g := range gs {
		var best rank
		for i, v := range versionsByGroup[g] {
			p, _ := priority(schema.GroupVersion{Group: g, Version: v})
			name := v + "." + g
			if i == 0 || p > best.priority || (p == best.priority && name < best.name) {
				best = rank{p, name}
			}
		}
		ranks[g] = best
	}
	sort.Slice(gs, func(i, j int) bool {
		ri, rj := ranks[gs[i]], ranks[gs[j]]
		if ri.priority != rj.priority {
			return ri.priority > rj.priority
		}
		return ri.name < rj.name
	})
}

func resourceList(gv schema.GroupVersion, rs []registry.Resource, storageVersion map[schema.GroupResource]string) *metav1.APIResourceList {
	list := &metav1.APIResourceList{GroupVersion: gv.String(), APIResources: []metav1.APIResource{}}
	for _, r := range rs {
		list.APIResources = append(list.APIResources, metav1.APIResource{
			Name:               r.Resource,
			SingularName:       r.SingularName,
			Namespaced:         r.Namespaced,
			Kind:               r.Kind,
			Verbs:              verbsOf(r),
			ShortNames:         r.ShortNames,
			Categories:         r.Categories,
			StorageVersionHash: StorageVersionHash(schema.GroupVersion{Group: gv.Group, Version: storageVersion[schema.GroupResource{Group: gv.Group, Resource: r.Resource}]}, r.Kind),
		})
		for _, sub := range sortedSubresources(r) {
			gvk, verbs := r.SubresourceKind(sub), r.Subresources[sub].Verbs
			res := metav1.APIResource{
				Name:       r.Resource + "/" + sub,
				Namespaced: r.Namespaced,
				Kind:       gvk.Kind,
				Verbs:      verbs,
			}
			if gvk.GroupVersion() != gv {
				res.Group, res.Version = gvk.Group, gvk.Version
			}
			list.APIResources = append(list.APIResources, res)
		}
	}
	sort.SliceStable(list.APIResources, func(i, j int) bool {
		return list.APIResources[i].Name < list.APIResources[j].Name
	})
	return list
}

func sortedSubresources(r registry.Resource) []string {
	subs := make([]string, 0, len(r.Subresources))
	for s := range r.Subresources {
		if s != "" && !strings.Contains(s, "/") {
			subs = append(subs, s)
		}
	}
	sort.Strings(subs)
	return subs
}

func aggregatedList() *apidiscoveryv2.APIGroupDiscoveryList {
	return &apidiscoveryv2.APIGroupDiscoveryList{
		TypeMeta: metav1.TypeMeta{APIVersion: apidiscoveryv2.SchemeGroupVersion.String(), Kind: "APIGroupDiscoveryList"},
		Items:    []apidiscoveryv2.APIGroupDiscovery{},
	}
}

func aggregatedGroup(group string, versions []string, byGV map[schema.GroupVersion][]registry.Resource) apidiscoveryv2.APIGroupDiscovery {
	out := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: group}}
	for _, v := range versions {
		gv := schema.GroupVersion{Group: group, Version: v}
		rs := append([]registry.Resource(nil), byGV[gv]...)
		sort.SliceStable(rs, func(i, j int) bool { return rs[i].Resource < rs[j].Resource })
		vd := apidiscoveryv2.APIVersionDiscovery{
			Version:   v,
			Resources: []apidiscoveryv2.APIResourceDiscovery{},
			Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent,
		}
		for _, r := range rs {
			scope := apidiscoveryv2.ScopeCluster
			if r.Namespaced {
				scope = apidiscoveryv2.ScopeNamespace
			}
			rd := apidiscoveryv2.APIResourceDiscovery{
				Resource:         r.Resource,
				ResponseKind:     &metav1.GroupVersionKind{Group: gv.Group, Version: gv.Version, Kind: r.Kind},
				Scope:            scope,
				SingularResource: r.SingularName,
				Verbs:            verbsOf(r),
				ShortNames:       r.ShortNames,
				Categories:       r.Categories,
			}
			for _, sub := range sortedSubresources(r) {
				gvk, verbs := r.SubresourceKind(sub), r.Subresources[sub].Verbs
				rd.Subresources = append(rd.Subresources, apidiscoveryv2.APISubresourceDiscovery{
					Subresource:  sub,
					ResponseKind: &metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
					Verbs:        verbs,
				})
			}
			vd.Resources = append(vd.Resources, rd)
		}
		out.Versions = append(out.Versions, vd)
	}
	return out
}
