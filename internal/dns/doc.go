// Package dns is Skiff's cluster DNS: it answers the names of upstream's
// DNS specification for Kubernetes (Services, headless endpoints, SRV,
// PTR, ExternalName, pod names) from informer caches and forwards other
// names to the host's resolvers with a cache.
//
// Resolver (answer.go) is the pure core: one question in, the records out,
// from a Source of indexed Services and EndpointSlices. Server (server.go)
// is the component: UDP and TCP listeners (miekg/dns), the forwarder and
// its cache, CoreDNS-named metrics, /health, and optionally the
// kube-system/kube-dns Service that points pods at it (publish.go).
package dns
