package discovery

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"sort"
	"strings"
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
	// first are the groups listed before the others, in this order.
	first  []string
	scheme *runtime.Scheme
	codecs serializer.CodecFactory
	docs   atomic.Pointer[documents]
}

// documents is one immutable snapshot of everything served.
type documents struct {
	// coreVersions are the versions of the core group ("v1").
	coreVersions []string
	// groups are the non-core groups, the preferred ones first, then by name.
	groups []metav1.APIGroup
	// resources by group/version ("v1", "apps/v1").
	resources map[string]*metav1.APIResourceList
	// aggregated documents for /api and /apis.
	aggregatedCore *apidiscoveryv2.APIGroupDiscoveryList
	aggregatedAPIs *apidiscoveryv2.APIGroupDiscoveryList
}

// New builds the discovery documents for resources. info is served at
// /version (see VersionInfo). The groups named in first are listed before
// the others, in that order (upstream lists apps first, by its group
// priority); the rest follow by name.
func New(resources []registry.Resource, info version.Info, first ...string) *Discovery {
	d := &Discovery{version: info, scheme: NewScheme(), first: first}
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
	d.docs.Store(build(resources, d.first))
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

func build(resources []registry.Resource, first []string) *documents {
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
		sortVersions(versionsByGroup[g])
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
	sortGroups(groupNames, first)
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

// sortVersions orders versions by Kubernetes priority: GA before beta before
// alpha, higher numbers first (v2, v1, v1beta2, v1beta1, v1alpha1).
func sortVersions(vs []string) {
	sort.SliceStable(vs, func(i, j int) bool {
		return version.CompareKubeAwareVersionStrings(vs[i], vs[j]) > 0
	})
}

// sortGroups puts the groups of first first, in that order, then the rest
// by name.
func sortGroups(gs []string, first []string) {
	rank := map[string]int{}
	for i, g := range first {
		rank[g] = i - len(first) // negative: before every other group
	}
	sort.Slice(gs, func(i, j int) bool {
		ri, rj := rank[gs[i]], rank[gs[j]]
		if ri != rj {
			return ri < rj
		}
		return gs[i] < gs[j]
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
