// Package proxy is Skiff's service proxy: it programs the kernel's nftables
// so that Services reach their endpoints, the way upstream kube-proxy's
// nftables mode does.
//
// The contract:
//   - Input (model.go) is a snapshot: the service ports and the endpoints
//     the proxy should program, already converted from Services and
//     EndpointSlices by BuildInput.
//   - Compute (rules.go) turns a snapshot into a Ruleset, a value with no
//     I/O: the chains, sets and maps of Skiff's own table `ip skiff-proxy`.
//   - Ruleset.Transaction renders the nft script that moves the kernel from
//     what it has (the previous Ruleset and the names nft listed) to the
//     new Ruleset in one atomic `nft -f` transaction.
//   - Proxier (proxier.go) is the thin loop: informers, a rate-bounded
//     sync, the nft runner, metrics and events.
//
// Nothing outside table `ip skiff-proxy` is ever touched.
package proxy
