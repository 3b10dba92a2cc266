package storage

import (
	"slices"
	"sort"
	"sync"

	"k8s.io/apimachinery/pkg/fields"
)

// FieldValues is an object's selectable fields as the cache keeps them: the
// values only, in the order of a sorted name list that every object with
// the same names shares (all objects of a resource have the same). A
// fields.Set per object costs a map, about 1 KiB for an Event's 14 fields;
// this is a slice of the object's own strings.
type FieldValues struct {
	names  []string // sorted, shared
	values []string
}

var _ fields.Fields = FieldValues{}

func (f FieldValues) index(name string) (int, bool) {
	return slices.BinarySearch(f.names, name)
}

// Has says whether the object has the field.
func (f FieldValues) Has(name string) bool {
	_, ok := f.index(name)
	return ok
}

// Get is the field's value ("" when it has none).
func (f FieldValues) Get(name string) string {
	if i, ok := f.index(name); ok {
		return f.values[i]
	}
	return ""
}

// fieldNames hands out the shared name lists.
type fieldNames struct {
	mu   sync.Mutex
	last []string
}

// values turns a field set into FieldValues, reusing the last name list
// when the set has the same names.
func (n *fieldNames) values(set fields.Set) FieldValues {
	if set == nil {
		return FieldValues{}
	}
	n.mu.Lock()
	names := n.last
	same := len(names) == len(set)
	if same {
		for k := range set {
			if _, ok := slices.BinarySearch(names, k); !ok {
				same = false
				break
			}
		}
	}
	if !same {
		names = make([]string, 0, len(set))
		for k := range set {
			names = append(names, k)
		}
		sort.Strings(names)
		n.last = names
	}
	n.mu.Unlock()
	values := make([]string, len(names))
	for i, k := range names {
		values[i] = set[k]
	}
	return FieldValues{names: names, values: values}
}
