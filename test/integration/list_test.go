package integration

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

func podNames(l *corev1.PodList) []string {
	out := []string{}
	for _, p := range l.Items {
		out = append(out, p.Name)
	}
	sort.Strings(out)
	return out
}

// testSelectors: label and field selectors on list and watch.
func testSelectors(t *testing.T, c *cluster) {
	cs := c.Clientset()
	ns := newNamespace(t, cs)
	ctx := testCtx(t, 30*time.Second)
	pods := cs.CoreV1().Pods(ns)
	mk := func(name string, labels map[string]string) {
		p := newPod(name)
		p.Labels = labels
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	mk("web-1", map[string]string{"app": "web", "tier": "front"})
	mk("web-2", map[string]string{"app": "web"})
	mk("db-1", map[string]string{"app": "db", "tier": "back"})
	mk("idle", nil)
	nodeA, nodeB, nodeC := ns+"-a", ns+"-b", ns+"-c"
	bindPod(t, c, ns, "web-1", nodeA)
	bindPod(t, c, ns, "db-1", nodeB)
	p, _ := pods.Get(ctx, "web-1", metav1.GetOptions{})
	p.Status.Phase = corev1.PodRunning
	if _, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update status: %v", err)
	}

	tests := []struct {
		name   string
		labels string
		fields string
		want   []string
	}{
		{"all", "", "", []string{"db-1", "idle", "web-1", "web-2"}},
		{"label equality", "app=web", "", []string{"web-1", "web-2"}},
		{"label inequality", "app!=web", "", []string{"db-1", "idle"}},
		{"label set", "app in (web,db)", "", []string{"db-1", "web-1", "web-2"}},
		{"label exists", "tier", "", []string{"db-1", "web-1"}},
		{"label not exists", "!tier", "", []string{"idle", "web-2"}},
		{"label and", "app=web,tier=front", "", []string{"web-1"}},
		{"nodeName", "", "spec.nodeName=" + nodeA, []string{"web-1"}},
		{"unscheduled", "", "spec.nodeName=", []string{"idle", "web-2"}},
		{"name", "", "metadata.name=db-1", []string{"db-1"}},
		{"namespace", "", "metadata.namespace=" + ns, []string{"db-1", "idle", "web-1", "web-2"}},
		{"phase", "", "status.phase=Running", []string{"web-1"}},
		{"phase not", "", "status.phase!=Running", []string{"db-1", "idle", "web-2"}},
		{"fields and", "", "status.phase=Pending,spec.nodeName=" + nodeB, []string{"db-1"}},
		{"labels and fields", "app=web", "spec.nodeName!=" + nodeA, []string{"web-2"}},
		{"no match", "app=none", "", []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, err := pods.List(ctx, metav1.ListOptions{LabelSelector: tc.labels, FieldSelector: tc.fields})
			if err != nil {
				t.Fatalf("list: %v", err)
			}
			if diff := cmp.Diff(tc.want, podNames(l)); diff != "" {
				t.Errorf("labels %q fields %q (-want +got):\n%s", tc.labels, tc.fields, diff)
			}
		})
	}

	// field selectors across namespaces
	l, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + nodeB})
	if err != nil {
		t.Fatalf("list all namespaces: %v", err)
	}
	if diff := cmp.Diff([]string{"db-1"}, podNames(l)); diff != "" {
		t.Errorf("all-namespace field selector (-want +got):\n%s", diff)
	}

	// errors
	for _, bad := range []metav1.ListOptions{
		{FieldSelector: "spec.unknownField=x"},
		{LabelSelector: "app in (a"},
		{FieldSelector: "spec.nodeName"},
	} {
		if _, err := pods.List(ctx, bad); !apierrors.IsBadRequest(err) {
			t.Errorf("list %+v: err %v, want 400 BadRequest", bad, err)
		}
	}
	// only metadata.name and metadata.namespace for configmaps
	if _, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=a"}); !apierrors.IsBadRequest(err) {
		t.Errorf("configmaps by spec.nodeName: err %v, want BadRequest", err)
	}

	// a watch with a field selector: an object entering the selection is
	// ADDED, one leaving it is DELETED
	w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + nodeC, ResourceVersion: l.ResourceVersion})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer w.Stop()
	bindPod(t, c, ns, "web-2", nodeC)
	p, _ = pods.Get(ctx, "web-2", metav1.GetOptions{})
	p.Status.Phase = corev1.PodSucceeded
	if _, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update status: %v", err)
	}
	lw, err := pods.Watch(ctx, metav1.ListOptions{LabelSelector: "app=web", FieldSelector: "status.phase=Succeeded", ResourceVersion: l.ResourceVersion})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer lw.Stop()
	got := readEvents(t, w, 2, 5*time.Second)
	want := []watchRecord{{watch.Added, "web-2", ""}, {watch.Modified, "web-2", ""}}
	for i := range got {
		got[i].RV = ""
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("nodeName watch (-want +got):\n%s", diff)
	}
	got = readEvents(t, lw, 1, 5*time.Second)
	for i := range got {
		got[i].RV = ""
	}
	if diff := cmp.Diff([]watchRecord{{watch.Added, "web-2", ""}}, got); diff != "" {
		t.Errorf("phase watch (-want +got):\n%s", diff)
	}
	// relabel out of the selection: DELETED
	p, _ = pods.Get(ctx, "web-2", metav1.GetOptions{})
	p.Labels = map[string]string{"app": "gone"}
	if _, err := pods.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("relabel: %v", err)
	}
	got = readEvents(t, lw, 1, 5*time.Second)
	for i := range got {
		got[i].RV = ""
	}
	if diff := cmp.Diff([]watchRecord{{watch.Deleted, "web-2", ""}}, got); diff != "" {
		t.Errorf("phase watch after relabel (-want +got):\n%s", diff)
	}
}

// testStaleUpdateConflict: an update with an old resourceVersion is a 409
// and changes nothing.
func testStaleUpdateConflict(t *testing.T, c *cluster) {
	cs := c.Clientset()
	ns := newNamespace(t, cs)
	ctx := testCtx(t, 20*time.Second)
	cms := cs.CoreV1().ConfigMaps(ns)
	orig, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"v": "1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	first := orig.DeepCopy()
	first.Data["v"] = "2"
	if _, err := cms.Update(ctx, first, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update: %v", err)
	}
	val, mod, _ := etcdGet(t, c, "/registry/configmaps/"+ns+"/cm")
	stale := orig.DeepCopy()
	stale.Data["v"] = "3"
	_, err = cms.Update(ctx, stale, metav1.UpdateOptions{})
	if !apierrors.IsConflict(err) {
		t.Fatalf("stale update: err %v, want 409 Conflict", err)
	}
	if st, ok := err.(apierrors.APIStatus); !ok || st.Status().Code != 409 || st.Status().Details == nil || st.Status().Details.Name != "cm" {
		t.Errorf("conflict status = %+v, want code 409 and details naming cm", err)
	}
	v2, mod2, _ := etcdGet(t, c, "/registry/configmaps/"+ns+"/cm")
	if mod2 != mod || string(v2) != string(val) {
		t.Errorf("stale update changed etcd (modRevision %d -> %d)", mod, mod2)
	}
	got, _ := cms.Get(ctx, "cm", metav1.GetOptions{})
	if got.Data["v"] != "2" {
		t.Errorf("data after stale update = %v, want v=2", got.Data)
	}
	// stale resourceVersion on a merge patch precondition conflicts too
	patch := fmt.Sprintf(`{"metadata":{"resourceVersion":%q},"data":{"v":"4"}}`, orig.ResourceVersion)
	if _, err := cms.Patch(ctx, "cm", "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("patch with stale resourceVersion: err %v, want Conflict", err)
	}
	// stale uid precondition on delete conflicts
	uid := orig.UID + "x"
	if err := cms.Delete(ctx, "cm", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); !apierrors.IsConflict(err) {
		t.Errorf("delete with wrong uid precondition: err %v, want Conflict", err)
	}
	stRV := orig.ResourceVersion
	if err := cms.Delete(ctx, "cm", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &stRV}}); !apierrors.IsConflict(err) {
		t.Errorf("delete with stale resourceVersion precondition: err %v, want Conflict", err)
	}
	if _, _, found := etcdGet(t, c, "/registry/configmaps/"+ns+"/cm"); !found {
		t.Errorf("a conflicting delete removed the object")
	}

	// The object deleted and created again under its name: a writer still
	// holding the first (its uid, no resourceVersion) is refused, by PUT
	// (the uid is a precondition, 409) and by a patch (uid is immutable,
	// 422), and the new object keeps its data.
	if err := cms.Delete(ctx, "cm", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	again, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"v": "new"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create again: %v", err)
	}
	held := orig.DeepCopy()
	held.ResourceVersion, held.Data["v"] = "", "old"
	if _, err := cms.Update(ctx, held, metav1.UpdateOptions{}); !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "UID in precondition") {
		t.Errorf("update with the first object's uid: err %v, want a 409 on the uid precondition", err)
	}
	patch = fmt.Sprintf(`{"metadata":{"uid":%q},"data":{"v":"old"}}`, orig.UID)
	if _, err := cms.Patch(ctx, "cm", "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "metadata.uid") {
		t.Errorf("patch with the first object's uid: err %v, want 422 on metadata.uid", err)
	}
	got, err = cms.Get(ctx, "cm", metav1.GetOptions{})
	if err != nil || got.UID != again.UID || got.Data["v"] != "new" {
		t.Errorf("the new object after writes holding the old uid: %v, %v; want uid %s and v=new", got, err, again.UID)
	}
}

// testPaging: limit/continue pages are a consistent snapshot.
func testPaging(t *testing.T, c *cluster) {
	cs := c.Clientset()
	ns := newNamespace(t, cs)
	ctx := testCtx(t, 30*time.Second)
	cms := cs.CoreV1().ConfigMaps(ns)
	var want []string
	for i := 0; i < 25; i++ {
		name := fmt.Sprintf("cm-%02d", i)
		want = append(want, name)
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create: %v", err)
		}
	}
	var got []string
	var sizes []int
	var firstRV string
	cont := ""
	for page := 0; ; page++ {
		if page > 5 {
			t.Fatalf("more than 5 pages")
		}
		l, err := cms.List(ctx, metav1.ListOptions{Limit: 10, Continue: cont})
		if err != nil {
			t.Fatalf("page %d: %v", page, err)
		}
		if page == 0 {
			firstRV = l.ResourceVersion
			// a write between pages must not show up in later pages
			if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-99-late"}}, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create between pages: %v", err)
			}
			if err := cms.Delete(ctx, "cm-24", metav1.DeleteOptions{}); err != nil {
				t.Fatalf("delete between pages: %v", err)
			}
		}
		if l.ResourceVersion != firstRV {
			t.Errorf("page %d resourceVersion %s, want the first page's %s", page, l.ResourceVersion, firstRV)
		}
		sizes = append(sizes, len(l.Items))
		for _, it := range l.Items {
			got = append(got, it.Name)
		}
		cont = l.Continue
		if cont == "" {
			if l.RemainingItemCount != nil && *l.RemainingItemCount != 0 {
				t.Errorf("last page remainingItemCount %d", *l.RemainingItemCount)
			}
			break
		}
		if page == 0 && (l.RemainingItemCount == nil || *l.RemainingItemCount != 15) {
			t.Errorf("first page remainingItemCount %v, want 15", l.RemainingItemCount)
		}
	}
	if diff := cmp.Diff([]int{10, 10, 5}, sizes); diff != "" {
		t.Errorf("page sizes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("names across pages (-want +got):\n%s", diff)
	}
	// a fresh list sees the writes
	l, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if len(l.Items) != 25 || l.Items[len(l.Items)-1].Name != "cm-99-late" {
		t.Errorf("fresh list: %d items, last %q; want 25 ending cm-99-late", len(l.Items), l.Items[len(l.Items)-1].Name)
	}
	// a malformed continue token is a 400
	if _, err := cms.List(ctx, metav1.ListOptions{Limit: 10, Continue: "garbage"}); !apierrors.IsBadRequest(err) {
		t.Errorf("bad continue token: err %v, want BadRequest", err)
	}
}
