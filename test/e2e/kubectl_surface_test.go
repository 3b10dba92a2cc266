package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// surfaceNS is the namespace the surface test works in.
const surfaceNS = "surface"

// kubectlFailure runs kubectl, expects it to fail, and returns its output
// and exit code.
func kubectlFailure(t *testing.T, kubeconfig, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	out, errOut, err := kubectlResult(kubeconfig, stdin, args...)
	if err == nil {
		t.Fatalf("kubectl %s succeeded, want an error\nstdout:\n%s", strings.Join(args, " "), out)
	}
	code = -1
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	return out, errOut, code
}

// columns parses kubectl's aligned table output by the start offset of
// each header, so empty cells (for example a resource without short
// names) stay in their column.
func columns(t *testing.T, out string) []map[string]string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) == 0 {
		t.Fatalf("no table in %q", out)
	}
	type col struct {
		name  string
		start int
	}
	var cols []col
	for _, m := range regexp.MustCompile(`\S+`).FindAllStringIndex(lines[0], -1) {
		cols = append(cols, col{name: lines[0][m[0]:m[1]], start: m[0]})
	}
	var rows []map[string]string
	for _, l := range lines[1:] {
		row := map[string]string{}
		for i, c := range cols {
			end := len(l)
			if i+1 < len(cols) && cols[i+1].start < end {
				end = cols[i+1].start
			}
			if c.start < end {
				row[c.name] = strings.TrimSpace(l[c.start:end])
			} else {
				row[c.name] = ""
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// rawResult is one raw HTTP exchange with the API server.
type rawResult struct {
	code    int
	body    string
	elapsed time.Duration
}

// rawAPI sends one request with the admin kubeconfig's credentials.
func rawAPI(t *testing.T, kubeconfig, method, path, contentType, body string) rawResult {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("kubeconfig: %v", err)
	}
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatalf("http client: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(cfg.Host, "/")+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return rawResult{code: resp.StatusCode, body: string(b), elapsed: time.Since(start)}
}

// apiResource is one row of `kubectl api-resources -o wide`.
type apiResource struct {
	ShortNames, Namespaced, Kind, Verbs, Categories string
}

// coreAPIResources is the part of api-resources every user relies on,
// keyed by "NAME APIVERSION"; each row must be exactly this.
var coreAPIResources = map[string]apiResource{
	"pods v1":                            {"po", "true", "Pod", "create,delete,deletecollection,get,list,patch,update,watch", "all"},
	"services v1":                        {"svc", "true", "Service", "create,delete,deletecollection,get,list,patch,update,watch", "all"},
	"configmaps v1":                      {"cm", "true", "ConfigMap", "create,delete,deletecollection,get,list,patch,update,watch", ""},
	"secrets v1":                         {"", "true", "Secret", "create,delete,deletecollection,get,list,patch,update,watch", ""},
	"namespaces v1":                      {"ns", "false", "Namespace", "create,delete,get,list,patch,update,watch", ""},
	"nodes v1":                           {"no", "false", "Node", "create,delete,deletecollection,get,list,patch,update,watch", ""},
	"endpoints v1":                       {"ep", "true", "Endpoints", "create,delete,deletecollection,get,list,patch,update,watch", ""},
	"events v1":                          {"ev", "true", "Event", "create,delete,deletecollection,get,list,patch,update,watch", ""},
	"serviceaccounts v1":                 {"sa", "true", "ServiceAccount", "create,delete,deletecollection,get,list,patch,update,watch", ""},
	"deployments apps/v1":                {"deploy", "true", "Deployment", "create,delete,deletecollection,get,list,patch,update,watch", "all"},
	"replicasets apps/v1":                {"rs", "true", "ReplicaSet", "create,delete,deletecollection,get,list,patch,update,watch", "all"},
	"leases coordination.k8s.io/v1":      {"", "true", "Lease", "create,delete,deletecollection,get,list,patch,update,watch", ""},
	"endpointslices discovery.k8s.io/v1": {"", "true", "EndpointSlice", "create,delete,deletecollection,get,list,patch,update,watch", ""},
	"events events.k8s.io/v1":            {"ev", "true", "Event", "create,delete,deletecollection,get,list,patch,update,watch", ""},
}

const allVerbs = "create,delete,deletecollection,get,list,patch,update,watch"

// issueAPIResources are the resources issue #3 adds; each must be served
// with exactly this row.
var issueAPIResources = map[string]apiResource{
	"daemonsets apps/v1":                                              {"ds", "true", "DaemonSet", allVerbs, "all"},
	"statefulsets apps/v1":                                            {"sts", "true", "StatefulSet", allVerbs, "all"},
	"controllerrevisions apps/v1":                                     {"", "true", "ControllerRevision", allVerbs, ""},
	"jobs batch/v1":                                                   {"", "true", "Job", allVerbs, "all"},
	"cronjobs batch/v1":                                               {"cj", "true", "CronJob", allVerbs, "all"},
	"horizontalpodautoscalers autoscaling/v2":                         {"hpa", "true", "HorizontalPodAutoscaler", allVerbs, "all"},
	"poddisruptionbudgets policy/v1":                                  {"pdb", "true", "PodDisruptionBudget", allVerbs, ""},
	"persistentvolumes v1":                                            {"pv", "false", "PersistentVolume", allVerbs, ""},
	"persistentvolumeclaims v1":                                       {"pvc", "true", "PersistentVolumeClaim", allVerbs, ""},
	"limitranges v1":                                                  {"limits", "true", "LimitRange", allVerbs, ""},
	"resourcequotas v1":                                               {"quota", "true", "ResourceQuota", allVerbs, ""},
	"podtemplates v1":                                                 {"", "true", "PodTemplate", allVerbs, ""},
	"replicationcontrollers v1":                                       {"rc", "true", "ReplicationController", allVerbs, "all"},
	"componentstatuses v1":                                            {"cs", "false", "ComponentStatus", "get,list", ""},
	"storageclasses storage.k8s.io/v1":                                {"sc", "false", "StorageClass", allVerbs, ""},
	"csinodes storage.k8s.io/v1":                                      {"", "false", "CSINode", allVerbs, ""},
	"csidrivers storage.k8s.io/v1":                                    {"", "false", "CSIDriver", allVerbs, ""},
	"volumeattachments storage.k8s.io/v1":                             {"", "false", "VolumeAttachment", allVerbs, ""},
	"csistoragecapacities storage.k8s.io/v1":                          {"", "true", "CSIStorageCapacity", allVerbs, ""},
	"networkpolicies networking.k8s.io/v1":                            {"netpol", "true", "NetworkPolicy", allVerbs, ""},
	"ingresses networking.k8s.io/v1":                                  {"ing", "true", "Ingress", allVerbs, ""},
	"ingressclasses networking.k8s.io/v1":                             {"", "false", "IngressClass", allVerbs, ""},
	"priorityclasses scheduling.k8s.io/v1":                            {"pc", "false", "PriorityClass", allVerbs, ""},
	"runtimeclasses node.k8s.io/v1":                                   {"", "false", "RuntimeClass", allVerbs, ""},
	"certificatesigningrequests certificates.k8s.io/v1":               {"csr", "false", "CertificateSigningRequest", allVerbs, ""},
	"roles rbac.authorization.k8s.io/v1":                              {"", "true", "Role", allVerbs, ""},
	"rolebindings rbac.authorization.k8s.io/v1":                       {"", "true", "RoleBinding", allVerbs, ""},
	"clusterroles rbac.authorization.k8s.io/v1":                       {"", "false", "ClusterRole", allVerbs, ""},
	"clusterrolebindings rbac.authorization.k8s.io/v1":                {"", "false", "ClusterRoleBinding", allVerbs, ""},
	"validatingwebhookconfigurations admissionregistration.k8s.io/v1": {"", "false", "ValidatingWebhookConfiguration", allVerbs, "api-extensions"},
	"mutatingwebhookconfigurations admissionregistration.k8s.io/v1":   {"", "false", "MutatingWebhookConfiguration", allVerbs, "api-extensions"},
	"selfsubjectaccessreviews authorization.k8s.io/v1":                {"", "false", "SelfSubjectAccessReview", "create", ""},
	"selfsubjectrulesreviews authorization.k8s.io/v1":                 {"", "false", "SelfSubjectRulesReview", "create", ""},
}

// coreAPIVersions must all be listed by api-versions.
var coreAPIVersions = []string{"v1", "apps/v1", "coordination.k8s.io/v1", "discovery.k8s.io/v1", "events.k8s.io/v1"}

// TestKubectlSurface drives every everyday kubectl command against one
// server and checks each by what it prints.
func TestKubectlSurface(t *testing.T) {
	dataDir := t.TempDir()
	kc := filepath.Join(dataDir, "admin.kubeconfig")
	startServer(t, dataDir, newPorts(t))
	kubectl(t, kc, "create", "namespace", surfaceNS)

	// k runs kubectl in the surface namespace.
	k := func(t *testing.T, args ...string) string {
		t.Helper()
		return kubectl(t, kc, append([]string{"-n", surfaceNS}, args...)...)
	}
	kIn := func(t *testing.T, stdin string, args ...string) string {
		t.Helper()
		return kubectlStdin(t, kc, stdin, append([]string{"-n", surfaceNS}, args...)...)
	}
	kFail := func(t *testing.T, stdin string, args ...string) (string, string, int) {
		t.Helper()
		return kubectlFailure(t, kc, stdin, append([]string{"-n", surfaceNS}, args...)...)
	}

	t.Run("api-resources", func(t *testing.T) {
		rows := columns(t, kubectl(t, kc, "api-resources", "-o", "wide"))
		got := map[string]apiResource{}
		var others []string
		for _, r := range rows {
			key := r["NAME"] + " " + r["APIVERSION"]
			res := apiResource{r["SHORTNAMES"], r["NAMESPACED"], r["KIND"], r["VERBS"], r["CATEGORIES"]}
			_, checked := issueAPIResources[key]
			if _, core := coreAPIResources[key]; core {
				got[key] = res
			} else if !checked {
				others = append(others, fmt.Sprintf("%s (%s) short=%q verbs=%s", key, res.Kind, res.ShortNames, res.Verbs))
			}
		}
		if diff := cmp.Diff(coreAPIResources, got); diff != "" {
			t.Errorf("core api-resources rows (-want +got):\n%s", diff)
		}
		t.Logf("served resources outside both lists (%d):\n%s", len(others), strings.Join(others, "\n"))

		var missing []string
		for key, want := range issueAPIResources {
			row, ok := servedRow(rows, key)
			if !ok {
				missing = append(missing, key)
				continue
			}
			if diff := cmp.Diff(want, row); diff != "" {
				t.Errorf("api-resources row %s (-want +got):\n%s", key, diff)
			}
		}
		if len(missing) > 0 {
			sort.Strings(missing)
			t.Errorf("api-resources lacks %d of the issue #3 resources: %v", len(missing), missing)
		}

		// Filters: by group, namespaced, and the names-only form kubectl scripts use.
		names := strings.Fields(kubectl(t, kc, "api-resources", "--api-group=apps", "-o", "name"))
		for _, want := range []string{"deployments.apps", "replicasets.apps"} {
			if !contains(names, want) {
				t.Errorf("api-resources --api-group=apps -o name = %v, lacks %s", names, want)
			}
		}
		for _, n := range names {
			if !strings.HasSuffix(n, ".apps") {
				t.Errorf("api-resources --api-group=apps lists %s", n)
			}
		}
		clusterScoped := strings.Fields(kubectl(t, kc, "api-resources", "--namespaced=false", "-o", "name"))
		if !contains(clusterScoped, "namespaces") || !contains(clusterScoped, "nodes") || contains(clusterScoped, "pods") {
			t.Errorf("api-resources --namespaced=false = %v, want namespaces and nodes but not pods", clusterScoped)
		}
	})

	t.Run("api-versions", func(t *testing.T) {
		versions := strings.Fields(kubectl(t, kc, "api-versions"))
		if !sort.StringsAreSorted(versions) {
			t.Errorf("api-versions not sorted: %v", versions)
		}
		for _, v := range coreAPIVersions {
			if !contains(versions, v) {
				t.Errorf("api-versions %v lacks %s", versions, v)
			}
		}
		t.Logf("api-versions: %v", versions)
		// Every group version that api-resources shows is listed here too.
		for _, r := range columns(t, kubectl(t, kc, "api-resources")) {
			if !contains(versions, r["APIVERSION"]) {
				t.Errorf("api-resources shows %s in %s, which api-versions does not list", r["NAME"], r["APIVERSION"])
			}
		}
	})

	t.Run("explain", func(t *testing.T) {
		out := kubectl(t, kc, "explain", "pod.spec.containers")
		for _, re := range []string{
			`(?m)^KIND:\s+Pod$`,
			`(?m)^VERSION:\s+v1$`,
			`(?m)^FIELD:\s+containers <\[\]Container>$`,
			`(?m)^DESCRIPTION:$`,
			`(?m)^FIELDS:$`,
			`(?m)^\s+name\s+<string> -required-$`,
			`(?m)^\s+image\s+<string>$`,
			`(?m)^\s+ports\s+<\[\]ContainerPort>$`,
			`(?m)^\s+resources\s+<ResourceRequirements>$`,
		} {
			if !regexp.MustCompile(re).MatchString(out) {
				t.Errorf("explain pod.spec.containers does not match %s:\n%.1500s", re, out)
			}
		}
		out = kubectl(t, kc, "explain", "deployment.spec.replicas")
		for _, re := range []string{`(?m)^GROUP:\s+apps$`, `(?m)^KIND:\s+Deployment$`, `(?m)^FIELD:\s+replicas <integer>$`} {
			if !regexp.MustCompile(re).MatchString(out) {
				t.Errorf("explain deployment.spec.replicas does not match %s:\n%s", re, out)
			}
		}
		if _, errOut, _ := kubectlFailure(t, kc, "", "explain", "pod.spec.nosuchfield"); !strings.Contains(errOut, "nosuchfield") {
			t.Errorf("explain of a missing field: stderr %q, want it to name the field", errOut)
		}
	})

	t.Run("apply three-way merge", func(t *testing.T) {
		v1 := `apiVersion: v1
kind: ConfigMap
metadata:
  name: threeway
  labels:
    owner: manifest
    stale: remove-me
data:
  a: "1"
  b: "2"
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: threeway
spec:
  replicas: 1
  selector:
    matchLabels: {app: threeway}
  template:
    metadata:
      labels: {app: threeway}
    spec:
      containers:
      - name: app
        image: nginx:1.25
        env:
        - {name: KEEP, value: "yes"}
        - {name: DROP, value: "yes"}
`
		wantLines(t, kIn(t, v1, "apply", "-f", "-"), "configmap/threeway created", "deployment.apps/threeway created")
		if got := k(t, "get", "configmap", "threeway", "-o", `jsonpath={.metadata.annotations.kubectl\.kubernetes\.io/last-applied-configuration}`); !strings.Contains(got, `"b":"2"`) {
			t.Errorf("last-applied-configuration = %q, want the applied manifest", got)
		}
		// Someone else changes fields the manifest does not mention.
		k(t, "patch", "configmap", "threeway", "--type=merge", "-p", `{"metadata":{"labels":{"patched-by":"someone"}},"data":{"c":"3"}}`)
		k(t, "patch", "deployment", "threeway", "-p", `{"spec":{"template":{"metadata":{"annotations":{"injected":"yes"}}}}}`)

		v2 := strings.NewReplacer(
			"    stale: remove-me\n", "",
			`  b: "2"`+"\n", "",
			`  a: "1"`, `  a: "10"`,
			`        - {name: DROP, value: "yes"}`+"\n", "",
			"image: nginx:1.25", "image: nginx:1.27",
		).Replace(v1)
		wantLines(t, kIn(t, v2, "apply", "-f", "-"), "configmap/threeway configured", "deployment.apps/threeway configured")

		got := k(t, "get", "configmap", "threeway", "-o", `jsonpath={.data} {.metadata.labels}`)
		if want := `{"a":"10","c":"3"} {"owner":"manifest","patched-by":"someone"}`; got != want {
			t.Errorf("configmap after second apply = %s, want %s (b and stale removed, c and patched-by kept)", got, want)
		}
		got = k(t, "get", "deployment", "threeway", "-o",
			`jsonpath={.spec.template.spec.containers[0].image} {range .spec.template.spec.containers[0].env[*]}{.name},{end} {.spec.template.metadata.annotations.injected}`)
		if want := "nginx:1.27 KEEP, yes"; got != want {
			t.Errorf("deployment after second apply = %q, want %q", got, want)
		}
		wantLines(t, kIn(t, v2, "apply", "-f", "-"), "configmap/threeway unchanged", "deployment.apps/threeway unchanged")
	})

	t.Run("apply server-side", func(t *testing.T) {
		cm := func(x string) string {
			return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  x: \"" + x + "\"\n  y: \"keep\"\n"
		}
		wantLines(t, kIn(t, cm("1"), "apply", "--server-side", "-f", "-"), "configmap/ssa serverside-applied")
		wantLines(t, kIn(t, cm("1"), "apply", "--server-side", "-f", "-"), "configmap/ssa serverside-applied")
		if got := k(t, "get", "configmap", "ssa", "-o", `jsonpath={range .metadata.managedFields[*]}{.manager}:{.operation};{end}`); got != "kubectl:Apply;" {
			t.Errorf("managedFields after two applies = %q, want kubectl:Apply;", got)
		}
		_, errOut, _ := kFail(t, cm("2"), "apply", "--server-side", "--field-manager=other", "-f", "-")
		for _, want := range []string{"conflict", `"kubectl"`, ".data.x"} {
			if !strings.Contains(errOut, want) {
				t.Errorf("conflicting apply stderr does not contain %q:\n%s", want, errOut)
			}
		}
		if strings.Contains(errOut, ".data.y") {
			t.Errorf("conflict names .data.y, whose value did not change:\n%s", errOut)
		}
		if got := k(t, "get", "configmap", "ssa", "-o", "jsonpath={.data.x}"); got != "1" {
			t.Errorf("data.x after refused apply = %q, want 1", got)
		}
		wantLines(t, kIn(t, cm("2"), "apply", "--server-side", "--field-manager=other", "--force-conflicts", "-f", "-"), "configmap/ssa serverside-applied")
		got := k(t, "get", "configmap", "ssa", "-o", `jsonpath={.data.x} {range .metadata.managedFields[*]}{.manager}:{.operation};{end}`)
		if got != "2 kubectl:Apply;other:Apply;" {
			t.Errorf("after forced apply = %q, want x=2 with kubectl (still owning y) and other", got)
		}
	})

	t.Run("diff", func(t *testing.T) {
		cm := func(v string) string {
			return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: differ\ndata:\n  v: \"" + v + "\"\n"
		}
		kIn(t, cm("old"), "apply", "-f", "-")
		out, errOut, code := kFail(t, cm("new"), "diff", "-f", "-")
		if code != 1 {
			t.Errorf("diff with a change exited %d, want 1 (stderr %q)", code, errOut)
		}
		wantLines(t, out, "-  v: old", "+  v: new")
		out = kIn(t, cm("old"), "diff", "-f", "-")
		if strings.TrimSpace(out) != "" {
			t.Errorf("diff without a change printed:\n%s", out)
		}
		if got := k(t, "get", "configmap", "differ", "-o", "jsonpath={.data.v}"); got != "old" {
			t.Errorf("diff changed the object: v = %q", got)
		}
	})

	t.Run("create", func(t *testing.T) {
		wantLines(t, k(t, "create", "deployment", "web", "--image=nginx:1.27", "--replicas=2"), "deployment.apps/web created")
		wantLines(t, k(t, "create", "service", "clusterip", "web", "--tcp=80:8080"), "service/web created")
		got := k(t, "get", "deployment", "web", "-o", `jsonpath={.spec.replicas} {.spec.selector.matchLabels.app} {.spec.template.spec.containers[0].name}={.spec.template.spec.containers[0].image}`)
		if got != "2 web nginx=nginx:1.27" {
			t.Errorf("created deployment = %q", got)
		}

		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "app.properties"), []byte("color=blue\nsize=large\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "motd.txt"), []byte("hello"), 0o644); err != nil {
			t.Fatal(err)
		}
		wantLines(t, k(t, "create", "configmap", "fromfile", "--from-file="+filepath.Join(dir, "app.properties"), "--from-file=greeting="+filepath.Join(dir, "motd.txt")),
			"configmap/fromfile created")
		got = k(t, "get", "configmap", "fromfile", "-o", `jsonpath={.data}`)
		if want := `{"app.properties":"color=blue\nsize=large\n","greeting":"hello"}`; got != want {
			t.Errorf("configmap from files = %s, want %s", got, want)
		}

		wantLines(t, k(t, "create", "secret", "generic", "creds", "--from-literal=user=admin", "--from-literal=pass=s3cr3t"), "secret/creds created")
		got = k(t, "get", "secret", "creds", "-o", `jsonpath={.type} {.data.user} {.data.pass}`)
		want := "Opaque " + base64.StdEncoding.EncodeToString([]byte("admin")) + " " + base64.StdEncoding.EncodeToString([]byte("s3cr3t"))
		if got != want {
			t.Errorf("secret = %q, want %q", got, want)
		}
		_, errOut, _ := kFail(t, "", "create", "secret", "generic", "creds", "--from-literal=user=x")
		if !strings.Contains(errOut, `secrets "creds" already exists`) {
			t.Errorf("second create: stderr %q, want AlreadyExists", errOut)
		}
	})

	t.Run("get", func(t *testing.T) {
		out := k(t, "get", "all")
		wantLines(t, out, "service/web", "deployment.apps/web", "deployment.apps/threeway")
		for _, notAll := range []string{"configmap/", "secret/"} {
			if strings.Contains(out, notAll) {
				t.Errorf("get all lists %s, which is not in the all category:\n%s", notAll, out)
			}
		}

		header, rows := table(t, k(t, "get", "deployments", "-o", "custom-columns=NAME:.metadata.name,IMAGE:.spec.template.spec.containers[0].image"))
		if diff := cmp.Diff([]string{"NAME", "IMAGE"}, header); diff != "" {
			t.Errorf("custom-columns header (-want +got):\n%s", diff)
		}
		gotRows := map[string]string{}
		for name, r := range rows {
			gotRows[name] = strings.Join(r[1:], " ")
		}
		if diff := cmp.Diff(map[string]string{"web": "nginx:1.27", "threeway": "nginx:1.27"}, gotRows); diff != "" {
			t.Errorf("custom-columns rows (-want +got):\n%s", diff)
		}

		got := k(t, "get", "deployments", "-o", `jsonpath={range .items[*]}{.metadata.name}:{.spec.replicas};{end}`)
		if got != "threeway:1;web:2;" {
			t.Errorf("jsonpath over the list = %q, want threeway:1;web:2;", got)
		}
		got = k(t, "get", "configmap", "threeway", "-o", `jsonpath={.data.a}`)
		if got != "10" {
			t.Errorf("jsonpath on one object = %q, want 10", got)
		}
	})

	t.Run("patch", func(t *testing.T) {
		wantLines(t, k(t, "patch", "deployment", "web", "--type=strategic", "-p",
			`{"spec":{"template":{"spec":{"containers":[{"name":"nginx","env":[{"name":"MODE","value":"prod"}]}]}}}}`), "deployment.apps/web patched")
		got := k(t, "get", "deployment", "web", "-o", `jsonpath={range .spec.template.spec.containers[*]}{.name}:{.image}:{.env[0].name};{end}`)
		if got != "nginx:nginx:1.27:MODE;" {
			t.Errorf("containers after strategic patch = %q, want one merged container nginx:nginx:1.27:MODE;", got)
		}
		wantLines(t, k(t, "patch", "deployment", "web", "--type=merge", "-p", `{"metadata":{"labels":{"tier":"front"}}}`), "deployment.apps/web patched")
		wantLines(t, k(t, "patch", "deployment", "web", "--type=json", "-p",
			`[{"op":"test","path":"/spec/replicas","value":2},{"op":"replace","path":"/spec/replicas","value":3}]`), "deployment.apps/web patched")
		got = k(t, "get", "deployment", "web", "-o", `jsonpath={.metadata.labels.tier} {.spec.replicas}`)
		if got != "front 3" {
			t.Errorf("after merge and json patches = %q, want front 3", got)
		}
		// A patch that changes nothing says so.
		wantLines(t, k(t, "patch", "deployment", "web", "--type=merge", "-p", `{"metadata":{"labels":{"tier":"front"}}}`), "deployment.apps/web patched (no change)")
	})

	t.Run("replace", func(t *testing.T) {
		k(t, "create", "configmap", "replaced", "--from-literal=old=1")
		live := k(t, "get", "configmap", "replaced", "-o", "yaml")
		edited := strings.Replace(live, `old: "1"`, `new: "2"`, 1)
		if edited == live {
			t.Fatalf("could not edit live object:\n%s", live)
		}
		wantLines(t, kIn(t, edited, "replace", "-f", "-"), "configmap/replaced replaced")
		if got := k(t, "get", "configmap", "replaced", "-o", "jsonpath={.data}"); got != `{"new":"2"}` {
			t.Errorf("data after replace = %s, want only new=2", got)
		}
		// The edited copy now carries a stale resourceVersion.
		_, errOut, _ := kFail(t, strings.Replace(edited, `new: "2"`, `new: "3"`, 1), "replace", "-f", "-")
		if !strings.Contains(errOut, "Conflict") || !strings.Contains(errOut, "the object has been modified") {
			t.Errorf("replace with a stale resourceVersion: stderr %q, want Conflict", errOut)
		}
		// Without a resourceVersion, replace is unconditional.
		manifest := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: replaced\ndata:\n  final: \"yes\"\n"
		wantLines(t, kIn(t, manifest, "replace", "-f", "-"), "configmap/replaced replaced")
		if got := k(t, "get", "configmap", "replaced", "-o", "jsonpath={.data}"); got != `{"final":"yes"}` {
			t.Errorf("data after unconditional replace = %s", got)
		}
	})

	t.Run("scale", func(t *testing.T) {
		wantLines(t, k(t, "scale", "deployment", "web", "--replicas=5"), "deployment.apps/web scaled")
		if got := k(t, "get", "deployment", "web", "-o", "jsonpath={.spec.replicas}"); got != "5" {
			t.Errorf("replicas after scale = %q, want 5", got)
		}
		_, errOut, _ := kFail(t, "", "scale", "deployment", "web", "--current-replicas=2", "--replicas=1")
		if !strings.Contains(errOut, "Expected replicas to be 2, was 5") {
			t.Errorf("scale with a wrong --current-replicas: stderr %q, want the precondition error", errOut)
		}
	})

	t.Run("label", func(t *testing.T) {
		wantLines(t, k(t, "label", "configmap", "fromfile", "tier=a"), "configmap/fromfile labeled")
		_, errOut, _ := kFail(t, "", "label", "configmap", "fromfile", "tier=b")
		if !strings.Contains(errOut, "already has a value (a)") {
			t.Errorf("label without --overwrite: stderr %q, want already has a value (a)", errOut)
		}
		wantLines(t, k(t, "label", "configmap", "fromfile", "tier=b", "--overwrite"), "configmap/fromfile labeled")
		if got := k(t, "get", "configmap", "fromfile", "-o", "jsonpath={.metadata.labels.tier}"); got != "b" {
			t.Errorf("label after --overwrite = %q, want b", got)
		}
		wantLines(t, k(t, "label", "configmap", "fromfile", "tier-"), "configmap/fromfile unlabeled")
	})

	t.Run("delete -l", func(t *testing.T) {
		for _, n := range []string{"doomed-1", "doomed-2", "doomed-3", "spared"} {
			k(t, "create", "configmap", n)
		}
		k(t, "label", "configmap", "doomed-1", "doomed-2", "doomed-3", "fate=doomed")
		out := k(t, "delete", "configmap", "-l", "fate=doomed")
		wantLines(t, out, `configmap "doomed-1" deleted`, `configmap "doomed-2" deleted`, `configmap "doomed-3" deleted`)
		names := k(t, "get", "configmaps", "-o", `jsonpath={range .items[*]}{.metadata.name} {end}`)
		if strings.Contains(names, "doomed") || !strings.Contains(names, "spared") {
			t.Errorf("configmaps after delete -l = %q, want spared and no doomed", names)
		}
	})

	t.Run("wait --for=delete", func(t *testing.T) {
		// A finalizer holds the object after the delete, so wait must
		// really watch until it is released.
		kIn(t, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ephemeral\n  finalizers: [example.com/hold]\n", "create", "-f", "-")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		wait := exec.CommandContext(ctx, binary(), "kubectl", "--kubeconfig", kc, "-n", surfaceNS, "wait", "--for=delete", "configmap/ephemeral", "--timeout=25s")
		var out, errOut bytes.Buffer
		wait.Stdout, wait.Stderr = &out, &errOut
		if err := wait.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- wait.Wait() }()

		wantLines(t, k(t, "delete", "configmap", "ephemeral", "--wait=false"), `configmap "ephemeral" deleted`)
		select {
		case err := <-done:
			t.Fatalf("wait returned while the finalizer still holds the object: %v\n%s%s", err, out.String(), errOut.String())
		case <-time.After(1500 * time.Millisecond):
		}
		k(t, "patch", "configmap", "ephemeral", "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("wait --for=delete: %v\nstdout %s\nstderr %s", err, out.String(), errOut.String())
			}
			wantLines(t, out.String(), "configmap/ephemeral condition met")
		case <-time.After(20 * time.Second):
			t.Fatalf("wait --for=delete still running 20s after the finalizer was removed")
		}
	})

	t.Run("auth can-i", func(t *testing.T) {
		out, errOut, err := kubectlResult(kc, "", "auth", "can-i", "create", "pods")
		if err != nil || strings.TrimSpace(out) != "yes" {
			t.Errorf("auth can-i create pods: err %v, stdout %q, stderr %q; want yes", err, out, errOut)
		}
		// Upstream's answers under its bootstrap policy, for a user with no
		// binding of its own and for a controller's service account: "yes"
		// exits 0, "no" exits 1.
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"list", "secrets", "--as", "alice"}, "no"},
			{[]string{"create", "selfsubjectaccessreviews.authorization.k8s.io", "--as", "alice"}, "yes"},
			{[]string{"get", "/healthz", "--as", "alice"}, "yes"},
			{[]string{"get", "/metrics", "--as", "alice"}, "no"},
			{[]string{"create", "pods", "-n", "default", "--as", "system:serviceaccount:kube-system:replicaset-controller"}, "yes"},
			{[]string{"get", "secrets", "-n", "default", "--as", "system:serviceaccount:kube-system:replicaset-controller"}, "no"},
			{[]string{"update", "nodes/status", "--as", "system:serviceaccount:kube-system:node-controller"}, "yes"},
		} {
			out, errOut, err := kubectlResult(kc, "", append([]string{"auth", "can-i"}, tc.args...)...)
			if strings.TrimSpace(out) != tc.want || (err == nil) != (tc.want == "yes") {
				t.Errorf("auth can-i %s: stdout %q, stderr %q, err %v; want %s", strings.Join(tc.args, " "), out, errOut, err, tc.want)
			}
		}
		// A user bound to nothing has system:basic-user, system:discovery and
		// system:public-info-viewer; kubectl prints each of the last two's
		// URLs, so the health and version paths twice, as against upstream.
		out, errOut, err = kubectlResult(kc, "", "auth", "can-i", "--list", "--as", "alice")
		if err != nil {
			t.Fatalf("auth can-i --list --as alice: %v\n%s", err, errOut)
		}
		want := `Resources                                       Non-Resource URLs   Resource Names   Verbs
selfsubjectreviews.authentication.k8s.io        []                  []               [create]
selfsubjectaccessreviews.authorization.k8s.io   []                  []               [create]
selfsubjectrulesreviews.authorization.k8s.io    []                  []               [create]
                                                [/api/*]            []               [get]
                                                [/api]              []               [get]
                                                [/apis/*]           []               [get]
                                                [/apis]             []               [get]
                                                [/healthz]          []               [get]
                                                [/healthz]          []               [get]
                                                [/livez]            []               [get]
                                                [/livez]            []               [get]
                                                [/openapi/*]        []               [get]
                                                [/openapi]          []               [get]
                                                [/readyz]           []               [get]
                                                [/readyz]           []               [get]
                                                [/version/]         []               [get]
                                                [/version/]         []               [get]
                                                [/version]          []               [get]
                                                [/version]          []               [get]
`
		if diff := cmp.Diff(want, out); diff != "" {
			t.Errorf("auth can-i --list --as alice (-upstream +got):\n%s", diff)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		t.Run("unknown field under strict validation", func(t *testing.T) {
			bad := `apiVersion: apps/v1
kind: Deployment
metadata:
  name: strict
spec:
  selector:
    matchLabels: {app: strict}
  template:
    metadata:
      labels: {app: strict}
    spec:
      containers:
      - name: app
        image: nginx
        imagePullPolicyy: Always
`
			_, errOut, _ := kFail(t, bad, "apply", "--validate=strict", "-f", "-")
			if !strings.Contains(errOut, `unknown field "spec.template.spec.containers[0].imagePullPolicyy"`) {
				t.Errorf("strict apply stderr = %q, want it to name spec.template.spec.containers[0].imagePullPolicyy", errOut)
			}
			if _, errOut, _ := kFail(t, "", "get", "deployment", "strict"); !strings.Contains(errOut, "NotFound") {
				t.Errorf("refused apply wrote the deployment: %s", errOut)
			}
		})

		t.Run("unknown field under warn validation", func(t *testing.T) {
			cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: warned\nbogus: 1\ndata:\n  a: b\n"
			out, errOut, err := kubectlResult(kc, cm, "-n", surfaceNS, "apply", "--validate=warn", "-f", "-")
			if err != nil {
				t.Fatalf("apply --validate=warn: %v\n%s", err, errOut)
			}
			wantLines(t, out, "configmap/warned created")
			if !strings.Contains(errOut, "Warning:") || !strings.Contains(errOut, `unknown field "bogus"`) {
				t.Errorf("apply --validate=warn stderr = %q, want a Warning naming bogus", errOut)
			}
		})

		t.Run("server dry run writes nothing", func(t *testing.T) {
			wantLines(t, k(t, "create", "configmap", "dry", "--from-literal=a=b", "--dry-run=server"), "configmap/dry created (server dry run)")
			wantLines(t, k(t, "delete", "configmap", "threeway", "--dry-run=server"), `configmap "threeway" deleted`, "(server dry run)")
			if _, errOut, _ := kFail(t, "", "get", "configmap", "dry"); !strings.Contains(errOut, "NotFound") {
				t.Errorf("dry-run create stored the object: %s", errOut)
			}
			k(t, "get", "configmap", "threeway")
		})

		t.Run("yaml alias bomb", func(t *testing.T) {
			bomb := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bomb\ndata:\n  a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n"
			prev := "a"
			for _, n := range []string{"b", "c", "d", "e", "f", "g", "h", "i"} {
				refs := strings.TrimSuffix(strings.Repeat("*"+prev+",", 9), ",")
				bomb += fmt.Sprintf("  %s: &%s [%s]\n", n, n, refs)
				prev = n
			}
			res := rawAPI(t, kc, http.MethodPost, "/api/v1/namespaces/"+surfaceNS+"/configmaps", "application/yaml", bomb)
			if res.code != http.StatusBadRequest {
				t.Errorf("alias bomb: status %d, want 400; body %.300s", res.code, res.body)
			}
			if res.elapsed > 5*time.Second {
				t.Errorf("alias bomb took %v to refuse, want well under 5s", res.elapsed)
			}
			if ready := rawAPI(t, kc, http.MethodGet, "/readyz", "", ""); ready.code != http.StatusOK {
				t.Errorf("readyz after the bomb = %d %s", ready.code, ready.body)
			}
			if got := k(t, "get", "configmap", "threeway", "-o", "jsonpath={.data.a}"); got != "10" {
				t.Errorf("server after the bomb: configmap threeway a = %q", got)
			}
			if _, errOut, _ := kFail(t, "", "get", "configmap", "bomb"); !strings.Contains(errOut, "NotFound") {
				t.Errorf("the bomb was stored: %s", errOut)
			}
		})

		t.Run("json patch failing test", func(t *testing.T) {
			res := rawAPI(t, kc, http.MethodPatch, "/apis/apps/v1/namespaces/"+surfaceNS+"/deployments/web", "application/json-patch+json",
				`[{"op":"test","path":"/spec/replicas","value":99},{"op":"replace","path":"/spec/replicas","value":1}]`)
			// Upstream answers with a generic 422 Invalid Status (no causes).
			if res.code != http.StatusUnprocessableEntity || !strings.Contains(res.body, `"reason":"Invalid"`) {
				t.Errorf("failing test op: status %d, want 422 Invalid; body %.400s", res.code, res.body)
			}
			_, errOut, _ := kFail(t, "", "patch", "deployment", "web", "--type=json", "-p", `[{"op":"test","path":"/spec/replicas","value":99}]`)
			if !strings.Contains(errOut, "The request is invalid") {
				t.Errorf("kubectl patch with failing test: stderr %q, want The request is invalid", errOut)
			}
			if got := k(t, "get", "deployment", "web", "-o", "jsonpath={.spec.replicas}"); got != "5" {
				t.Errorf("replicas after refused patches = %q, want 5 (unchanged)", got)
			}
		})

		t.Run("patch that does not parse", func(t *testing.T) {
			res := rawAPI(t, kc, http.MethodPatch, "/api/v1/namespaces/"+surfaceNS+"/configmaps/threeway", "application/merge-patch+json", `{"data":`)
			if res.code != http.StatusBadRequest {
				t.Errorf("malformed merge patch: status %d, want 400; body %.300s", res.code, res.body)
			}
		})
	})
}

// servedRow finds the api-resources row keyed "NAME APIVERSION".
func servedRow(rows []map[string]string, key string) (apiResource, bool) {
	for _, r := range rows {
		if r["NAME"]+" "+r["APIVERSION"] == key {
			return apiResource{r["SHORTNAMES"], r["NAMESPACED"], r["KIND"], r["VERBS"], r["CATEGORIES"]}, true
		}
	}
	return apiResource{}, false
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
