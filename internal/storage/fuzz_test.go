package storage_test

import (
	"strings"
	"testing"

	"github.com/skiff-sh/skiff/internal/storage"
)

// FuzzParseRV: any string either parses to a non-negative revision that
// prints back the same, or is refused; never a panic.
func FuzzParseRV(f *testing.F) {
	for _, s := range []string{"", "0", "1", "42", "-1", "9223372036854775807", "9223372036854775808", "1e3", " 1", "0x10", "007"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := storage.ParseRV(s)
		if err != nil {
			return
		}
		if n < 0 {
			t.Fatalf("ParseRV(%q) = %d, negative", s, n)
		}
	})
}

// FuzzDecodeContinue: a continue token decodes to a key under the prefix
// and a revision (0: the newest, from an inconsistent continuation's -1),
// or is refused; never a panic, never a key that escapes the prefix.
func FuzzDecodeContinue(f *testing.F) {
	const prefix = "/registry/pods/"
	for _, s := range []string{
		"", "e30", "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTAsInN0YXJ0IjoibnMvYVx1MDAwMCJ9",
		"eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MSwic3RhcnQiOiIuLi9zZWNyZXRzIn0", "!!!", "eyJ2Ijo",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, token string) {
		key, rev, err := storage.DecodeContinue(token, prefix)
		if err != nil {
			return
		}
		if rev < 0 {
			t.Fatalf("token %q: revision %d", token, rev)
		}
		if !strings.HasPrefix(key, prefix) || strings.Contains(key[len(prefix):], "..") || strings.HasPrefix(key[len(prefix):], "/") {
			t.Fatalf("token %q: key %q escapes %s", token, key, prefix)
		}
	})
}
