// Package netpol enforces NetworkPolicy (networking.k8s.io/v1) on a node
// with nftables, in its own table `ip skiff-netpol`.
//
// Compute (rules.go) is the pure core: from pods, namespaces, policies and
// the cluster DNS endpoints it builds one ingress chain per local pod that
// an ingress policy selects and one egress chain per local pod that an
// egress policy selects, reached through verdict maps keyed by pod IP.
// Established and related traffic is always allowed; egress to the
// cluster DNS is always allowed; what no rule allows is rejected. The
// Enforcer (enforcer.go) is the loop around it: informers, a rate-bounded
// sync, the nft runner.
package netpol
