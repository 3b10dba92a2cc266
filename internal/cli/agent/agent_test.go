package agent

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestParse(t *testing.T) {
	taints, err := ParseTaints([]string{"dedicated=gpu:NoSchedule", "spot:PreferNoSchedule"})
	if err != nil {
		t.Fatal(err)
	}
	want := []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}, {Key: "spot", Effect: corev1.TaintEffectPreferNoSchedule}}
	if diff := cmp.Diff(want, taints); diff != "" {
		t.Errorf("taints (-want +got):\n%s", diff)
	}
	if _, err := ParseTaints([]string{"a=b:Sometimes"}); err == nil {
		t.Error("a bad effect was accepted")
	}
	res, err := ParseResources("cpu=100m,memory=256Mi")
	if err != nil || res.Cpu().MilliValue() != 100 || res.Memory().Value() != 256<<20 {
		t.Errorf("resources %v, %v", res, err)
	}
}

func TestConfigErrors(t *testing.T) {
	f := DefaultFlags()
	f.NodeIP = "nope"
	f.MaxPods = 0
	f.CgroupRoot = "skiff-node2"
	f.ClusterCIDR = "fd42::/48"
	f.NodePortAddresses = []string{"10.0.0.0/33"}
	f.NodeLabels = []string{"tier=db", "node.kubernetes.io/pool=a", "node-role.kubernetes.io/worker=", "node-restriction.kubernetes.io/pci=true"}
	_, err := f.Config()
	for _, want := range []string{"--kubeconfig", "--node-ip", "--max-pods", "--cgroup-root", "--cluster-cidr", `--nodeport-addresses: "10.0.0.0/33"`,
		"--node-labels: a node may not set node-restriction.kubernetes.io/pci, node-role.kubernetes.io/worker on itself"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not mention %s", err, want)
		}
	}
}
