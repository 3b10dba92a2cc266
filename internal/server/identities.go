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
	cert, key, err := bundle.EnsureClient(name, user, groups, pki.Options{})
	if err != nil {
		return nil, err
	}
	return bundle.ClientRESTConfig(server, cert, key), nil
}
