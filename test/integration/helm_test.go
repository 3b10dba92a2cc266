package integration

import (
	"fmt"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/release"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// writeKubeconfig writes an admin kubeconfig for cfg into dir and returns
// its path, for tools that read one (Helm's RESTClientGetter, kubectl).
func writeKubeconfig(t testing.TB, cfg *rest.Config, dir string) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["skiff"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.TLSClientConfig.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.TLSClientConfig.CertData, ClientKeyData: cfg.TLSClientConfig.KeyData}
	kc.Contexts["skiff"] = &clientcmdapi.Context{Cluster: "skiff", AuthInfo: "admin"}
	kc.CurrentContext = "skiff"
	path := filepath.Join(dir, "helm.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatalf("write kubeconfig: %v", err)
	}
	return path
}

// helmConfig is an action.Configuration for namespace ns that reaches the
// cluster through a kubeconfig file, as the helm CLI does, and keeps
// releases in Secrets.
func helmConfig(t testing.TB, c *cluster, ns string) *action.Configuration {
	t.Helper()
	dir := t.TempDir()
	kubeconfig := writeKubeconfig(t, c.Config, dir)
	cacheDir := filepath.Join(dir, "cache")
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &kubeconfig
	flags.Namespace = &ns
	flags.CacheDir = &cacheDir
	cfg := new(action.Configuration)
	if err := cfg.Init(flags, ns, "secret", func(format string, v ...any) { t.Logf("helm: "+format, v...) }); err != nil {
		t.Fatalf("helm init: %v", err)
	}
	return cfg
}

// TestHelmChartLifecycle installs, upgrades and uninstalls the chart in
// testdata/chart through the Helm SDK: every object appears with Helm's
// ownership metadata, the upgrade's new values reach the Deployment, the
// release history is kept in Secrets, and uninstall leaves nothing.
func TestHelmChartLifecycle(t *testing.T) {
	c := startCluster(t)
	cs := c.Clientset()
	ns := newNamespace(t, cs)
	ctx := testCtx(t, 90*time.Second)
	cfg := helmConfig(t, c, ns)

	chrt, err := loader.Load(filepath.Join("testdata", "chart"))
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}

	releaseSecrets := func(t *testing.T) []string {
		t.Helper()
		list, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=demo"})
		if err != nil {
			t.Fatalf("list release secrets: %v", err)
		}
		var names []string
		for _, s := range list.Items {
			names = append(names, fmt.Sprintf("%s status=%s", s.Name, s.Labels["status"]))
		}
		sort.Strings(names)
		return names
	}

	installed := t.Run("install", func(t *testing.T) {
		install := action.NewInstall(cfg)
		install.ReleaseName = "demo"
		install.Namespace = ns
		install.Timeout = 30 * time.Second
		rel, err := install.RunWithContext(ctx, chrt, nil)
		if err != nil {
			t.Fatalf("install: %v", err)
		}
		if rel.Info.Status != release.StatusDeployed || rel.Version != 1 {
			t.Errorf("release status %s version %d, want deployed 1", rel.Info.Status, rel.Version)
		}
		dep, err := cs.AppsV1().Deployments(ns).Get(ctx, "demo-web", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get deployment: %v", err)
		}
		if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 1 {
			t.Errorf("deployment replicas = %v, want 1", dep.Spec.Replicas)
		}
		if got := dep.Spec.Template.Spec.Containers[0].Image; got != "nginx:1.27" {
			t.Errorf("image = %q, want nginx:1.27", got)
		}
		wantMeta := map[string]string{
			"label app.kubernetes.io/managed-by":        "Helm",
			"annotation meta.helm.sh/release-name":      "demo",
			"annotation meta.helm.sh/release-namespace": ns,
		}
		gotMeta := map[string]string{
			"label app.kubernetes.io/managed-by":        dep.Labels["app.kubernetes.io/managed-by"],
			"annotation meta.helm.sh/release-name":      dep.Annotations["meta.helm.sh/release-name"],
			"annotation meta.helm.sh/release-namespace": dep.Annotations["meta.helm.sh/release-namespace"],
		}
		if diff := cmp.Diff(wantMeta, gotMeta); diff != "" {
			t.Errorf("deployment ownership metadata (-want +got):\n%s", diff)
		}
		svc, err := cs.CoreV1().Services(ns).Get(ctx, "demo-web", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get service: %v", err)
		}
		if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 80 || svc.Spec.Ports[0].TargetPort.String() != "http" || svc.Spec.ClusterIP == "" {
			t.Errorf("service spec = %+v, want port 80 → http with a cluster IP", svc.Spec)
		}
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "demo-config", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get configmap: %v", err)
		}
		if cm.Data["greeting"] != "hello" {
			t.Errorf("configmap data = %v, want greeting=hello", cm.Data)
		}
		if diff := cmp.Diff([]string{"sh.helm.release.v1.demo.v1 status=deployed"}, releaseSecrets(t)); diff != "" {
			t.Errorf("release secrets (-want +got):\n%s", diff)
		}
	})
	if !installed {
		t.Fatal("install failed; upgrade and uninstall depend on it")
	}

	t.Run("upgrade", func(t *testing.T) {
		upgrade := action.NewUpgrade(cfg)
		upgrade.Namespace = ns
		upgrade.Timeout = 30 * time.Second
		rel, err := upgrade.RunWithContext(ctx, "demo", chrt, map[string]any{"replicaCount": 3, "greeting": "hi"})
		if err != nil {
			t.Fatalf("upgrade: %v", err)
		}
		if rel.Info.Status != release.StatusDeployed || rel.Version != 2 {
			t.Errorf("release status %s version %d, want deployed 2", rel.Info.Status, rel.Version)
		}
		dep, err := cs.AppsV1().Deployments(ns).Get(ctx, "demo-web", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get deployment: %v", err)
		}
		if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 3 {
			t.Errorf("deployment replicas after upgrade = %v, want 3", dep.Spec.Replicas)
		}
		if dep.Generation < 2 {
			t.Errorf("deployment generation = %d, want it bumped by the spec change", dep.Generation)
		}
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "demo-config", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get configmap: %v", err)
		}
		if cm.Data["greeting"] != "hi" {
			t.Errorf("configmap data after upgrade = %v, want greeting=hi", cm.Data)
		}
		want := []string{"sh.helm.release.v1.demo.v1 status=superseded", "sh.helm.release.v1.demo.v2 status=deployed"}
		if diff := cmp.Diff(want, releaseSecrets(t)); diff != "" {
			t.Errorf("release secrets (-want +got):\n%s", diff)
		}
		hist, err := action.NewHistory(cfg).Run("demo")
		if err != nil {
			t.Fatalf("history: %v", err)
		}
		if len(hist) != 2 {
			t.Errorf("history has %d revisions, want 2", len(hist))
		}
	})

	t.Run("uninstall", func(t *testing.T) {
		uninstall := action.NewUninstall(cfg)
		uninstall.Timeout = 30 * time.Second
		if _, err := uninstall.Run("demo"); err != nil {
			t.Fatalf("uninstall: %v", err)
		}
		checks := map[string]func() error{
			"deployment demo-web": func() error {
				_, err := cs.AppsV1().Deployments(ns).Get(ctx, "demo-web", metav1.GetOptions{})
				return err
			},
			"service demo-web": func() error {
				_, err := cs.CoreV1().Services(ns).Get(ctx, "demo-web", metav1.GetOptions{})
				return err
			},
			"configmap demo-config": func() error {
				_, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "demo-config", metav1.GetOptions{})
				return err
			},
		}
		for what, get := range checks {
			eventually(t, 10*time.Second, what+" deleted", func() (bool, error) {
				err := get()
				return apierrors.IsNotFound(err), err
			})
		}
		if got := releaseSecrets(t); len(got) != 0 {
			t.Errorf("release secrets left after uninstall: %v", got)
		}
		if _, err := action.NewGet(cfg).Run("demo"); err == nil {
			t.Errorf("helm get demo after uninstall succeeded, want release not found")
		}
	})
}
