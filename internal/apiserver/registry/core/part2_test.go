package core

import (
	"testing"

	"github.com/skiff-sh/skiff/internal/apiserver/allocator"
)

func TestCoreResourcesPart2(t *testing.T) {
	alloc, err := allocator.NewServices(allocator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range CoreResourcesPart2(alloc) {
		got = append(got, r.Resource+"@"+r.StoragePrefix)
	}
	want := []string{"services@services/specs", "endpoints@services/endpoints"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("resources = %v, want %v", got, want)
	}
}
