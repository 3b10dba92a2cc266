package webhook

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"

	skadmission "github.com/skiff-sh/skiff/internal/apiserver/admission"
)

// static lists fixed objects and never reports a change.
func static(objs map[schema.GroupVersionResource]runtime.Object) func(schema.GroupVersionResource) cache.ListerWatcher {
	return func(gvr schema.GroupVersionResource) cache.ListerWatcher {
		return &cache.ListWatch{
			ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
				if l, ok := objs[gvr]; ok {
					return l.DeepCopyObject(), nil
				}
				switch gvr {
				case MutatingGVR:
					return &admissionregistrationv1.MutatingWebhookConfigurationList{}, nil
				case ValidatingGVR:
					return &admissionregistrationv1.ValidatingWebhookConfigurationList{}, nil
				}
				return &corev1.NamespaceList{}, nil
			},
			WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
				return watch.NewFake(), nil
			},
		}
	}
}

// labeller is a mutating webhook that labels every object it sees and
// counts its calls.
func labeller(t *testing.T, calls *int) *httptest.Server {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
			t.Errorf("webhook: %v", err)
			return
		}
		*calls++
		pt := admissionv1.PatchTypeJSONPatch
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true, PatchType: &pt,
			Patch:    []byte(`[{"op":"add","path":"/metadata/labels","value":{"mutated":"yes"}}]`),
			Warnings: []string{"labelled"}}
		review.Request = nil
		_ = json.NewEncoder(w).Encode(&review)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestMutating(t *testing.T) {
	calls := 0
	srv := labeller(t, &calls)
	url := srv.URL
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	hook := func(side admissionregistrationv1.SideEffectClass) *admissionregistrationv1.MutatingWebhookConfigurationList {
		// Stored as is: sideEffects Some cannot be created through v1, but
		// the plugin must still refuse dry runs for it, as upstream.
		return &admissionregistrationv1.MutatingWebhookConfigurationList{Items: []admissionregistrationv1.MutatingWebhookConfiguration{{
			ObjectMeta: metav1.ObjectMeta{Name: "label"},
			Webhooks: []admissionregistrationv1.MutatingWebhook{{
				Name: "label.example.com", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: ca},
				Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
				SideEffects: &side, AdmissionReviewVersions: []string{"v1"},
				NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{},
			}},
		}}}
	}
	cases := []struct {
		name       string
		side       admissionregistrationv1.SideEffectClass
		dryRun     bool
		wantErr    string
		wantLabels map[string]string
		wantCalls  int
	}{
		{name: "patch applied to Skiff's object", side: admissionregistrationv1.SideEffectClassNone,
			wantLabels: map[string]string{"mutated": "yes"}, wantCalls: 1},
		{name: "dry run with sideEffects None", side: admissionregistrationv1.SideEffectClassNone, dryRun: true,
			wantLabels: map[string]string{"mutated": "yes"}, wantCalls: 1},
		{name: "dry run with sideEffects Some is refused", side: admissionregistrationv1.SideEffectClassSome, dryRun: true,
			wantErr: `admission webhook "label.example.com" does not support dry run`},
		{name: "sideEffects Some outside a dry run", side: admissionregistrationv1.SideEffectClassSome,
			wantLabels: map[string]string{"mutated": "yes"}, wantCalls: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			calls = 0
			stop := make(chan struct{})
			defer close(stop)
			m, _, err := New(Options{
				ListWatch:    static(map[schema.GroupVersionResource]runtime.Object{MutatingGVR: hook(tc.side)}),
				GetNamespace: func(context.Context, string) (*corev1.Namespace, error) { return &corev1.Namespace{}, nil },
				Objects:      Objects{Scheme: clientgoscheme.Scheme},
				Stop:         stop,
			})
			if err != nil {
				t.Fatal(err)
			}
			// As Skiff's handler has it: typed, no apiVersion or kind set.
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm"}}
			a := &skadmission.Attributes{Operation: skadmission.Create, Resource: corev1.SchemeGroupVersion.WithResource("configmaps"),
				Kind: corev1.SchemeGroupVersion.WithKind("ConfigMap"), Namespace: "ns", Name: "cm", Object: cm, DryRun: tc.dryRun}
			err = m.Admit(context.Background(), a)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
				if !apierrors.IsBadRequest(err) {
					t.Errorf("error %v is not a 400", err)
				}
			}
			if diff := cmp.Diff(tc.wantErr, gotErr); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantLabels, cm.Labels); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
			if !cm.GetObjectKind().GroupVersionKind().Empty() {
				t.Errorf("the object got a kind: %v", cm.GetObjectKind().GroupVersionKind())
			}
			if calls != tc.wantCalls {
				t.Errorf("webhook called %d times, want %d", calls, tc.wantCalls)
			}
			if tc.wantCalls > 0 {
				if diff := cmp.Diff([]string{"labelled"}, a.TakeWarnings()); diff != "" {
					t.Errorf("warnings (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestNoConfigurationsSkipsTheLibrary(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	m, v, err := New(Options{
		ListWatch: static(nil),
		GetNamespace: func(context.Context, string) (*corev1.Namespace, error) {
			return nil, apierrors.NewNotFound(schema.GroupResource{}, "")
		},
		Stop: stop,
	})
	if err != nil {
		t.Fatal(err)
	}
	a := &skadmission.Attributes{Operation: skadmission.Create, Resource: corev1.SchemeGroupVersion.WithResource("pods"), Namespace: "missing", Object: &corev1.Pod{}}
	if err := m.Admit(context.Background(), a); err != nil {
		t.Errorf("admit: %v", err)
	}
	if err := v.Validate(context.Background(), a); err != nil {
		t.Errorf("validate: %v", err)
	}
}
