package webhook

import (
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
)

// Objects describes the server's types and versions to upstream's
// webhook library, which converts the object of a request to the version
// a webhook registered for, and a patched object back.
type Objects struct {
	// Scheme knows the built-in types (kinds not in it are custom
	// resources, handled as unstructured).
	Scheme *runtime.Scheme
	// Convert converts an object to another served version of its
	// resource (a webhook with matchPolicy Equivalent registered for
	// another version); nil: only the request's own version is sent.
	Convert func(obj runtime.Object, to schema.GroupVersionKind) (runtime.Object, error)
	// Mapper lists the served versions of a resource and the kind each
	// one's requests carry (matchPolicy Equivalent); nil: none.
	Mapper runtime.EquivalentResourceMapper
}

// objectInterfaces is upstream's admission.ObjectInterfaces over Objects.
type objectInterfaces struct {
	o Objects
}

func newObjectInterfaces(o Objects) admission.ObjectInterfaces {
	if o.Scheme == nil {
		o.Scheme = runtime.NewScheme()
	}
	if o.Mapper == nil {
		o.Mapper = runtime.NewEquivalentResourceRegistry()
	}
	return objectInterfaces{o: o}
}

func (i objectInterfaces) GetObjectCreater() runtime.ObjectCreater     { return creater(i) }
func (i objectInterfaces) GetObjectTyper() runtime.ObjectTyper         { return i.o.Scheme }
func (i objectInterfaces) GetObjectDefaulter() runtime.ObjectDefaulter { return nopDefaulter{} }
func (i objectInterfaces) GetObjectConvertor() runtime.ObjectConvertor { return convertor(i) }
func (i objectInterfaces) GetEquivalentResourceMapper() runtime.EquivalentResourceMapper {
	return i.o.Mapper
}

// creater makes built-in kinds from the scheme and any other kind (a
// custom resource) as unstructured.
type creater objectInterfaces

func (c creater) New(gvk schema.GroupVersionKind) (runtime.Object, error) {
	if c.o.Scheme.Recognizes(gvk) {
		return c.o.Scheme.New(gvk)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// nopDefaulter: Skiff's strategies apply their defaults again after
// mutating admission (create.go, update.go), so a patched object is not
// defaulted here.
type nopDefaulter struct{}

func (nopDefaulter) Default(runtime.Object) {}

// convertor converts between Skiff's objects (the request's) and the
// versions webhooks see. Skiff has no internal versions: the request's
// object is already versioned, so most conversions copy.
type convertor objectInterfaces

// kindOf is the kind obj is of: its apiVersion and kind when set (an
// unstructured object, or a typed one the library stamped), else its Go
// type's in the scheme.
func (c convertor) kindOf(obj runtime.Object) (schema.GroupVersionKind, error) {
	if gvk := obj.GetObjectKind().GroupVersionKind(); !gvk.Empty() {
		return gvk, nil
	}
	kinds, _, err := c.o.Scheme.ObjectKinds(obj)
	if err != nil {
		return schema.GroupVersionKind{}, err
	}
	return kinds[0], nil
}

// Convert fills out from in. out keeps its own apiVersion and kind (or
// none, as Skiff's objects have).
func (c convertor) Convert(in, out, _ interface{}) error {
	src, ok1 := in.(runtime.Object)
	dst, ok2 := out.(runtime.Object)
	if !ok1 || !ok2 {
		return fmt.Errorf("cannot convert %T to %T", in, out)
	}
	have, err := c.kindOf(src)
	if err != nil {
		return err
	}
	want := dst.GetObjectKind().GroupVersionKind()
	if _, ok := dst.(*unstructured.Unstructured); !ok && want.Empty() {
		// A Skiff object: of the kind its Go type is registered as (one
		// type may be registered in several groups: have is then fine).
		if kinds, _, err := c.o.Scheme.ObjectKinds(dst); err == nil {
			want = kinds[0]
			for _, k := range kinds {
				if k == have {
					want = have
				}
			}
		}
	}
	if !want.Empty() && want.GroupVersion() != have.GroupVersion() {
		if c.o.Convert == nil {
			return fmt.Errorf("no conversion from %v to %v", have, want)
		}
		if src, err = c.o.Convert(src, want); err != nil {
			return err
		}
	}
	if reflect.TypeOf(src) != reflect.TypeOf(dst) {
		return fmt.Errorf("cannot convert %T to %T", src, dst)
	}
	keep := dst.GetObjectKind().GroupVersionKind()
	reflect.ValueOf(dst).Elem().Set(reflect.ValueOf(src.DeepCopyObject()).Elem())
	if u, ok := dst.(*unstructured.Unstructured); ok {
		if !keep.Empty() {
			u.SetGroupVersionKind(keep)
		}
	} else {
		dst.GetObjectKind().SetGroupVersionKind(keep)
	}
	return nil
}

func (c convertor) ConvertToVersion(in runtime.Object, gv runtime.GroupVersioner) (runtime.Object, error) {
	have, err := c.kindOf(in)
	if err != nil {
		return nil, err
	}
	want, ok := gv.KindForGroupVersionKinds([]schema.GroupVersionKind{have})
	if !ok {
		return nil, fmt.Errorf("%v is not suitable for converting to %v", have, gv)
	}
	out, err := creater(c).New(want)
	if err != nil {
		return nil, err
	}
	if err := c.Convert(in, out, nil); err != nil {
		return nil, err
	}
	out.GetObjectKind().SetGroupVersionKind(want)
	return out, nil
}

func (c convertor) ConvertFieldLabel(gvk schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}
