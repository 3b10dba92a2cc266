package apiserver_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

var cronTabs = schema.GroupVersionResource{Group: "stable.example.com", Version: "v1", Resource: "crontabs"}

// cronTabConfig is the payload both objects of BenchmarkCreateCustomResource
// carry, so that the custom resource and the ConfigMap are the same size.
var cronTabConfig = strings.Repeat("listen: 0.0.0.0:8080\nlog-level: info\nworkers: 4\n", 4)

// cronTabCRD is the seed's CronTab shape: a structural schema with
// validation (a pattern, a minimum), a default and a status subresource,
// so that a create runs pruning, defaulting and schema validation.
func cronTabCRD() *apiextensionsv1.CustomResourceDefinition {
	str := apiextensionsv1.JSONSchemaProps{Type: "string"}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "crontabs.stable.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "stable.example.com",
			Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "crontabs", Singular: "crontab", Kind: "CronTab", ShortNames: []string{"ct"}},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"cronSpec": {Type: "string", Pattern: `^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$`},
							"image":    str,
							"config":   str,
							"replicas": {Type: "integer", Minimum: ptrFloat(1), Default: &apiextensionsv1.JSON{Raw: []byte("1")}},
						}},
						"status": {Type: "object", XPreserveUnknownFields: ptrBool(true)},
					},
				}},
			}},
		},
	}
}

func ptrFloat(f float64) *float64 { return &f }
func ptrBool(b bool) *bool        { return &b }

func newCronTab(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "stable.example.com/v1", "kind": "CronTab",
		"metadata": map[string]any{"name": name, "labels": map[string]any{"app": "bench"}},
		"spec":     map[string]any{"cronSpec": "*/5 * * * *", "image": "registry.example/cron:1.2.3", "config": cronTabConfig, "replicas": int64(2)},
	}}
}

func newCronTabConfigMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "bench"}},
		Data:       map[string]string{"cronSpec": "*/5 * * * *", "image": "registry.example/cron:1.2.3", "config": cronTabConfig, "replicas": "2"},
	}
}

// interleaveSlices is how many slices BenchmarkCreateCustomResource cuts
// each side's creates into.
const interleaveSlices = 8

// BenchmarkCreateCustomResource creates CronTabs (a custom resource with a
// structural schema, a default and a pattern) and ConfigMaps carrying the
// same data, with 1, 8 and 32 clients, in alternating rounds of the same
// run, both in JSON (custom resources have no protobuf). It reports each
// and their ratio (custom resource creates/s ÷ ConfigMap creates/s; the
// issue's aim is at least 0.8).
func BenchmarkCreateCustomResource(b *testing.B) {
	c := startCluster(b)
	ctx := context.Background()
	ax := apiextensionsclient.NewForConfigOrDie(c.cfg)
	if _, err := ax.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, cronTabCRD(), metav1.CreateOptions{}); err != nil {
		b.Fatalf("create CRD: %v", err)
	}
	n := concurrency[len(concurrency)-1]
	cms := c.clients(b, n, runtime.ContentTypeJSON)
	createNamespace(b, cms[0], benchNS)
	dyns := make([]dynamic.Interface, n)
	for i := range dyns {
		cfg := rest.CopyConfig(c.cfg)
		cfg.QPS = -1
		dyns[i] = dynamic.NewForConfigOrDie(cfg)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := dyns[0].Resource(cronTabs).Namespace(benchNS).Create(ctx, newCronTab("sample"), metav1.CreateOptions{})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("the CronTab resource is not served: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := cms[0].CoreV1().ConfigMaps(benchNS).Create(ctx, newCronTabConfigMap("sample"), metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	crSize, cmSize := storedSize(b, c, "/registry/stable.example.com/crontabs/"+benchNS+"/sample"), storedSize(b, c, "/registry/configmaps/"+benchNS+"/sample")

	round := 0
	for _, clients := range concurrency {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			round++
			prefix := fmt.Sprintf("r%d-", round)
			// Interleaved in slices, in ABBA order (CR, CM, CM, CR, ...),
			// so that a burst of load from outside falls on both sides
			// alike rather than on whichever ran first.
			createCR := func(w, i int) error {
				_, err := dyns[w].Resource(cronTabs).Namespace(benchNS).Create(ctx, newCronTab(prefix+fmt.Sprint(i)), metav1.CreateOptions{})
				return err
			}
			createCM := func(w, i int) error {
				_, err := cms[w].CoreV1().ConfigMaps(benchNS).Create(ctx, newCronTabConfigMap(prefix+fmt.Sprint(i)), metav1.CreateOptions{})
				return err
			}
			var cr, cm result
			done := 0
			for slice := 0; done < b.N; slice++ {
				n := min(max(b.N/interleaveSlices, 1), b.N-done)
				base := done
				order := []bool{true, false} // true: custom resources
				if slice%2 == 1 {
					order = []bool{false, true}
				}
				for _, isCR := range order {
					op, into := createCM, &cm
					if isCR {
						op, into = createCR, &cr
					}
					r, err := runConcurrent(clients, n, func(w, i int) error { return op(w, base+i) })
					if err != nil {
						b.Fatal(err)
					}
					into.add(r)
				}
				done += n
			}
			b.StopTimer() // ns/op covers both kinds of create
			report(b, "", cr)
			report(b, "configmap_", cm)
			reportRatios(b, cr, cm)
			b.ReportMetric(float64(crSize), "obj_bytes")
			b.ReportMetric(float64(cmSize), "configmap_obj_bytes")
		})
	}
}

// storedSize is the size of the value the server stored at key.
func storedSize(b *testing.B, c *cluster, key string) int {
	b.Helper()
	resp, err := c.etcd.Get(context.Background(), key)
	if err != nil || len(resp.Kvs) != 1 {
		b.Fatalf("read %s from etcd: %v", key, err)
	}
	return len(resp.Kvs[0].Value)
}
