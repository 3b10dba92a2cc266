package volume

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// File is one file of a projected volume (configMap, secret, downwardAPI,
// projected): its path relative to the volume and its mode.
type File struct {
	Data []byte
	Mode os.FileMode
}

const (
	dataDirName    = "..data"
	newDataDirName = "..data_tmp"
)

// WriteAtomic makes dir show exactly payload, as upstream's atomic writer
// does: the files live in a timestamped directory "..<time>", a symlink
// "..data" points at it, and each top-level name in dir is a symlink into
// "..data". A new payload is written to a new timestamped directory and
// "..data" is swapped with one rename, so a reader never sees a mix of old
// and new files. It reports whether anything changed.
func WriteAtomic(dir string, payload map[string]File) (bool, error) {
	for p := range payload {
		if err := validPath(p); err != nil {
			return false, err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	oldTS, _ := os.Readlink(filepath.Join(dir, dataDirName))
	if oldTS != "" && same(filepath.Join(dir, oldTS), payload) {
		return false, nil
	}
	tsDir, err := os.MkdirTemp(dir, time.Now().UTC().Format("..2006_01_02_15_04_05."))
	if err != nil {
		return false, err
	}
	if err := os.Chmod(tsDir, 0o755); err != nil {
		return false, err
	}
	for p, f := range payload {
		full := filepath.Join(tsDir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return false, err
		}
		if err := os.WriteFile(full, f.Data, f.Mode); err != nil {
			return false, err
		}
		if err := os.Chmod(full, f.Mode); err != nil {
			return false, err
		}
	}
	tmpLink := filepath.Join(dir, newDataDirName)
	_ = os.Remove(tmpLink)
	if err := os.Symlink(filepath.Base(tsDir), tmpLink); err != nil {
		return false, err
	}
	if err := os.Rename(tmpLink, filepath.Join(dir, dataDirName)); err != nil {
		return false, err
	}
	// User-visible names: one symlink per top-level entry.
	top := map[string]bool{}
	for p := range payload {
		top[strings.SplitN(p, "/", 2)[0]] = true
	}
	for name := range top {
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join(dataDirName, name), link); err != nil {
			return false, err
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		n := e.Name()
		switch {
		case n == dataDirName || n == filepath.Base(tsDir):
		case strings.HasPrefix(n, ".."):
			_ = os.RemoveAll(filepath.Join(dir, n))
		case !top[n] && e.Type()&os.ModeSymlink != 0:
			_ = os.Remove(filepath.Join(dir, n))
		}
	}
	return true, nil
}

func validPath(p string) error {
	if p == "" || filepath.IsAbs(p) || strings.HasPrefix(p, "..") || strings.Contains(p, "/../") || strings.HasSuffix(p, "/..") {
		return fmt.Errorf("invalid path %q", p)
	}
	return nil
}

// same reports whether dir holds exactly payload.
func same(dir string, payload map[string]File) bool {
	var have []string
	err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if info.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dir, path)
		f, ok := payload[rel]
		if !ok || info.Mode().Perm() != f.Mode.Perm() {
			return fmt.Errorf("differs")
		}
		b, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(b, f.Data) {
			return fmt.Errorf("differs")
		}
		have = append(have, rel)
		return nil
	})
	if err != nil || len(have) != len(payload) {
		return false
	}
	sort.Strings(have)
	return true
}
