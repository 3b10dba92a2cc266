package disruption

import (
	"testing"

	"github.com/skiff-sh/skiff/internal/testing/mutationdetector"
)

// The in-process scheduler's and controllers' informer objects are the
// API server's own (internal/sharedinformers): these tests run with
// client-go's cache mutation detector, so changing one fails them.
func TestMain(m *testing.M) { mutationdetector.Main(m) }

func TestCacheMutationDetectorOn(t *testing.T) { mutationdetector.Check(t) }
