package customresources

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"

	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

// TestHelmChartWithCRDs installs, upgrades and uninstalls, through the
// Helm SDK, a chart whose crds/ folder brings the CronTab CRD and whose
// templates hold a CronTab: Helm creates the CRD, waits for it to be
// Established and served (it re-reads discovery), then creates the
// custom resource; uninstall deletes the custom resource and keeps the
// CRD, as Helm does.
func TestHelmChartWithCRDs(t *testing.T) {
	c := testapiserver.Start(t)
	ctx := testCtx(t)
	kubeconfig := filepath.Join(t.TempDir(), "helm.kubeconfig")
	data, err := os.ReadFile(c.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kubeconfig, data, 0o600); err != nil {
		t.Fatal(err)
	}
	ns, cacheDir := "default", filepath.Join(t.TempDir(), "cache")
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig, flags.Namespace, flags.CacheDir = &kubeconfig, &ns, &cacheDir
	cfg := new(action.Configuration)
	if err := cfg.Init(flags, ns, "secret", func(format string, v ...any) { t.Logf("helm: "+format, v...) }); err != nil {
		t.Fatalf("helm init: %v", err)
	}
	chrt, err := loader.Load(filepath.Join("testdata", "crdchart"))
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	ax := apiextensionsclient.NewForConfigOrDie(c.Config)
	cts := dynamic.NewForConfigOrDie(c.Config).Resource(cronTabs).Namespace(ns)

	install := action.NewInstall(cfg)
	install.ReleaseName, install.Namespace, install.Timeout = "ops", ns, 30*time.Second
	if _, err := install.RunWithContext(ctx, chrt, nil); err != nil {
		t.Fatalf("install: %v", err)
	}
	if _, err := ax.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "crontabs.stable.example.com", metav1.GetOptions{}); err != nil {
		t.Fatalf("the chart's CRD: %v", err)
	}
	ct, err := cts.Get(ctx, "ops-nightly", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the chart's CronTab: %v", err)
	}
	if s, _, _ := unstructured.NestedString(ct.Object, "spec", "cronSpec"); s != "*/5 * * * *" || ct.GetLabels()["app.kubernetes.io/managed-by"] != "Helm" {
		t.Errorf("CronTab spec.cronSpec %q labels %v", s, ct.GetLabels())
	}

	upgrade := action.NewUpgrade(cfg)
	upgrade.Namespace, upgrade.Timeout = ns, 30*time.Second
	if _, err := upgrade.RunWithContext(ctx, "ops", chrt, map[string]any{"schedule": "0 3 * * *", "replicas": 2}); err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	ct, err = cts.Get(ctx, "ops-nightly", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, _, _ := unstructured.NestedString(ct.Object, "spec", "cronSpec")
	r, _, _ := unstructured.NestedInt64(ct.Object, "spec", "replicas")
	if s != "0 3 * * *" || r != 2 || ct.GetGeneration() != 2 {
		t.Errorf("after upgrade: cronSpec %q replicas %d generation %d", s, r, ct.GetGeneration())
	}

	if _, err := action.NewUninstall(cfg).Run("ops"); err != nil {
		t.Fatalf("uninstall: %v", err)
	}
	if _, err := cts.Get(ctx, "ops-nightly", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the CronTab after uninstall: %v, want 404", err)
	}
	if _, err := ax.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "crontabs.stable.example.com", metav1.GetOptions{}); err != nil {
		t.Errorf("Helm keeps CRDs on uninstall, but: %v", err)
	}
}
