package kubectl

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func TestDefaultKubeconfig(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{name: "plain", args: []string{"get", "pods"}, want: "/var/lib/skiff/admin.kubeconfig"},
		{name: "data dir from env", args: []string{"get", "pods"}, env: map[string]string{"SKIFF_DATA_DIR": "/srv/skiff"}, want: "/srv/skiff/admin.kubeconfig"},
		{name: "KUBECONFIG set", args: []string{"get", "pods"}, env: map[string]string{"KUBECONFIG": "/home/u/.kube/config"}, want: ""},
		{name: "--kubeconfig flag", args: []string{"--kubeconfig", "/k", "get", "pods"}, want: ""},
		{name: "--kubeconfig= flag", args: []string{"get", "pods", "--kubeconfig=/k"}, want: ""},
		{name: "flag after -- is the container's", args: []string{"exec", "p", "--", "sh", "--kubeconfig=/k"}, want: "/var/lib/skiff/admin.kubeconfig"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := DefaultKubeconfig(tc.args, func(k string) string { return tc.env[k] })
			if got != tc.want {
				t.Errorf("DefaultKubeconfig = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestPassThrough runs `skiff kubectl` with real kubectl commands that need
// no server: arguments and flags reach kubectl unchanged, and the data
// directory's admin kubeconfig is the default.
func TestPassThrough(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "admin.kubeconfig")
	other := filepath.Join(dir, "other.kubeconfig")
	for file, server := range map[string]string{path: "https://127.0.0.1:6443", other: "https://192.0.2.1:443"} {
		cfg := clientcmdapi.NewConfig()
		cfg.Clusters["skiff"] = &clientcmdapi.Cluster{Server: server}
		cfg.AuthInfos["skiff"] = &clientcmdapi.AuthInfo{}
		cfg.Contexts["skiff"] = &clientcmdapi.Context{Cluster: "skiff", AuthInfo: "skiff"}
		cfg.CurrentContext = "skiff"
		if err := clientcmd.WriteToFile(*cfg, file); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(DataDirEnv, dir)
	tests := []struct {
		name string
		env  string // KUBECONFIG
		args []string
		want string
	}{
		{name: "config view uses the default", args: []string{"config", "view", "-o", "jsonpath={.clusters[0].cluster.server}"}, want: "https://127.0.0.1:6443"},
		{name: "flags after the command", args: []string{"config", "current-context"}, want: "skiff\n"},
		{name: "explicit --kubeconfig wins", args: []string{"config", "view", "--kubeconfig", other, "-o", "jsonpath={.clusters[0].cluster.server}"}, want: "https://192.0.2.1:443"},
		{name: "KUBECONFIG wins", env: other, args: []string{"config", "view", "-o", "jsonpath={.clusters[0].cluster.server}"}, want: "https://192.0.2.1:443"},
		{name: "client version", args: []string{"version", "--client", "-o", "json"}, want: `"gitVersion"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tc.env)
			var out, errOut bytes.Buffer
			cmd := NewCommand()
			cmd.SetArgs(tc.args)
			cmd.SetIn(strings.NewReader(""))
			cmd.SetOut(&out)
			cmd.SetErr(&errOut)
			if err := cmd.Execute(); err != nil {
				t.Fatalf("kubectl %v: %v (stderr %q)", tc.args, err, errOut.String())
			}
			if !strings.Contains(out.String(), tc.want) {
				t.Errorf("kubectl %v printed %q, want it to contain %q", tc.args, out.String(), tc.want)
			}
		})
	}
}
