package apiserver

import (
	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/storage"
)

// transformerFor is the encryption at rest of a resource's store (nil:
// stored as is). A resource kept as another group's (events.k8s.io Events
// as core events) is configured under the group it is stored as, as
// upstream.
func transformerFor(e *storage.Encryption, res registry.Resource) storage.Transformer {
	group := res.GroupVersion.Group
	if res.Stored != nil {
		group = res.Stored.GVK.Group
	}
	return e.For(group, res.Resource)
}
