// Package apisurface checks the API Skiff serves against what upstream
// kube-apiserver v1.37.2 serves by default, as kubectl shows it:
// `kubectl api-resources -o wide` and `kubectl api-versions`, run through
// the kubectl embedded in Skiff against an in-process API server.
package apisurface

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/skiff-sh/skiff/internal/cli/kubectl"
	testapiserver "github.com/skiff-sh/skiff/internal/testing/apiserver"
)

var updateUpstream = flag.Bool("update-upstream", false,
	"rewrite testdata/upstream-*.txt from k8s.io/kubernetes@v1.37.2's api/discovery documents in the module cache")

// knownGaps are resources upstream v1.37.2 serves by default that Skiff
// does not serve yet, with the issue that adds them. The test fails when
// one of them appears, so that whoever adds it removes it from here.
var knownGaps = map[string]string{}

// knownVersionGaps are the group versions that only known gaps serve.
var knownVersionGaps = map[string]string{}

// skiffAdditions are resources Skiff serves that upstream does not by
// itself: the resource metrics API, which upstream clusters get from
// metrics-server through aggregation and Skiff's API server serves.
var skiffAdditions = map[string]bool{
	"nodes.metrics.k8s.io": true,
	"pods.metrics.k8s.io":  true,
}

// skiffVersionAdditions are the group versions only Skiff's additions serve.
var skiffVersionAdditions = map[string]bool{"metrics.k8s.io/v1beta1": true}

func runKubectl(t *testing.T, c *testapiserver.Cluster, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
	all := append([]string{"--kubeconfig", c.Kubeconfig(), "--cache-dir", t.TempDir()}, args...)
	if err := kubectl.New(all, streams).Execute(); err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String()
}

// table is a kubectl table split into cells by the header's column
// offsets (kubectl aligns every column to the same offset), so empty
// cells stay in place.
type table struct {
	header []string
	rows   map[string][]string // by "resource.group" (or "resource" for core)
}

func parseTable(t *testing.T, text string) table {
	t.Helper()
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		if l := sc.Text(); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		t.Fatalf("empty table")
	}
	head := lines[0]
	var starts []int
	for i := range head {
		if head[i] != ' ' && (i == 0 || head[i-1] == ' ') {
			starts = append(starts, i)
		}
	}
	cell := func(l string, i int) string {
		end := len(l)
		if i+1 < len(starts) && starts[i+1] < end {
			end = starts[i+1]
		}
		if starts[i] >= len(l) {
			return ""
		}
		return strings.TrimSpace(l[starts[i]:end])
	}
	tb := table{rows: map[string][]string{}}
	for i := range starts {
		tb.header = append(tb.header, cell(head, i))
	}
	for _, l := range lines[1:] {
		var row []string
		for i := range starts {
			row = append(row, cell(l, i))
		}
		tb.rows[rowKey(row)] = row
	}
	return tb
}

// rowKey is "resource.group" from NAME and APIVERSION.
func rowKey(row []string) string {
	group, _, ok := strings.Cut(row[2], "/")
	if !ok {
		return row[0]
	}
	return row[0] + "." + group
}

// TestAPIResources compares `kubectl api-resources -o wide` on Skiff with
// upstream v1.37.2's (testdata/upstream-api-resources.txt), apart from
// the known gaps and Skiff's additions, and `kubectl api-versions` the
// same way.
func TestAPIResources(t *testing.T) {
	if *updateUpstream {
		writeUpstreamGolden(t)
	}
	want := readGolden(t, "upstream-api-resources.txt")
	wantVersions := readGolden(t, "upstream-api-versions.txt")

	c := testapiserver.Start(t)
	got := parseTable(t, runKubectl(t, c, "api-resources", "-o", "wide"))
	up := parseTable(t, want)
	if diff := cmp.Diff(up.header, got.header); diff != "" {
		t.Fatalf("columns (-upstream +skiff):\n%s", diff)
	}
	for key, issue := range knownGaps {
		if _, ok := up.rows[key]; !ok {
			t.Errorf("known gap %s (%s) is not served by upstream either: remove it from knownGaps", key, issue)
		}
		if _, ok := got.rows[key]; ok {
			t.Errorf("%s is served now: remove it from knownGaps (%s) so this test checks it", key, issue)
		}
		delete(up.rows, key)
	}
	for key := range skiffAdditions {
		if _, ok := got.rows[key]; !ok {
			t.Errorf("Skiff's addition %s is not served", key)
		}
		delete(got.rows, key)
	}
	if diff := cmp.Diff(up.rows, got.rows); diff != "" {
		t.Errorf("kubectl api-resources -o wide (-upstream +skiff):\n%s", diff)
	}
	t.Logf("%d resources compared line for line, %d known gaps", len(got.rows), len(knownGaps))

	gotVersions := lineSet(runKubectl(t, c, "api-versions"))
	upVersions := lineSet(wantVersions)
	for gv, issue := range knownVersionGaps {
		if gotVersions[gv] {
			t.Errorf("%s is served now: remove it from knownVersionGaps (%s)", gv, issue)
		}
		delete(upVersions, gv)
	}
	for gv := range skiffVersionAdditions {
		if !gotVersions[gv] {
			t.Errorf("Skiff's addition %s is not served", gv)
		}
		delete(gotVersions, gv)
	}
	if diff := cmp.Diff(upVersions, gotVersions); diff != "" {
		t.Errorf("kubectl api-versions (-upstream +skiff):\n%s", diff)
	}
}

func lineSet(text string) map[string]bool {
	out := map[string]bool{}
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out[l] = true
		}
	}
	return out
}

func readGolden(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("%v (regenerate with -update-upstream)", err)
	}
	return string(b)
}

// upstreamDefaultVersions are the group versions kube-apiserver v1.37.2
// serves by default: the "enabled by default" lists of
// pkg/controlplane/instance.go (stableAPIGroupVersionsEnabledByDefault and
// genericStableAPIGroupVersionsEnabledByDefault; every beta and alpha
// version there is disabled), plus apiextensions.k8s.io/v1 and
// apiregistration.k8s.io/v1, which the apiextensions server and the
// aggregator always serve. The preferred version of each group is listed
// first (autoscaling/v2: priority 30 over v1's 15 in
// cmd/kube-apiserver/app/aggregator.go).
var upstreamDefaultVersions = []string{
	"v1",
	"admissionregistration.k8s.io/v1", "apiextensions.k8s.io/v1", "apiregistration.k8s.io/v1", "apps/v1",
	"authentication.k8s.io/v1", "authorization.k8s.io/v1", "autoscaling/v2", "autoscaling/v1", "batch/v1",
	"certificates.k8s.io/v1", "coordination.k8s.io/v1", "discovery.k8s.io/v1", "events.k8s.io/v1",
	"flowcontrol.apiserver.k8s.io/v1", "networking.k8s.io/v1", "node.k8s.io/v1", "policy/v1",
	"rbac.authorization.k8s.io/v1", "resource.k8s.io/v1", "scheduling.k8s.io/v1", "storage.k8s.io/v1",
	"storagemigration.k8s.io/v1",
}

// upstreamResourceGates are resources of default-enabled versions that
// upstream serves only behind a feature gate; the value says whether the
// gate is on by default in v1.37.2 (pkg/features/kube_features.go).
// Every resource of a default version not listed here is served.
var upstreamResourceGates = map[string]bool{
	"clustertrustbundles.certificates.k8s.io":    true, // ClusterTrustBundle: GA in 1.37
	"podcertificaterequests.certificates.k8s.io": true, // PodCertificateRequest: GA in 1.37
}

// writeUpstreamGolden derives the golden files from upstream's own
// discovery documents (api/discovery/*.json in k8s.io/kubernetes@v1.37.2,
// generated by upstream from a server with every API enabled), keeping
// only the default-enabled versions, the preferred version of each
// resource, no subresources, in kubectl's order (group, then name) and
// format.
func writeUpstreamGolden(t *testing.T) {
	t.Helper()
	modcache, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(strings.TrimSpace(string(modcache)), "k8s.io", "kubernetes@v1.37.2", "api", "discovery")
	type line struct{ group, name, text string }
	var lines []line
	seen := map[string]bool{}
	for _, gv := range upstreamDefaultVersions {
		file := "api__v1.json"
		if gv != "v1" {
			file = "apis__" + strings.ReplaceAll(gv, "/", "__") + ".json"
		}
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatalf("upstream discovery (go mod download k8s.io/kubernetes@v1.37.2): %v", err)
		}
		var list metav1.APIResourceList
		if err := json.Unmarshal(b, &list); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		group, _, _ := strings.Cut(gv, "/")
		if gv == "v1" {
			group = ""
		}
		for _, r := range list.APIResources {
			key := r.Name + "." + group
			if strings.Contains(r.Name, "/") || len(r.Verbs) == 0 || seen[key] {
				continue
			}
			if on, gated := upstreamResourceGates[key]; gated && !on {
				continue
			}
			seen[key] = true
			lines = append(lines, line{group, r.Name, fmt.Sprintf("%s\t%s\t%s\t%v\t%s\t%s\t%s",
				r.Name, strings.Join(r.ShortNames, ","), gv, r.Namespaced, r.Kind, strings.Join(r.Verbs, ","), strings.Join(r.Categories, ","))})
		}
	}
	sort.SliceStable(lines, func(i, j int) bool {
		if lines[i].group != lines[j].group {
			return lines[i].group < lines[j].group
		}
		return lines[i].name < lines[j].name
	})
	var buf bytes.Buffer
	buf.WriteString(goldenHeader("kubectl api-resources -o wide", len(lines)))
	w := tabwriter.NewWriter(&buf, 0, 8, 3, ' ', 0) // kubectl's printers.GetNewTabWriter
	fmt.Fprintln(w, "NAME\tSHORTNAMES\tAPIVERSION\tNAMESPACED\tKIND\tVERBS\tCATEGORIES")
	for _, l := range lines {
		fmt.Fprintln(w, l.text)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	write(t, "upstream-api-resources.txt", buf.Bytes())

	versions := append([]string(nil), upstreamDefaultVersions...)
	sort.Strings(versions) // kubectl api-versions sorts
	write(t, "upstream-api-versions.txt", []byte(goldenHeader("kubectl api-versions", len(versions))+strings.Join(versions, "\n")+"\n"))
}

func goldenHeader(cmd string, n int) string {
	return fmt.Sprintf(`# %s on upstream kube-apiserver v1.37.2 with its default flags (%d lines).
# Not captured from a running server: derived by
#   go test ./test/integration/apisurface -run TestAPIResources -update-upstream
# from upstream's own discovery documents, k8s.io/kubernetes@v1.37.2
# api/discovery/*.json, keeping only the group versions enabled by default
# (pkg/controlplane/instance.go) and the resources whose feature gates are
# on by default, one line per resource in its preferred version, sorted
# as kubectl sorts (group, then name). Do not edit by hand.
`, cmd, n)
}

func write(t *testing.T, name string, b []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join("testdata", name), b, 0o644); err != nil {
		t.Fatal(err)
	}
}
