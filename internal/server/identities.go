package server

import (
	"k8s.io/client-go/rest"

	"github.com/skiff-sh/skiff/internal/pki"
)

// identityConfig is a client config for one of Skiff's components under
// its own identity: a client certificate from the cluster CA, stored as
// <name>.crt/.key in the PKI directory and renewed before it expires. The
// bootstrap policy gives each identity what upstream gives it:
// system:kube-scheduler, system:kube-controller-manager (plus every
// controller role, see bootstrappolicy), system:node:<name> in
// system:nodes (the Node authorizer and NodeRestriction).
func identityConfig(bundle *pki.Bundle, server, name, user string, groups []string) (*rest.Config, error) {
	if _, _, err := bundle.EnsureClient(name, user, groups, pki.Options{}); err != nil {
		return nil, err
	}
	// From the files: client-go takes up the certificate the running
	// server renews (certrenewal.go).
	return bundle.ClientRESTConfigFiles(server, name), nil
}
