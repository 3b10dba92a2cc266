package core

import (
	"github.com/skiff-sh/skiff/internal/apiserver/allocator"
	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/endpoints"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/service"
)

// CoreResourcesPart2 returns core/v1 services and endpoints. alloc hands
// out ClusterIPs and NodePorts: build it with allocator.NewServices and
// call its Rebuild with every stored Service before serving writes.
func CoreResourcesPart2(alloc *allocator.Services) []registry.Resource {
	return []registry.Resource{
		service.Resource(alloc),
		endpoints.Resource(),
	}
}
