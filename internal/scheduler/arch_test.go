// Package scheduler_test guards the scheduler's architecture: it talks to
// the cluster only through client-go, never through the API server's or
// the storage's packages.
package scheduler_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestNoAPIServerOrStorageImports(t *testing.T) {
	forbidden := []string{
		"github.com/skiff-sh/skiff/internal/apiserver",
		"github.com/skiff-sh/skiff/internal/storage",
		"github.com/skiff-sh/skiff/internal/etcd",
	}
	checked := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for _, bad := range forbidden {
				if p == bad || strings.HasPrefix(p, bad+"/") {
					t.Errorf("%s imports %s: the scheduler must use the API through client-go", path, p)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 20 {
		t.Fatalf("checked only %d files; is the walk rooted right?", checked)
	}
}
