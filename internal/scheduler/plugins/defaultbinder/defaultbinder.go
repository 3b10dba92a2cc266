// Package defaultbinder binds a pod by creating its pods/binding
// subresource through the API server.
package defaultbinder

import (
	"context"
	"errors"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

// Name is the plugin's name.
const Name = "DefaultBinder"

// DefaultBinder is the plugin.
type DefaultBinder struct {
	client kubernetes.Interface
}

var _ framework.BindPlugin = (*DefaultBinder)(nil)

// New builds the plugin; the handle must have a client.
func New(_ context.Context, _ any, h framework.Handle) (framework.Plugin, error) {
	if h.ClientSet() == nil {
		return nil, errors.New("DefaultBinder needs a client")
	}
	return &DefaultBinder{client: h.ClientSet()}, nil
}

// Name implements framework.Plugin.
func (*DefaultBinder) Name() string { return Name }

// Bind POSTs a Binding for the pod (with its UID, so that a pod recreated
// under the same name is not bound by mistake).
func (b *DefaultBinder) Bind(ctx context.Context, _ *framework.CycleState, pod *v1.Pod, nodeName string) *framework.Status {
	binding := &v1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Target:     v1.ObjectReference{Kind: "Node", Name: nodeName},
	}
	if err := b.client.CoreV1().Pods(pod.Namespace).Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
		return framework.AsStatus(err)
	}
	return nil
}
