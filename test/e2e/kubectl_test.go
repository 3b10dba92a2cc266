package e2e

import (
	"bufio"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const manifest = `apiVersion: v1
kind: Namespace
metadata:
  name: e2e
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: app-config
  namespace: e2e
data:
  color: blue
  size: large
---
apiVersion: v1
kind: Secret
metadata:
  name: app-secret
  namespace: e2e
type: Opaque
stringData:
  password: hunter2
---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: e2e
spec:
  selector:
    app: web
  ports:
  - name: http
    port: 80
    targetPort: 8080
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: e2e
  labels:
    app: web
spec:
  replicas: 2
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: web
        image: nginx:1.25
        ports:
        - containerPort: 8080
`

func wantLines(t *testing.T, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("output does not contain %q:\n%s", w, out)
		}
	}
}

// TestUserSession is one user's session against a fresh server: apply a
// manifest, read it back every way kubectl offers, change it, stop the
// server, start it again and find everything as it was left.
func TestUserSession(t *testing.T) {
	dataDir := t.TempDir()
	kc := filepath.Join(dataDir, "admin.kubeconfig")
	ports := newPorts(t)
	srv := startServer(t, dataDir, ports)

	t.Run("namespaces", func(t *testing.T) {
		header, rows := table(t, kubectl(t, kc, "get", "namespaces"))
		if diff := cmp.Diff([]string{"NAME", "STATUS", "AGE"}, header); diff != "" {
			t.Errorf("header (-want +got):\n%s", diff)
		}
		for _, ns := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
			if r := rows[ns]; len(r) < 2 || r[1] != "Active" {
				t.Errorf("namespace %s row = %v, want Active", ns, r)
			}
		}
	})

	t.Run("kubernetes service", func(t *testing.T) {
		_, rows := table(t, kubectl(t, kc, "get", "service", "kubernetes", "-n", "default"))
		if diff := cmp.Diff([]string{"kubernetes", "ClusterIP", "10.43.0.1", "<none>", "443/TCP"}, rows["kubernetes"][:5]); diff != "" {
			t.Errorf("kubernetes service row (-want +got):\n%s", diff)
		}
	})

	applied := t.Run("apply", func(t *testing.T) {
		out := kubectlStdin(t, kc, manifest, "apply", "-f", "-")
		wantLines(t, out,
			"namespace/e2e created", "configmap/app-config created", "secret/app-secret created",
			"service/web created", "deployment.apps/web created")
		out = kubectlStdin(t, kc, manifest, "apply", "-f", "-")
		wantLines(t, out, "namespace/e2e unchanged", "configmap/app-config unchanged", "deployment.apps/web unchanged")
	})
	if !applied {
		t.Fatal("apply failed; the rest of the session depends on it")
	}

	t.Run("get", func(t *testing.T) {
		header, rows := table(t, kubectl(t, kc, "get", "configmaps", "-n", "e2e"))
		if diff := cmp.Diff([]string{"NAME", "DATA", "AGE"}, header); diff != "" {
			t.Errorf("configmap header (-want +got):\n%s", diff)
		}
		if r := rows["app-config"]; len(r) != 3 || r[1] != "2" {
			t.Errorf("app-config row = %v, want DATA 2", r)
		}

		header, rows = table(t, kubectl(t, kc, "get", "secrets", "-n", "e2e"))
		if diff := cmp.Diff([]string{"NAME", "TYPE", "DATA", "AGE"}, header); diff != "" {
			t.Errorf("secret header (-want +got):\n%s", diff)
		}
		if r := rows["app-secret"]; len(r) != 4 || r[1] != "Opaque" || r[2] != "1" {
			t.Errorf("app-secret row = %v, want Opaque with 1 key", r)
		}

		header, rows = table(t, kubectl(t, kc, "get", "services", "-n", "e2e", "-o", "wide"))
		if diff := cmp.Diff([]string{"NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE", "SELECTOR"}, header); diff != "" {
			t.Errorf("service wide header (-want +got):\n%s", diff)
		}
		r := rows["web"]
		if len(r) != 7 || r[1] != "ClusterIP" || !strings.HasPrefix(r[2], "10.43.") || r[4] != "80/TCP" || r[6] != "app=web" {
			t.Errorf("web service row = %v, want ClusterIP 10.43.x.x 80/TCP app=web", r)
		}

		header, _ = table(t, kubectl(t, kc, "get", "deployments", "-n", "e2e"))
		if diff := cmp.Diff([]string{"NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"}, header); diff != "" {
			t.Errorf("deployment header (-want +got):\n%s", diff)
		}

		y := kubectl(t, kc, "get", "deployment", "web", "-n", "e2e", "-o", "yaml")
		wantLines(t, y, "apiVersion: apps/v1", "kind: Deployment", "name: web", "namespace: e2e", "replicas: 2", "image: nginx:1.25", "resourceVersion:", "uid:", "creationTimestamp:")

		got := kubectl(t, kc, "get", "secret", "app-secret", "-n", "e2e", "-o", "jsonpath={.data.password}")
		if got != "aHVudGVyMg==" {
			t.Errorf("secret data = %q, want base64 of hunter2", got)
		}
	})

	t.Run("watch", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, binary(), "kubectl", "--kubeconfig", kc, "get", "configmaps", "-n", "e2e", "-w")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cancel(); _ = cmd.Wait() }()
		lines := make(chan []string)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- strings.Fields(sc.Text())
			}
		}()
		next := func(what string) []string {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("watch ended while waiting for %s", what)
				}
				return l
			case <-ctx.Done():
				t.Fatalf("no %s from kubectl get -w", what)
			}
			return nil
		}
		if h := next("header"); len(h) == 0 || h[0] != "NAME" {
			t.Fatalf("first watch line = %v, want the header", h)
		}
		for {
			if l := next("app-config row"); len(l) > 1 && l[0] == "app-config" {
				break
			}
		}
		kubectl(t, kc, "patch", "configmap", "app-config", "-n", "e2e", "--type", "merge", "-p", `{"data":{"shape":"round"}}`)
		for {
			l := next("updated app-config row")
			if len(l) > 1 && l[0] == "app-config" {
				if l[1] != "3" {
					t.Errorf("watched row = %v, want DATA 3", l)
				}
				break
			}
		}
	})

	t.Run("describe", func(t *testing.T) {
		out := kubectl(t, kc, "describe", "configmap", "app-config", "-n", "e2e")
		wantLines(t, out, "Name:", "app-config", "Namespace:", "e2e", "Data", "color:", "blue", "shape:")
		out = kubectl(t, kc, "describe", "service", "web", "-n", "e2e")
		wantLines(t, out, "Name:", "web", "Selector:", "app=web", "Port:", "80/TCP", "TargetPort:", "8080/TCP")
	})

	t.Run("label and annotate", func(t *testing.T) {
		wantLines(t, kubectl(t, kc, "label", "configmap", "app-config", "-n", "e2e", "tier=backend"), "configmap/app-config labeled")
		_, rows := table(t, kubectl(t, kc, "get", "configmaps", "-n", "e2e", "-l", "tier=backend"))
		if _, ok := rows["app-config"]; !ok {
			t.Errorf("label selector tier=backend does not find app-config: %v", rows)
		}
		out, errOut, err := kubectlResult(kc, "", "get", "configmaps", "-n", "e2e", "-l", "tier=frontend")
		if err != nil || strings.TrimSpace(out) != "" || !strings.Contains(errOut, "No resources found in e2e namespace.") {
			t.Errorf("get -l tier=frontend: err %v, stdout %q, stderr %q; want No resources found", err, out, errOut)
		}
		wantLines(t, kubectl(t, kc, "annotate", "configmap", "app-config", "-n", "e2e", "owner=team-a"), "configmap/app-config annotated")
		if got := kubectl(t, kc, "get", "configmap", "app-config", "-n", "e2e", "-o", "jsonpath={.metadata.annotations.owner}"); got != "team-a" {
			t.Errorf("owner annotation = %q, want team-a", got)
		}
	})

	t.Run("patch", func(t *testing.T) {
		// Strategic merge: containers merge by name, so the list keeps one entry.
		wantLines(t, kubectl(t, kc, "patch", "deployment", "web", "-n", "e2e", "-p",
			`{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:1.27"}]}}}}`), "deployment.apps/web patched")
		got := kubectl(t, kc, "get", "deployment", "web", "-n", "e2e", "-o", "jsonpath={range .spec.template.spec.containers[*]}{.name}={.image}:{.ports[0].containerPort};{end}")
		if got != "web=nginx:1.27:8080;" {
			t.Errorf("containers after strategic patch = %q, want web=nginx:1.27:8080;", got)
		}
		// JSON patch.
		wantLines(t, kubectl(t, kc, "patch", "deployment", "web", "-n", "e2e", "--type", "json", "-p",
			`[{"op":"replace","path":"/spec/replicas","value":3}]`), "deployment.apps/web patched")
		if got := kubectl(t, kc, "get", "deployment", "web", "-n", "e2e", "-o", "jsonpath={.spec.replicas}"); got != "3" {
			t.Errorf("replicas after json patch = %q, want 3", got)
		}
		// Merge patch: null removes a key.
		kubectl(t, kc, "patch", "configmap", "app-config", "-n", "e2e", "--type", "merge", "-p", `{"data":{"size":null}}`)
		if got := kubectl(t, kc, "get", "configmap", "app-config", "-n", "e2e", "-o", "jsonpath={.data}"); got != `{"color":"blue","shape":"round"}` {
			t.Errorf("configmap data after merge patch = %s", got)
		}
		// A patch that does not apply is refused and changes nothing.
		_, errOut, err := kubectlResult(kc, "", "patch", "deployment", "web", "-n", "e2e", "--type", "json", "-p", `[{"op":"test","path":"/spec/replicas","value":9}]`)
		if err == nil {
			t.Errorf("failing json patch test op succeeded; stderr %q", errOut)
		}
	})

	t.Run("delete", func(t *testing.T) {
		wantLines(t, kubectl(t, kc, "delete", "secret", "app-secret", "-n", "e2e"), `secret "app-secret" deleted`)
		_, errOut, err := kubectlResult(kc, "", "get", "secret", "app-secret", "-n", "e2e")
		if err == nil || !strings.Contains(errOut, `Error from server (NotFound): secrets "app-secret" not found`) {
			t.Errorf("get deleted secret: err %v, stderr %q; want NotFound", err, errOut)
		}
	})

	if t.Failed() {
		return
	}
	srv.stop(t)
	startServer(t, dataDir, ports)

	t.Run("after restart", func(t *testing.T) {
		got := kubectl(t, kc, "get", "configmap", "app-config", "-n", "e2e", "-o",
			`jsonpath={.data.color},{.data.shape},{.metadata.labels.tier},{.metadata.annotations.owner}`)
		if got != "blue,round,backend,team-a" {
			t.Errorf("configmap after restart = %q, want blue,round,backend,team-a", got)
		}
		got = kubectl(t, kc, "get", "deployment", "web", "-n", "e2e", "-o", `jsonpath={.spec.replicas},{.spec.template.spec.containers[0].image}`)
		if got != "3,nginx:1.27" {
			t.Errorf("deployment after restart = %q, want 3,nginx:1.27", got)
		}
		_, rows := table(t, kubectl(t, kc, "get", "services", "-n", "e2e"))
		if _, ok := rows["web"]; !ok {
			t.Errorf("service web missing after restart: %v", rows)
		}
		_, rows = table(t, kubectl(t, kc, "get", "namespaces"))
		if _, ok := rows["e2e"]; !ok {
			t.Errorf("namespace e2e missing after restart: %v", rows)
		}
		if _, errOut, err := kubectlResult(kc, "", "get", "secret", "app-secret", "-n", "e2e"); err == nil {
			t.Errorf("deleted secret is back after restart (stderr %q)", errOut)
		}
	})
}

// TestServerFlags checks what a user sees before any server runs.
func TestServerFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "bad bind address", args: []string{"server", "--bind-address", "nowhere"}, wantErr: `--bind-address "nowhere" is not an IP address`},
		{name: "unknown flag", args: []string{"server", "--no-such-flag"}, wantErr: "unknown flag: --no-such-flag"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := exec.Command(binary(), tc.args...).CombinedOutput()
			if err == nil {
				t.Fatalf("skiff %v succeeded", tc.args)
			}
			if !strings.Contains(string(out), tc.wantErr) {
				t.Errorf("skiff %v output %q, want it to contain %q", tc.args, out, tc.wantErr)
			}
		})
	}
	out, err := exec.Command(binary(), "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	wantLines(t, string(out), "Skiff version:", "Kubernetes API: v1.")

	// The embedded kubectl reports a real release, not a placeholder.
	out, err = exec.Command(binary(), "kubectl", "version", "--client").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(out), "Client Version: v1.") || strings.Contains(string(out), "master") {
		t.Errorf("skiff kubectl version --client = %q, want Client Version: v1.x.y", out)
	}
}
