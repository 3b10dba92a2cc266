package integration

import (
	"context"
	"errors"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// object is what every typed API object is.
type object interface {
	runtime.Object
	metav1.Object
}

// typedClient is the shape every generated client-go typed client has.
type typedClient[T object, L runtime.Object] interface {
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// collectionDeleter is what typed clients of resources that serve
// deletecollection have beside typedClient (services and namespaces do not).
type collectionDeleter interface {
	DeleteCollection(ctx context.Context, opts metav1.DeleteOptions, listOpts metav1.ListOptions) error
}

// errNoDeleteCollection: the typed client has no DeleteCollection method.
var errNoDeleteCollection = errors.New("typed client has no DeleteCollection")

// crudClient is the one face the scenario drives, implemented over a
// typed client and over the dynamic client.
type crudClient interface {
	Create(ctx context.Context, obj metav1.Object) (metav1.Object, error)
	Get(ctx context.Context, name string) (metav1.Object, error)
	List(ctx context.Context, opts metav1.ListOptions) (items []metav1.Object, rv string, err error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Update(ctx context.Context, obj metav1.Object) (metav1.Object, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte) (metav1.Object, error)
	Delete(ctx context.Context, name string) error
	DeleteCollection(ctx context.Context, listOpts metav1.ListOptions) error
}

type typedAdapter[T object, L runtime.Object] struct{ c typedClient[T, L] }

func typed[T object, L runtime.Object](c typedClient[T, L]) crudClient { return typedAdapter[T, L]{c} }

func (a typedAdapter[T, L]) Create(ctx context.Context, obj metav1.Object) (metav1.Object, error) {
	return a.c.Create(ctx, obj.(T), metav1.CreateOptions{})
}
func (a typedAdapter[T, L]) Get(ctx context.Context, name string) (metav1.Object, error) {
	return a.c.Get(ctx, name, metav1.GetOptions{})
}
func (a typedAdapter[T, L]) List(ctx context.Context, opts metav1.ListOptions) ([]metav1.Object, string, error) {
	l, err := a.c.List(ctx, opts)
	if err != nil {
		return nil, "", err
	}
	return listItems(l)
}
func (a typedAdapter[T, L]) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return a.c.Watch(ctx, opts)
}
func (a typedAdapter[T, L]) Update(ctx context.Context, obj metav1.Object) (metav1.Object, error) {
	return a.c.Update(ctx, obj.(T), metav1.UpdateOptions{})
}
func (a typedAdapter[T, L]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte) (metav1.Object, error) {
	return a.c.Patch(ctx, name, pt, data, metav1.PatchOptions{})
}
func (a typedAdapter[T, L]) Delete(ctx context.Context, name string) error {
	return a.c.Delete(ctx, name, metav1.DeleteOptions{})
}
func (a typedAdapter[T, L]) DeleteCollection(ctx context.Context, listOpts metav1.ListOptions) error {
	dc, ok := a.c.(collectionDeleter)
	if !ok {
		return errNoDeleteCollection
	}
	return dc.DeleteCollection(ctx, metav1.DeleteOptions{}, listOpts)
}

// dynamicAdapter drives the dynamic client; objects cross it as typed
// fixtures converted to unstructured.
type dynamicAdapter struct {
	c   dynamic.ResourceInterface
	gvk schema.GroupVersionKind
}

func (a dynamicAdapter) toU(obj metav1.Object) *unstructured.Unstructured {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		panic(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(a.gvk)
	return u
}
func (a dynamicAdapter) Create(ctx context.Context, obj metav1.Object) (metav1.Object, error) {
	return a.c.Create(ctx, a.toU(obj), metav1.CreateOptions{})
}
func (a dynamicAdapter) Get(ctx context.Context, name string) (metav1.Object, error) {
	return a.c.Get(ctx, name, metav1.GetOptions{})
}
func (a dynamicAdapter) List(ctx context.Context, opts metav1.ListOptions) ([]metav1.Object, string, error) {
	l, err := a.c.List(ctx, opts)
	if err != nil {
		return nil, "", err
	}
	return listItems(l)
}
func (a dynamicAdapter) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return a.c.Watch(ctx, opts)
}
func (a dynamicAdapter) Update(ctx context.Context, obj metav1.Object) (metav1.Object, error) {
	return a.c.Update(ctx, a.toU(obj), metav1.UpdateOptions{})
}
func (a dynamicAdapter) Patch(ctx context.Context, name string, pt types.PatchType, data []byte) (metav1.Object, error) {
	return a.c.Patch(ctx, name, pt, data, metav1.PatchOptions{})
}
func (a dynamicAdapter) Delete(ctx context.Context, name string) error {
	return a.c.Delete(ctx, name, metav1.DeleteOptions{})
}
func (a dynamicAdapter) DeleteCollection(ctx context.Context, listOpts metav1.ListOptions) error {
	return a.c.DeleteCollection(ctx, metav1.DeleteOptions{}, listOpts)
}

func listItems(l runtime.Object) ([]metav1.Object, string, error) {
	lm, err := meta.ListAccessor(l)
	if err != nil {
		return nil, "", err
	}
	objs, err := meta.ExtractList(l)
	if err != nil {
		return nil, "", err
	}
	out := make([]metav1.Object, 0, len(objs))
	for _, o := range objs {
		m, err := meta.Accessor(o)
		if err != nil {
			return nil, "", err
		}
		out = append(out, m)
	}
	return out, lm.GetResourceVersion(), nil
}

func names(objs []metav1.Object) []string {
	out := []string{}
	for _, o := range objs {
		out = append(out, o.GetName())
	}
	sort.Strings(out)
	return out
}

// resourceCase is one resource under test: how to build a valid object
// and how to reach it with each client.
type resourceCase struct {
	name    string
	gvr     schema.GroupVersionResource
	gvk     schema.GroupVersionKind
	cluster bool // cluster-scoped
	// fixture builds a valid object named name in namespace ns.
	fixture func(ns, name string) object
	typed   func(cs kubernetes.Interface, ns string) crudClient
	// deleteKeeps: a delete marks the object (namespaces turn Terminating)
	// instead of removing it.
	deleteKeeps bool
	// noCollection: upstream does not serve deletecollection (405).
	noCollection bool
}

func podTemplate(app string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
}

func resourceCases() []resourceCase {
	mk := func(name string, gv schema.GroupVersion, r, k string, cluster bool, fx func(ns, name string) object, tc func(cs kubernetes.Interface, ns string) crudClient) resourceCase {
		return resourceCase{name: name, gvr: gv.WithResource(r), gvk: gv.WithKind(k), cluster: cluster, fixture: fx, typed: tc}
	}
	cv := corev1.SchemeGroupVersion
	cases := []resourceCase{
		mk("configmaps", cv, "configmaps", "ConfigMap", false,
			func(ns, n string) object {
				return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n}, Data: map[string]string{"k": "v"}}
			},
			func(cs kubernetes.Interface, ns string) crudClient { return typed(cs.CoreV1().ConfigMaps(ns)) }),
		mk("secrets", cv, "secrets", "Secret", false,
			func(ns, n string) object {
				return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: n}, Data: map[string][]byte{"k": []byte("v")}}
			},
			func(cs kubernetes.Interface, ns string) crudClient { return typed(cs.CoreV1().Secrets(ns)) }),
		mk("pods", cv, "pods", "Pod", false,
			func(ns, n string) object { return newPod(n) },
			func(cs kubernetes.Interface, ns string) crudClient { return typed(cs.CoreV1().Pods(ns)) }),
		mk("services", cv, "services", "Service", false,
			func(ns, n string) object {
				return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: n}, Spec: corev1.ServiceSpec{
					Selector: map[string]string{"app": "it"},
					Ports:    []corev1.ServicePort{{Port: 80}},
				}}
			},
			func(cs kubernetes.Interface, ns string) crudClient { return typed(cs.CoreV1().Services(ns)) }),
		mk("deployments", appsv1.SchemeGroupVersion, "deployments", "Deployment", false,
			func(ns, n string) object {
				return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: n}, Spec: appsv1.DeploymentSpec{
					Replicas: ptr.To[int32](1),
					Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": n}},
					Template: podTemplate(n),
				}}
			},
			func(cs kubernetes.Interface, ns string) crudClient { return typed(cs.AppsV1().Deployments(ns)) }),
		mk("replicasets", appsv1.SchemeGroupVersion, "replicasets", "ReplicaSet", false,
			func(ns, n string) object {
				return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: n}, Spec: appsv1.ReplicaSetSpec{
					Replicas: ptr.To[int32](1),
					Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": n}},
					Template: podTemplate(n),
				}}
			},
			func(cs kubernetes.Interface, ns string) crudClient { return typed(cs.AppsV1().ReplicaSets(ns)) }),
		mk("nodes", cv, "nodes", "Node", true,
			func(ns, n string) object { return newNode(n) },
			func(cs kubernetes.Interface, ns string) crudClient { return typed(cs.CoreV1().Nodes()) }),
		mk("events", cv, "events", "Event", false,
			func(ns, n string) object {
				return &corev1.Event{
					ObjectMeta:     metav1.ObjectMeta{Name: n},
					InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "p", APIVersion: "v1"},
					Reason:         "Tested", Message: "integration", Type: corev1.EventTypeNormal,
					Source:         corev1.EventSource{Component: "integration"},
					FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(), Count: 1,
				}
			},
			func(cs kubernetes.Interface, ns string) crudClient { return typed(cs.CoreV1().Events(ns)) }),
		mk("leases", coordinationv1.SchemeGroupVersion, "leases", "Lease", false,
			func(ns, n string) object {
				return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: n}, Spec: coordinationv1.LeaseSpec{
					HolderIdentity: ptr.To("holder"), LeaseDurationSeconds: ptr.To[int32](15),
				}}
			},
			func(cs kubernetes.Interface, ns string) crudClient { return typed(cs.CoordinationV1().Leases(ns)) }),
		mk("endpoints", cv, "endpoints", "Endpoints", false,
			func(ns, n string) object {
				return &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: n}, Subsets: []corev1.EndpointSubset{{
					Addresses: []corev1.EndpointAddress{{IP: "10.42.0.5"}},
					Ports:     []corev1.EndpointPort{{Port: 80, Protocol: corev1.ProtocolTCP}},
				}}}
			},
			func(cs kubernetes.Interface, ns string) crudClient { return typed(cs.CoreV1().Endpoints(ns)) }),
		mk("endpointslices", discoveryv1.SchemeGroupVersion, "endpointslices", "EndpointSlice", false,
			func(ns, n string) object {
				return &discoveryv1.EndpointSlice{
					ObjectMeta:  metav1.ObjectMeta{Name: n},
					AddressType: discoveryv1.AddressTypeIPv4,
					Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.42.0.5"}}},
					Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](80), Protocol: ptr.To(corev1.ProtocolTCP)}},
				}
			},
			func(cs kubernetes.Interface, ns string) crudClient { return typed(cs.DiscoveryV1().EndpointSlices(ns)) }),
		mk("serviceaccounts", cv, "serviceaccounts", "ServiceAccount", false,
			func(ns, n string) object { return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: n}} },
			func(cs kubernetes.Interface, ns string) crudClient { return typed(cs.CoreV1().ServiceAccounts(ns)) }),
	}
	nsCase := mk("namespaces", cv, "namespaces", "Namespace", true,
		func(ns, n string) object { return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}} },
		func(cs kubernetes.Interface, ns string) crudClient { return typed(cs.CoreV1().Namespaces()) })
	nsCase.deleteKeeps, nsCase.noCollection = true, true
	return append(cases, nsCase)
}

// testCRUD runs every verb with the typed and the dynamic client over each
// resource and checks the results and the watch stream they produce.
func testCRUD(t *testing.T, c *cluster) {
	cs := c.Clientset()
	dyn := c.Dynamic()
	for _, client := range []string{"typed", "dynamic"} {
		ns := newNamespace(t, cs)
		for _, rc := range resourceCases() {
			t.Run(client+"/"+rc.name, func(t *testing.T) {
				var cl crudClient
				if client == "typed" {
					cl = rc.typed(cs, ns)
				} else {
					ri := dyn.Resource(rc.gvr)
					var r dynamic.ResourceInterface = ri
					if !rc.cluster {
						r = ri.Namespace(ns)
					}
					cl = dynamicAdapter{c: r, gvk: rc.gvk}
				}
				prefix := client[:1] + "-" + ns // unique among cluster-scoped names
				runCRUD(t, cl, rc, ns, prefix)
			})
		}
	}
}

// watchRecord is what the scenario compares a watch stream against.
type watchRecord struct {
	Type watch.EventType
	Name string
	RV   string
}

func runCRUD(t *testing.T, cl crudClient, rc resourceCase, ns, prefix string) {
	ctx := testCtx(t, 30*time.Second)
	suite := map[string]string{"suite": prefix}
	sel := metav1.ListOptions{LabelSelector: "suite=" + prefix}
	name := prefix + "-a"

	// list then watch from the list's resourceVersion, as an informer does
	items, listRV, err := cl.List(ctx, sel)
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if len(items) != 0 || listRV == "" {
		t.Fatalf("initial list: %d items, resourceVersion %q; want 0 items and a resourceVersion", len(items), listRV)
	}
	wsel := sel
	wsel.ResourceVersion = listRV
	w, err := cl.Watch(ctx, wsel)
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer w.Stop()
	var want []watchRecord

	// create
	obj := rc.fixture(ns, name)
	obj.SetLabels(mergeMaps(obj.GetLabels(), suite))
	created, err := cl.Create(ctx, obj)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if created.GetUID() == "" || created.GetResourceVersion() == "" || created.GetCreationTimestamp().Time.IsZero() {
		t.Errorf("create returned uid %q resourceVersion %q creationTimestamp %v; want all set",
			created.GetUID(), created.GetResourceVersion(), created.GetCreationTimestamp())
	}
	if got := created.GetName(); got != name {
		t.Errorf("create returned name %q, want %q", got, name)
	}
	if !rc.cluster && created.GetNamespace() != ns {
		t.Errorf("create returned namespace %q, want %q", created.GetNamespace(), ns)
	}
	want = append(want, watchRecord{watch.Added, name, created.GetResourceVersion()})

	// get
	got, err := cl.Get(ctx, name)
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if got.GetUID() != created.GetUID() || got.GetResourceVersion() != created.GetResourceVersion() {
		t.Errorf("get: uid/rv %s/%s, want %s/%s", got.GetUID(), got.GetResourceVersion(), created.GetUID(), created.GetResourceVersion())
	}

	// list with the label selector
	items, _, err = cl.List(ctx, sel)
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if diff := cmp.Diff([]string{name}, names(items)); diff != "" {
		t.Errorf("list by label (-want +got):\n%s", diff)
	}

	// update
	got.SetLabels(mergeMaps(got.GetLabels(), map[string]string{"updated": "true"}))
	updated, err := cl.Update(ctx, got)
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if updated.GetLabels()["updated"] != "true" || updated.GetResourceVersion() == created.GetResourceVersion() {
		t.Errorf("update: labels %v rv %s (created rv %s); want label updated=true and a new rv",
			updated.GetLabels(), updated.GetResourceVersion(), created.GetResourceVersion())
	}
	want = append(want, watchRecord{watch.Modified, name, updated.GetResourceVersion()})

	// the three patch types
	patches := []struct {
		pt   types.PatchType
		body string
		key  string
	}{
		{types.MergePatchType, `{"metadata":{"annotations":{"merge":"1"}}}`, "merge"},
		{types.JSONPatchType, `[{"op":"add","path":"/metadata/annotations/json","value":"1"}]`, "json"},
		{types.StrategicMergePatchType, `{"metadata":{"annotations":{"smp":"1"}}}`, "smp"},
	}
	var last metav1.Object = updated
	for _, p := range patches {
		patched, err := cl.Patch(ctx, name, p.pt, []byte(p.body))
		if err != nil {
			t.Fatalf("patch %s: %v", p.pt, err)
		}
		if patched.GetAnnotations()[p.key] != "1" || patched.GetLabels()["updated"] != "true" {
			t.Errorf("patch %s: annotations %v labels %v; want %s=1 added and the rest kept", p.pt, patched.GetAnnotations(), patched.GetLabels(), p.key)
		}
		if patched.GetResourceVersion() == last.GetResourceVersion() {
			t.Errorf("patch %s did not change resourceVersion %s", p.pt, last.GetResourceVersion())
		}
		last = patched
		want = append(want, watchRecord{watch.Modified, name, patched.GetResourceVersion()})
	}
	if diff := cmp.Diff(map[string]string{"merge": "1", "json": "1", "smp": "1"}, pick(last.GetAnnotations(), "merge", "json", "smp")); diff != "" {
		t.Errorf("annotations after patches (-want +got):\n%s", diff)
	}

	// delete
	if err := cl.Delete(ctx, name); err != nil {
		t.Fatalf("delete: %v", err)
	}
	after, err := cl.Get(ctx, name)
	switch {
	case rc.deleteKeeps:
		if err != nil {
			t.Fatalf("get after delete: %v; want the object kept while finalizers remain", err)
		}
		if after.GetDeletionTimestamp() == nil {
			t.Errorf("after delete: deletionTimestamp not set")
		}
		want = append(want, watchRecord{watch.Modified, name, after.GetResourceVersion()})
	case !apierrors.IsNotFound(err):
		t.Errorf("get after delete: err %v, want NotFound", err)
		want = append(want, watchRecord{watch.Deleted, name, ""})
	default:
		want = append(want, watchRecord{watch.Deleted, name, ""})
	}

	// the watch saw every write, in order, with the writes' versions
	gotEvents := readEvents(t, w, len(want), 5*time.Second)
	for i := range gotEvents {
		if want[i].RV == "" {
			gotEvents[i].RV = ""
		}
	}
	if diff := cmp.Diff(want, gotEvents); diff != "" {
		t.Errorf("watch events (-want +got):\n%s", diff)
	}

	if rc.noCollection {
		// upstream serves no deletecollection here: 405 MethodNotAllowed
		err := cl.DeleteCollection(ctx, sel)
		if !errors.Is(err, errNoDeleteCollection) && !apierrors.IsMethodNotSupported(err) {
			t.Errorf("deletecollection: err %v, want 405 MethodNotAllowed", err)
		}
		return
	}
	// deletecollection removes exactly the selected objects
	for _, n := range []string{"b", "c"} {
		o := rc.fixture(ns, prefix+"-"+n)
		o.SetLabels(mergeMaps(o.GetLabels(), suite))
		if _, err := cl.Create(ctx, o); err != nil {
			t.Fatalf("create %s: %v", n, err)
		}
	}
	other := rc.fixture(ns, prefix+"-other")
	other.SetLabels(mergeMaps(other.GetLabels(), map[string]string{"suite": prefix + "-other"}))
	if _, err := cl.Create(ctx, other); err != nil {
		t.Fatalf("create other: %v", err)
	}
	if err := cl.DeleteCollection(ctx, sel); errors.Is(err, errNoDeleteCollection) {
		return // client-go's typed services client has none; the dynamic one checks it
	} else if err != nil {
		t.Fatalf("deletecollection: %v", err)
	}
	items, _, err = cl.List(ctx, sel)
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if len(items) != 0 {
		t.Errorf("after deletecollection: %v remain", names(items))
	}
	if _, err := cl.Get(ctx, prefix+"-other"); err != nil {
		t.Errorf("deletecollection removed an unselected object: %v", err)
	}
	if err := cl.Delete(ctx, prefix+"-other"); err != nil {
		t.Errorf("delete other: %v", err)
	}
}

// readEvents reads n events (or fails after d) as records.
func readEvents(t testing.TB, w watch.Interface, n int, d time.Duration) []watchRecord {
	t.Helper()
	var out []watchRecord
	timeout := time.After(d)
	for len(out) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Errorf("watch closed after %d events: %v", len(out), out)
				return out
			}
			if ev.Type == watch.Error {
				t.Errorf("watch error: %v", apierrors.FromObject(ev.Object))
				return out
			}
			if ev.Type == watch.Bookmark {
				continue
			}
			m, err := meta.Accessor(ev.Object)
			if err != nil {
				t.Fatalf("watch event object: %v", err)
			}
			out = append(out, watchRecord{ev.Type, m.GetName(), m.GetResourceVersion()})
		case <-timeout:
			t.Errorf("got %d watch events after %v, want %d: %v", len(out), d, n, out)
			return out
		}
	}
	return out
}

func mergeMaps(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

func pick(m map[string]string, keys ...string) map[string]string {
	out := map[string]string{}
	for _, k := range keys {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	return out
}
