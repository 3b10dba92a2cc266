// Command markergen writes markers_generated.go from the comment markers of
// k8s.io/api and apimachinery's meta/v1, which reflection cannot see:
//   - the struct fields whose +optional or +required marker overrides what
//     their json tag implies (a field without omitempty is required, one
//     with it optional);
//   - the +listType, +listMapKey and +mapType markers of fields;
//   - the +structType markers of types.
//
// Run it with `go generate ./internal/apiserver/openapi/` after a k8s.io/api
// upgrade.
package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "markergen:", err)
		os.Exit(1)
	}
}

// moduleDir finds a module's source in the module cache.
func moduleDir(module string) (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module).Output()
	if err != nil {
		return "", fmt.Errorf("locate %s: %w", module, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// markers is what the scan collects.
type markers struct {
	required    map[string]map[string]bool
	lists       map[string]map[string]fieldMarkers
	structTypes map[string]string
}

type fieldMarkers struct {
	listType    string
	listMapKeys []string
	mapType     string
}

func run() error {
	overrides := &markers{required: map[string]map[string]bool{}, lists: map[string]map[string]fieldMarkers{}, structTypes: map[string]string{}}
	api, err := moduleDir("k8s.io/api")
	if err != nil {
		return err
	}
	machinery, err := moduleDir("k8s.io/apimachinery")
	if err != nil {
		return err
	}
	roots := []struct{ dir, prefix string }{
		{api, "io.k8s.api"},
		{filepath.Join(machinery, "pkg/apis/meta/v1"), "io.k8s.apimachinery.pkg.apis.meta.v1"},
	}
	for _, root := range roots {
		err := filepath.WalkDir(root.dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			rel, err := filepath.Rel(root.dir, filepath.Dir(path))
			if err != nil {
				return err
			}
			prefix := root.prefix
			if rel != "." {
				prefix += "." + strings.ReplaceAll(filepath.ToSlash(rel), "/", ".")
			}
			return scanFile(path, prefix, overrides)
		})
		if err != nil {
			return err
		}
	}
	return write("markers_generated.go", overrides)
}

// markerValue returns the value of a +name=value comment marker.
func markerValue(c *ast.Comment, name string) (string, bool) {
	text := strings.TrimSpace(strings.TrimPrefix(c.Text, "//"))
	return strings.CutPrefix(text, "+"+name+"=")
}

func scanFile(path, prefix string, m *markers) error {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments)
	if err != nil {
		return fmt.Errorf("parse %s: %w", path, err)
	}
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.TYPE {
			continue
		}
		for _, spec := range gd.Specs {
			ts := spec.(*ast.TypeSpec)
			st, ok := ts.Type.(*ast.StructType)
			if !ok || !ts.Name.IsExported() {
				continue
			}
			model := prefix + "." + ts.Name.Name
			doc := ts.Doc
			if doc == nil {
				doc = gd.Doc
			}
			if doc != nil {
				for _, c := range doc.List {
					if v, ok := markerValue(c, "structType"); ok {
						m.structTypes[model] = v
					}
				}
			}
			for _, fld := range st.Fields.List {
				if fld.Tag == nil || fld.Doc == nil {
					continue
				}
				tagText, err := strconv.Unquote(fld.Tag.Value)
				if err != nil {
					continue
				}
				name, opts, _ := strings.Cut(reflect.StructTag(tagText).Get("json"), ",")
				if name == "" || name == "-" {
					continue
				}
				optional := strings.Contains(","+opts+",", ",omitempty,") || strings.Contains(","+opts+",", ",omitzero,")
				var marked, required bool
				var fm fieldMarkers
				for _, c := range fld.Doc.List {
					if v, ok := markerValue(c, "listType"); ok {
						fm.listType = v
					}
					if v, ok := markerValue(c, "listMapKey"); ok {
						fm.listMapKeys = append(fm.listMapKeys, v)
					}
					if v, ok := markerValue(c, "mapType"); ok {
						fm.mapType = v
					}
					text := strings.TrimSpace(strings.TrimPrefix(c.Text, "//"))
					switch {
					case text == "+optional" || strings.HasPrefix(text, "+optional="):
						marked, required = true, false
					case text == "+required" || strings.HasPrefix(text, "+required="):
						marked, required = true, true
					}
				}
				if fm.listType != "" || fm.mapType != "" {
					if m.lists[model] == nil {
						m.lists[model] = map[string]fieldMarkers{}
					}
					m.lists[model][name] = fm
				}
				if !marked || required == !optional {
					continue
				}
				if m.required[model] == nil {
					m.required[model] = map[string]bool{}
				}
				m.required[model][name] = required
			}
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func write(path string, m *markers) error {
	var b bytes.Buffer
	b.WriteString("// Code generated by markergen from the comment markers of k8s.io/api. DO NOT EDIT.\n\n")
	b.WriteString("package openapi\n\n")
	b.WriteString("// requiredOverrides lists, by definition name and json field name, the\n")
	b.WriteString("// fields whose comment markers say required (true) or optional (false)\n")
	b.WriteString("// against what their json tag implies.\n")
	b.WriteString("func requiredOverrides() map[string]map[string]bool {\n\treturn map[string]map[string]bool{\n")
	for _, model := range sortedKeys(m.required) {
		fmt.Fprintf(&b, "\t\t%q: {", model)
		for i, f := range sortedKeys(m.required[model]) {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%q: %v", f, m.required[model][f])
		}
		b.WriteString("},\n")
	}
	b.WriteString("\t}\n}\n\n")
	b.WriteString("// listMarkers lists, by definition name and json field name, the\n")
	b.WriteString("// +listType, +listMapKey and +mapType markers of fields.\n")
	b.WriteString("func listMarkers() map[string]map[string]fieldMarkers {\n\treturn map[string]map[string]fieldMarkers{\n")
	for _, model := range sortedKeys(m.lists) {
		fmt.Fprintf(&b, "\t\t%q: {\n", model)
		for _, f := range sortedKeys(m.lists[model]) {
			fm := m.lists[model][f]
			fmt.Fprintf(&b, "\t\t\t%q: {listType: %q, mapType: %q", f, fm.listType, fm.mapType)
			if len(fm.listMapKeys) > 0 {
				fmt.Fprintf(&b, ", listMapKeys: %#v", fm.listMapKeys)
			}
			b.WriteString("},\n")
		}
		b.WriteString("\t\t},\n")
	}
	b.WriteString("\t}\n}\n\n")
	b.WriteString("// structTypes lists the +structType markers of types by definition name.\n")
	b.WriteString("func structTypes() map[string]string {\n\treturn map[string]string{\n")
	for _, model := range sortedKeys(m.structTypes) {
		fmt.Fprintf(&b, "\t\t%q: %q,\n", model, m.structTypes[model])
	}
	b.WriteString("\t}\n}\n")
	src, err := format.Source(b.Bytes())
	if err != nil {
		return fmt.Errorf("format: %w", err)
	}
	return os.WriteFile(path, src, 0o644)
}
