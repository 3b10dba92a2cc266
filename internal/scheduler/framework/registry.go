package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
)

// Factory builds a plugin. args is nil (use defaults), a pointer to the
// plugin's typed args, or raw JSON from a configuration file; plugins read
// it with DecodeArgs.
type Factory func(ctx context.Context, args any, h Handle) (Plugin, error)

// Registry maps plugin names to their factories. It is filled explicitly
// by whoever builds the scheduler (see plugins.NewInTreeRegistry).
type Registry map[string]Factory

// Register adds a factory; a duplicate name is an error.
func (r Registry) Register(name string, f Factory) error {
	if _, ok := r[name]; ok {
		return fmt.Errorf("plugin %q is already registered", name)
	}
	r[name] = f
	return nil
}

// Merge adds every factory of o; a duplicate name is an error.
func (r Registry) Merge(o Registry) error {
	for name, f := range o {
		if err := r.Register(name, f); err != nil {
			return err
		}
	}
	return nil
}

// DecodeArgs fills out (a pointer to the plugin's args struct, already
// holding the defaults) from args: nil leaves the defaults, a value of the
// same type replaces them, and JSON (json.RawMessage, []byte, or a
// map[string]any) is decoded over them.
func DecodeArgs(args any, out any) error {
	switch a := args.(type) {
	case nil:
		return nil
	case json.RawMessage:
		return decodeJSON(a, out)
	case []byte:
		return decodeJSON(a, out)
	case map[string]any:
		b, err := json.Marshal(a)
		if err != nil {
			return fmt.Errorf("encode plugin args: %w", err)
		}
		return decodeJSON(b, out)
	}
	av, ov := reflect.ValueOf(args), reflect.ValueOf(out)
	if av.Type() == ov.Type() {
		ov.Elem().Set(av.Elem())
		return nil
	}
	if av.Type() == ov.Type().Elem() {
		ov.Elem().Set(av)
		return nil
	}
	return fmt.Errorf("plugin args: got %T, want %T", args, out)
}

func decodeJSON(b []byte, out any) error {
	if len(b) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("decode plugin args: %w", err)
	}
	return nil
}
