// Package controller_test guards the controllers' architecture:
//   - they reach the cluster only through client-go: neither a controller
//     nor any Skiff package it imports (tests aside) uses the API server's,
//     the storage's or etcd's packages;
//   - no controller imports another: the manager wires them, and what two
//     controllers share lives in a package of its own (controllercontext,
//     worker, podendpoint, podowner);
//   - every work queue is drained by internal/controller/worker: no
//     controller keeps its own copy of the loop, waits for caches itself,
//     or drops the error of AddEventHandler.
package controller_test

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/skiff-sh/skiff/"

var root = filepath.Join("..", "..")

// imports are the Skiff packages (module-relative) that rel imports,
// tests aside.
func imports(t *testing.T, rel string) []string {
	t.Helper()
	pkg, err := build.ImportDir(filepath.Join(root, rel), 0)
	if err != nil {
		t.Fatalf("read package %s: %v", rel, err)
	}
	var out []string
	for _, imp := range pkg.Imports {
		if strings.HasPrefix(imp, module) {
			out = append(out, strings.TrimPrefix(imp, module))
		}
	}
	return out
}

// controllers are the packages the manager's registry imports, the
// manager's own contract and the libraries controllers share (the worker,
// the pod-owner index that PrepareInformers adds) aside.
func controllers(t *testing.T) []string {
	var out []string
	for _, p := range imports(t, "internal/controller/manager") {
		if strings.HasPrefix(p, "internal/controller/") && p != "internal/controller/controllercontext" && p != "internal/controller/worker" && p != "internal/controller/podowner" {
			out = append(out, p)
		}
	}
	if len(out) < 10 {
		t.Fatalf("found only %d controllers in the manager's imports: %v", len(out), out)
	}
	return out
}

// deps walks rel's Skiff imports transitively and calls visit with each
// package and the package that imported it.
func deps(t *testing.T, rel string, visit func(pkg, from string)) {
	seen := map[string]bool{rel: true}
	var walk func(p string)
	walk = func(p string) {
		for _, imp := range imports(t, p) {
			if seen[imp] {
				continue
			}
			seen[imp] = true
			visit(imp, p)
			walk(imp)
		}
	}
	walk(rel)
}

func TestControllersTalkOnlyThroughTheAPI(t *testing.T) {
	forbidden := []string{"internal/apiserver", "internal/storage", "internal/etcd"}
	for _, c := range append(controllers(t), "internal/controller/manager") {
		deps(t, c, func(pkg, from string) {
			for _, bad := range forbidden {
				if pkg == bad || strings.HasPrefix(pkg, bad+"/") {
					t.Errorf("%s (through %s) imports %s%s: controllers use the API through client-go", c, from, module, pkg)
				}
			}
		})
		pkg, err := build.ImportDir(filepath.Join(root, c), 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range pkg.Imports {
			if strings.HasPrefix(imp, "go.etcd.io/") {
				t.Errorf("%s imports %s: controllers use the API through client-go", c, imp)
			}
		}
	}
}

func TestNoControllerImportsAnother(t *testing.T) {
	all := controllers(t)
	for _, c := range all {
		deps(t, c, func(pkg, from string) {
			if slices.Contains(all, pkg) {
				t.Errorf("%s (through %s) imports the controller %s: move what they share into a package of its own", c, from, pkg)
			}
		})
	}
}

func TestQueuesRunThroughWorker(t *testing.T) {
	for _, c := range controllers(t) {
		pkg, err := build.ImportDir(filepath.Join(root, c), 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range pkg.GoFiles {
			path := filepath.Join(root, c, name)
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CallExpr:
					if sel, ok := n.Fun.(*ast.SelectorExpr); ok {
						switch sel.Sel.Name {
						case "Forget":
							t.Errorf("%s calls Forget: a work queue's loop belongs to internal/controller/worker", path)
						case "WaitForCacheSync", "WaitForNamedCacheSync":
							t.Errorf("%s calls %s: worker.Run waits for the caches (and fails when they do not sync)", path, sel.Sel.Name)
						}
					}
				case *ast.AssignStmt:
					if len(n.Rhs) == 1 && blank(n.Lhs[len(n.Lhs)-1]) {
						if call, ok := n.Rhs[0].(*ast.CallExpr); ok {
							if sel, ok := call.Fun.(*ast.SelectorExpr); ok && strings.HasPrefix(sel.Sel.Name, "AddEventHandler") {
								t.Errorf("%s drops the error of %s: return it", path, sel.Sel.Name)
							}
						}
					}
				}
				return true
			})
		}
	}
}

func blank(e ast.Expr) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == "_"
}
