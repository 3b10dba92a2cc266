package admission

import (
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// with adds objects of another resource to the reader.
func (o *objects) with(gvr schema.GroupVersionResource, objs ...runtime.Object) *objects {
	o.byGVR[gvr] = append(o.byGVR[gvr], objs...)
	return o
}

func q(s string) resource.Quantity { return resource.MustParse(s) }
