// Package gcreal holds only a test: the kubelet's image garbage collection
// against the agent's real containerd (it links containerd into the test
// binary, so it lives apart from the kubelet's fast unit tests).
package gcreal
