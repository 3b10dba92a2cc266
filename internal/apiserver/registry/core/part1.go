// Package core gathers the core/v1 resources served by the API server. The
// rules of each resource live in its own subpackage (pod, node, namespace,
// configmap, secret, serviceaccount, event, service, endpoints); this
// package only lists them.
package core

import (
	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/configmap"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/event"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/namespace"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/node"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/pod"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/secret"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/core/serviceaccount"
	eventsv1 "github.com/skiff-sh/skiff/internal/apiserver/registry/events/event"
)

// CoreResourcesPart1 returns pods, nodes, namespaces, configmaps, secrets,
// serviceaccounts and core/v1 events, followed by events.k8s.io/v1 events,
// which upstream stores in the same keys as core/v1 events (see the
// events/event package: the API server must store them as core/v1 Events
// through its ToCore/FromCore conversion).
func CoreResourcesPart1() []registry.Resource {
	return []registry.Resource{
		pod.Resource(),
		node.Resource(),
		namespace.Resource(),
		configmap.Resource(),
		secret.Resource(),
		serviceaccount.Resource(),
		event.Resource(),
		eventsv1.Resource(),
	}
}
