package storage

import (
	"bytes"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// protoMagic prefixes every protobuf-encoded object, as upstream writes it.
var protoMagic = []byte{0x6b, 0x38, 0x73, 0x00} // "k8s\x00"

type protoMessage interface {
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}

// Codec turns objects into the bytes kept in etcd and back.
type Codec interface {
	Encode(obj runtime.Object) ([]byte, error)
	Decode(data []byte, into runtime.Object) error
}

// ProtobufCodec stores built-in types the way upstream does: the "k8s\0"
// magic, then a runtime.Unknown carrying apiVersion, kind and the object's
// own protobuf bytes.
type ProtobufCodec struct {
	GVK schema.GroupVersionKind
}

func (c ProtobufCodec) Encode(obj runtime.Object) ([]byte, error) {
	m, ok := obj.(protoMessage)
	if !ok {
		return nil, fmt.Errorf("%T is not a protobuf message", obj)
	}
	raw, err := m.Marshal()
	if err != nil {
		return nil, err
	}
	apiVersion, kind := c.GVK.ToAPIVersionAndKind()
	unk := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: apiVersion, Kind: kind}, Raw: raw}
	body, err := unk.Marshal()
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(protoMagic)+len(body))
	return append(append(out, protoMagic...), body...), nil
}

func (c ProtobufCodec) Decode(data []byte, into runtime.Object) error {
	if !bytes.HasPrefix(data, protoMagic) {
		return fmt.Errorf("stored object is not protobuf-encoded")
	}
	var unk runtime.Unknown
	if err := unk.Unmarshal(data[len(protoMagic):]); err != nil {
		return fmt.Errorf("decode envelope: %w", err)
	}
	m, ok := into.(protoMessage)
	if !ok {
		return fmt.Errorf("%T is not a protobuf message", into)
	}
	if err := m.Unmarshal(unk.Raw); err != nil {
		return fmt.Errorf("decode %s: %w", unk.Kind, err)
	}
	into.GetObjectKind().SetGroupVersionKind(c.GVK)
	return nil
}

// setRV writes the revision into an object's metadata.resourceVersion.
func setRV(obj runtime.Object, rev int64) error {
	a, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	a.SetResourceVersion(formatRV(rev))
	return nil
}

// ConvertingCodec stores objects of one API version in another's format:
// events.k8s.io/v1 Events are kept as core/v1 Events, as upstream does, so
// both APIs read the same objects.
type ConvertingCodec struct {
	Storage   Codec
	NewStored func() runtime.Object
	// ToStored and FromStored convert between the served and stored types.
	ToStored   func(runtime.Object) (runtime.Object, error)
	FromStored func(stored, into runtime.Object) error
	GVK        schema.GroupVersionKind
}

func (c ConvertingCodec) Encode(obj runtime.Object) ([]byte, error) {
	stored, err := c.ToStored(obj)
	if err != nil {
		return nil, err
	}
	return c.Storage.Encode(stored)
}

func (c ConvertingCodec) Decode(data []byte, into runtime.Object) error {
	stored := c.NewStored()
	if err := c.Storage.Decode(data, stored); err != nil {
		return err
	}
	if err := c.FromStored(stored, into); err != nil {
		return err
	}
	into.GetObjectKind().SetGroupVersionKind(c.GVK)
	return nil
}
