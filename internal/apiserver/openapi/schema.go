package openapi

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// A definition is one named model (one Go type) in a neutral form that
// renders to both Swagger 2.0 and OpenAPI 3.0.
type definition struct {
	name        string
	description string
	// special, when set, is the whole schema of a type with its own wire
	// form (Time, Quantity, IntOrString, ...), per document version.
	special func(v3 bool) map[string]any
	fields  []field // struct properties in Go declaration order
	gvks    []schema.GroupVersionKind
	mapType string // from the type's +structType marker
}

type field struct {
	name          string
	description   string
	required      bool
	typ           *typeRef
	patchStrategy string
	patchMergeKey string
	markers       fieldMarkers
}

// fieldMarkers are a field's +listType, +listMapKey and +mapType comment
// markers, which become x-kubernetes-list-type, -list-map-keys and -map-type.
type fieldMarkers struct {
	listType    string
	listMapKeys []string
	mapType     string
}

// typeRef is the schema of a field's type: a primitive, an array, a map, or
// a reference to a definition.
type typeRef struct {
	typ    string // "string", "integer", "number", "boolean", "array", "object"
	format string
	items  *typeRef // array element, or map value
	ref    string   // definition name
}

// definitions collects the models reachable from a set of root Go types.
type definitions struct {
	byName map[string]*definition
	byType map[reflect.Type]string
	// required holds the fields whose +optional/+required markers override
	// what their json tags imply; lists and structTypes the other markers.
	required    map[string]map[string]bool
	lists       map[string]map[string]fieldMarkers
	structTypes map[string]string
}

func newDefinitions() *definitions {
	return &definitions{byName: map[string]*definition{}, byType: map[reflect.Type]string{}, required: requiredOverrides(),
		lists: listMarkers(), structTypes: structTypes()}
}

var (
	timeType        = reflect.TypeOf(metav1.Time{})
	microTimeType   = reflect.TypeOf(metav1.MicroTime{})
	durationType    = reflect.TypeOf(metav1.Duration{})
	quantityType    = reflect.TypeOf(resource.Quantity{})
	intOrStringType = reflect.TypeOf(intstr.IntOrString{})
	rawExtType      = reflect.TypeOf(runtime.RawExtension{})
	fieldsV1Type    = reflect.TypeOf(metav1.FieldsV1{})
)

// specialTypes are the types whose JSON form is not their Go struct. The
// descriptions are ours: these types carry no SwaggerDoc.
func specialSchema(t reflect.Type) (func(v3 bool) map[string]any, string, bool) {
	str := func(format string) func(bool) map[string]any {
		return func(bool) map[string]any {
			m := map[string]any{"type": "string"}
			if format != "" {
				m["format"] = format
			}
			return m
		}
	}
	switch t {
	case timeType:
		return str("date-time"), "Time is a timestamp serialized as an RFC 3339 string, with second precision.", true
	case microTimeType:
		return str("date-time"), "MicroTime is a timestamp serialized as an RFC 3339 string, with microsecond precision.", true
	case durationType:
		return str(""), "Duration is a length of time written as a Go duration string, such as \"1h30m\".", true
	case quantityType:
		return func(v3 bool) map[string]any {
			if v3 {
				return map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "number"}}}
			}
			return map[string]any{"type": "string"}
		}, "Quantity is a fixed-point number with an optional suffix, such as \"100m\", \"1.5Gi\" or \"2\". It is written as a string in JSON.", true
	case intOrStringType:
		return func(v3 bool) map[string]any {
			if v3 {
				return map[string]any{
					"oneOf":                      []any{map[string]any{"type": "integer"}, map[string]any{"type": "string"}},
					"x-kubernetes-int-or-string": true,
				}
			}
			return map[string]any{"type": "string", "format": "int-or-string"}
		}, "IntOrString holds either an integer or a string, such as a port number or a port name, or an absolute count or a percentage.", true
	case rawExtType:
		return func(bool) map[string]any { return map[string]any{"type": "object"} },
			"RawExtension holds an embedded object of any kind, in its own serialized form.", true
	case fieldsV1Type:
		return func(bool) map[string]any { return map[string]any{"type": "object"} },
			"FieldsV1 is the set of fields a manager owns, in the structured-merge-diff field set format.", true
	}
	// Types that name their own schema type for kube-openapi (the
	// apiextensions JSON and JSONSchemaPropsOr* unions): no types means any
	// value, as upstream publishes them.
	if st, ok := reflect.New(t).Elem().Interface().(interface{ OpenAPISchemaType() []string }); ok && t.Kind() == reflect.Struct {
		types := st.OpenAPISchemaType()
		return func(bool) map[string]any {
			if len(types) == 1 {
				return map[string]any{"type": types[0]}
			}
			return map[string]any{}
		}, "", true
	}
	return nil, "", false
}

// modelName is the upstream definition name of a named Go type: the type's
// OpenAPIModelName when it has one, else derived from its package path
// (k8s.io/api/core/v1.Pod -> io.k8s.api.core.v1.Pod).
func modelName(t reflect.Type) string {
	if n, ok := reflect.Zero(t).Interface().(interface{ OpenAPIModelName() string }); ok {
		if name := n.OpenAPIModelName(); name != "" {
			return name
		}
	}
	pkg := t.PkgPath()
	host, rest, _ := strings.Cut(pkg, "/")
	labels := strings.Split(host, ".")
	for i, j := 0, len(labels)-1; i < j; i, j = i+1, j-1 {
		labels[i], labels[j] = labels[j], labels[i]
	}
	parts := append(labels, strings.Split(rest, "/")...)
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, strings.ReplaceAll(p, "-", "_"))
		}
	}
	return strings.Join(append(out, t.Name()), ".")
}

// swaggerDoc returns the generated documentation map of a type, keyed by
// json field name; "" is the type itself.
func swaggerDoc(t reflect.Type) map[string]string {
	if d, ok := reflect.Zero(t).Interface().(interface{ SwaggerDoc() map[string]string }); ok {
		return d.SwaggerDoc()
	}
	if d, ok := reflect.New(t).Interface().(interface{ SwaggerDoc() map[string]string }); ok {
		return d.SwaggerDoc()
	}
	return nil
}

// add registers the named struct type t (and everything it reaches) and
// returns its definition name.
func (d *definitions) add(t reflect.Type) (string, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if name, ok := d.byType[t]; ok {
		return name, nil
	}
	if t.Name() == "" {
		return "", fmt.Errorf("anonymous type %s has no definition name", t)
	}
	name := modelName(t)
	if other, ok := d.byName[name]; ok {
		return "", fmt.Errorf("definition %s is claimed by two Go types (%s)", name, other.name)
	}
	def := &definition{name: name}
	d.byType[t] = name
	d.byName[name] = def
	if special, desc, ok := specialSchema(t); ok {
		def.special, def.description = special, desc
		return name, nil
	}
	if t.Kind() != reflect.Struct {
		return "", fmt.Errorf("type %s is not a struct", t)
	}
	docs := swaggerDoc(t)
	def.description = docs[""]
	def.mapType = d.structTypes[name]
	fields, err := d.structFields(t, name, docs)
	if err != nil {
		return "", fmt.Errorf("definition %s: %w", name, err)
	}
	def.fields = fields
	return name, nil
}

// structFields lists the JSON properties of a struct, following
// encoding/json's rules for inlined embedded structs. A field is required
// when its json tag lacks omitempty, unless a comment marker of the
// declaring type (model) says otherwise, as upstream's generator decides.
func (d *definitions) structFields(t reflect.Type, model string, docs map[string]string) ([]field, error) {
	var out []field
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() && !sf.Anonymous {
			continue
		}
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if sf.Anonymous && (name == "" || strings.Contains(","+opts+",", ",inline,")) {
			et := sf.Type
			for et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				embedded, err := d.structFields(et, modelName(et), swaggerDoc(et))
				if err != nil {
					return nil, err
				}
				out = append(out, embedded...)
				continue
			}
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		ref, err := d.typeOf(sf.Type)
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", sf.Name, err)
		}
		required := !strings.Contains(","+opts+",", ",omitempty,") && !strings.Contains(","+opts+",", ",omitzero,")
		if r, ok := d.required[model][name]; ok {
			required = r
		}
		out = append(out, field{
			name:          name,
			description:   docs[name],
			required:      required,
			typ:           ref,
			patchStrategy: sf.Tag.Get("patchStrategy"),
			patchMergeKey: sf.Tag.Get("patchMergeKey"),
			markers:       d.lists[model][name],
		})
	}
	return out, nil
}

// typeOf maps a Go type to its schema, registering definitions as needed.
func (d *definitions) typeOf(t reflect.Type) (*typeRef, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if _, _, ok := specialSchema(t); ok {
		name, err := d.add(t)
		return &typeRef{ref: name}, err
	}
	switch t.Kind() {
	case reflect.Bool:
		return &typeRef{typ: "boolean"}, nil
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Uint8, reflect.Uint16, reflect.Int, reflect.Uint:
		return &typeRef{typ: "integer", format: "int32"}, nil
	case reflect.Int64, reflect.Uint32, reflect.Uint64:
		return &typeRef{typ: "integer", format: "int64"}, nil
	case reflect.Float32:
		return &typeRef{typ: "number", format: "float"}, nil
	case reflect.Float64:
		return &typeRef{typ: "number", format: "double"}, nil
	case reflect.String:
		return &typeRef{typ: "string"}, nil
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return &typeRef{typ: "string", format: "byte"}, nil
		}
		items, err := d.typeOf(t.Elem())
		return &typeRef{typ: "array", items: items}, err
	case reflect.Map:
		values, err := d.typeOf(t.Elem())
		return &typeRef{typ: "object", items: values}, err
	case reflect.Struct:
		name, err := d.add(t)
		return &typeRef{ref: name}, err
	case reflect.Interface:
		return &typeRef{typ: "object"}, nil
	}
	return nil, fmt.Errorf("unsupported Go type %s", t)
}

// refPrefix is where definitions live in each document version.
func refPrefix(v3 bool) string {
	if v3 {
		return "#/components/schemas/"
	}
	return "#/definitions/"
}

// render returns the schema of a type reference.
func (r *typeRef) render(v3 bool) map[string]any {
	if r.ref != "" {
		return map[string]any{"$ref": refPrefix(v3) + r.ref}
	}
	m := map[string]any{"type": r.typ}
	if r.format != "" {
		m["format"] = r.format
	}
	switch r.typ {
	case "array":
		m["items"] = r.items.render(v3)
	case "object":
		if r.items != nil {
			m["additionalProperties"] = r.items.render(v3)
		}
	}
	return m
}

// render returns the schema of a field: its type plus its description and
// patch extensions. OpenAPI 3 puts a reference beside other keywords inside
// allOf, as upstream does; Swagger 2 keeps it beside them.
func (f field) render(v3 bool) map[string]any {
	var m map[string]any
	if f.typ.ref != "" && v3 {
		m = map[string]any{"allOf": []any{f.typ.render(v3)}}
	} else {
		m = f.typ.render(v3)
	}
	if f.description != "" {
		m["description"] = f.description
	}
	if f.patchStrategy != "" {
		m["x-kubernetes-patch-strategy"] = f.patchStrategy
	}
	if f.patchMergeKey != "" {
		m["x-kubernetes-patch-merge-key"] = f.patchMergeKey
	}
	if f.markers.listType != "" {
		m["x-kubernetes-list-type"] = f.markers.listType
	}
	if len(f.markers.listMapKeys) > 0 {
		keys := make([]any, len(f.markers.listMapKeys))
		for i, k := range f.markers.listMapKeys {
			keys[i] = k
		}
		m["x-kubernetes-list-map-keys"] = keys
	}
	if f.markers.mapType != "" {
		m["x-kubernetes-map-type"] = f.markers.mapType
	}
	return m
}

// render returns the schema of a definition.
func (def *definition) render(v3 bool) map[string]any {
	var m map[string]any
	if def.special != nil {
		m = def.special(v3)
	} else {
		m = map[string]any{"type": "object"}
		if len(def.fields) > 0 {
			props := make(map[string]any, len(def.fields))
			var required []string
			for _, f := range def.fields {
				props[f.name] = f.render(v3)
				if f.required {
					required = append(required, f.name)
				}
			}
			m["properties"] = props
			if len(required) > 0 {
				sort.Strings(required)
				m["required"] = required
			}
		}
	}
	if def.description != "" {
		m["description"] = def.description
	}
	if len(def.gvks) > 0 {
		m["x-kubernetes-group-version-kind"] = gvkList(def.gvks)
	}
	if def.mapType != "" {
		m["x-kubernetes-map-type"] = def.mapType
	}
	return m
}

func gvkList(gvks []schema.GroupVersionKind) []any {
	sorted := append([]schema.GroupVersionKind(nil), gvks...)
	sort.Slice(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.Version != b.Version {
			return a.Version < b.Version
		}
		return a.Kind < b.Kind
	})
	out := make([]any, 0, len(sorted))
	for i, g := range sorted {
		if i > 0 && g == sorted[i-1] {
			continue
		}
		out = append(out, gvkMap(g))
	}
	return out
}

func gvkMap(g schema.GroupVersionKind) map[string]any {
	return map[string]any{"group": g.Group, "version": g.Version, "kind": g.Kind}
}

// closure returns the names of the definitions reachable from roots, sorted.
func (d *definitions) closure(roots []string) []string {
	seen := map[string]bool{}
	var visit func(name string)
	var visitRef func(r *typeRef)
	visitRef = func(r *typeRef) {
		for ; r != nil; r = r.items {
			if r.ref != "" {
				visit(r.ref)
			}
		}
	}
	visit = func(name string) {
		if seen[name] {
			return
		}
		seen[name] = true
		for _, f := range d.byName[name].fields {
			visitRef(f.typ)
		}
	}
	for _, r := range roots {
		visit(r)
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
