package customresources

import (
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

// cronTabConverter is a conversion webhook: v1 keeps the schedule in
// spec.cronSpec, v2 in spec.schedule. fail makes it refuse.
func cronTabConverter(t *testing.T, fail *atomic.Bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var review apiextensionsv1.ConversionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		resp := &apiextensionsv1.ConversionResponse{UID: review.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
		if fail.Load() {
			resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: "converter is down for maintenance"}
		}
		for _, raw := range review.Request.Objects {
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(raw.Raw); err != nil {
				t.Errorf("webhook: %v", err)
				continue
			}
			spec, _, _ := unstructured.NestedMap(u.Object, "spec")
			if spec == nil {
				spec = map[string]interface{}{}
			}
			switch review.Request.DesiredAPIVersion {
			case "stable.example.com/v2":
				if v, ok := spec["cronSpec"]; ok {
					spec["schedule"] = v
					delete(spec, "cronSpec")
				}
			case "stable.example.com/v1":
				if v, ok := spec["schedule"]; ok {
					spec["cronSpec"] = v
					delete(spec, "schedule")
				}
			}
			u.Object["spec"] = spec
			u.SetAPIVersion(review.Request.DesiredAPIVersion)
			data, _ := u.MarshalJSON()
			resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: data})
		}
		review.Response, review.Request = resp, nil
		_ = json.NewEncoder(w).Encode(&review)
	}
}

// TestConversionWebhook: a v1/v2 pair converted by a webhook the test
// serves over TLS: an object written through v2 is stored as v1 and read
// back in either version; a webhook that refuses fails the request with
// its message and writes nothing.
func TestConversionWebhook(t *testing.T) {
	var fail atomic.Bool
	srv := httptest.NewTLSServer(cronTabConverter(t, &fail))
	t.Cleanup(srv.Close)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})

	c := testapiserver.Start(t)
	ctx := testCtx(t)
	crd := decodeCRD(t, `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: crontabs.stable.example.com
spec:
  group: stable.example.com
  scope: Namespaced
  names: {plural: crontabs, singular: crontab, kind: CronTab}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {cronSpec: {type: string}}}
  - name: v2
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {schedule: {type: string}}}
`)
	url := srv.URL + "/convert"
	crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{ConversionReviewVersions: []string{"v1"},
			ClientConfig: &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: caPEM}}}
	createCRD(t, ctx, c, crd)
	dyn := dynamic.NewForConfigOrDie(c.Config)
	v1 := dyn.Resource(cronTabs).Namespace("default")
	v2 := dyn.Resource(schema.GroupVersionResource{Group: "stable.example.com", Version: "v2", Resource: "crontabs"}).Namespace("default")

	obj := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "stable.example.com/v2", "kind": "CronTab",
		"metadata": map[string]interface{}{"name": "converted"},
		"spec":     map[string]interface{}{"schedule": "0 3 * * *"},
	}}
	created, err := v2.Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create through v2: %v", err)
	}
	if s, _, _ := unstructured.NestedString(created.Object, "spec", "schedule"); s != "0 3 * * *" || created.GetAPIVersion() != "stable.example.com/v2" {
		t.Errorf("created: %v", created.Object)
	}
	resp, err := c.Etcd().Get(ctx, "/registry/stable.example.com/crontabs/default/converted")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("etcd: %v", err)
	}
	if stored := string(resp.Kvs[0].Value); !strings.Contains(stored, `"apiVersion":"stable.example.com/v1"`) || !strings.Contains(stored, `"cronSpec":"0 3 * * *"`) {
		t.Errorf("stored in the storage version v1: %s", stored)
	}
	got, err := v1.Get(ctx, "converted", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get through v1: %v", err)
	}
	if s, _, _ := unstructured.NestedString(got.Object, "spec", "cronSpec"); s != "0 3 * * *" {
		t.Errorf("v1 object: %v", got.Object)
	}

	fail.Store(true)
	obj.SetName("refused")
	_, err = v2.Create(ctx, obj, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "conversion webhook for stable.example.com/v2, Kind=CronTab failed") || !strings.Contains(err.Error(), "converter is down for maintenance") {
		t.Errorf("create through a refusing webhook: %v", err)
	}
	if keys := etcdKeys(t, c, "/registry/stable.example.com/crontabs/default/refused"); len(keys) != 0 {
		t.Errorf("a refused conversion wrote %v", keys)
	}
}
