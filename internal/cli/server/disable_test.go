package server

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// --disable-scheduler and --disable-controller-manager (k3s's names) leave
// the in-process scheduler and controllers out, for running upstream's.
func TestDisableSchedulerAndControllerManager(t *testing.T) {
	tests := []struct {
		args []string
		want [2]bool // controller manager, scheduler disabled
	}{
		{nil, [2]bool{false, false}},
		{[]string{"--disable-controller-manager"}, [2]bool{true, false}},
		{[]string{"--disable-scheduler"}, [2]bool{false, true}},
		{[]string{"--disable-scheduler", "--disable-controller-manager"}, [2]bool{true, true}},
	}
	for _, tt := range tests {
		f := DefaultFlags()
		cmd := NewCommand()
		if err := cmd.ParseFlags(tt.args); err != nil {
			t.Fatal(err)
		}
		f.DisableControllerManager = cmd.Flags().Lookup("disable-controller-manager").Value.String() == "true"
		f.DisableScheduler = cmd.Flags().Lookup("disable-scheduler").Value.String() == "true"
		cfg, err := f.Config()
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, [2]bool{cfg.DisableControllerManager, cfg.DisableScheduler}); diff != "" {
			t.Errorf("%v: disabled (controller manager, scheduler) (-want +got):\n%s", tt.args, diff)
		}
	}
}
