//go:build tools

// Package upstream pins the upstream Kubernetes programs build.sh can build,
// so that go.sum covers them. Nothing here is compiled into Skiff.
package upstream

import (
	_ "github.com/onsi/ginkgo/v2/ginkgo"

	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubernetes/test/e2e"
	_ "k8s.io/kubernetes/test/images/agnhost"
	_ "k8s.io/kubernetes/test/images/nonewprivs"
	_ "k8s.io/sample-apiserver"
)
