package scheduling

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

var ctx = context.Background()

func errStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field+": "+e.Type.String())
	}
	return out
}

func pc(name string, value int32, mutate ...func(*schedulingv1.PriorityClass)) *schedulingv1.PriorityClass {
	p := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func TestDefaultsAndValidate(t *testing.T) {
	tests := []struct {
		name string
		pc   *schedulingv1.PriorityClass
		want []string
	}{
		{name: "user class", pc: pc("high", 1000)},
		{name: "at the ceiling", pc: pc("top", HighestUserDefinablePriority)},
		{name: "above the ceiling", pc: pc("top", HighestUserDefinablePriority+1), want: []string{"value: Forbidden"}},
		{name: "system class as bootstrapped", pc: &SystemPriorityClasses()[0]},
		{name: "unknown system name", pc: pc("system-mine", 10), want: []string{"metadata.name: Forbidden"}},
		{name: "system class with another value", pc: pc(SystemClusterCritical, 10), want: []string{"metadata.name: Forbidden"}},
		{name: "system class as default", pc: pc(SystemNodeCritical, 2000001000, func(p *schedulingv1.PriorityClass) { p.GlobalDefault = true }),
			want: []string{"metadata.name: Forbidden"}},
		{name: "bad policy", pc: pc("x", 1, func(p *schedulingv1.PriorityClass) { p.PreemptionPolicy = ptr.To(corev1.PreemptionPolicy("Sometimes")) }),
			want: []string{"preemptionPolicy: Unsupported value"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStrategy(nil)
			obj := tc.pc.DeepCopy()
			s.PrepareForCreate(ctx, obj)
			if obj.PreemptionPolicy == nil {
				t.Fatal("preemptionPolicy not defaulted")
			}
			if diff := cmp.Diff(tc.want, errStrings(s.Validate(ctx, obj))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
	p := pc("x", 1)
	DefaultPriorityClass(p)
	if *p.PreemptionPolicy != corev1.PreemptLowerPriority {
		t.Errorf("default policy = %s", *p.PreemptionPolicy)
	}
}

func TestValidateUpdate(t *testing.T) {
	s := NewStrategy(nil)
	old := pc("x", 1)
	DefaultPriorityClass(old)
	tests := []struct {
		name   string
		mutate func(*schedulingv1.PriorityClass)
		want   []string
	}{
		{name: "description may change", mutate: func(p *schedulingv1.PriorityClass) { p.Description = "new" }},
		{name: "value", mutate: func(p *schedulingv1.PriorityClass) { p.Value = 2 }, want: []string{"value: Forbidden"}},
		{name: "policy", mutate: func(p *schedulingv1.PriorityClass) { p.PreemptionPolicy = ptr.To(corev1.PreemptNever) },
			want: []string{"preemptionPolicy: Invalid value"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			next := old.DeepCopy()
			tc.mutate(next)
			if diff := cmp.Diff(tc.want, errStrings(s.ValidateUpdate(ctx, next, old))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSingleGlobalDefault(t *testing.T) {
	stored := []schedulingv1.PriorityClass{*pc("a", 1), *pc("b", 2, func(p *schedulingv1.PriorityClass) { p.GlobalDefault = true })}
	list := func(context.Context) ([]schedulingv1.PriorityClass, error) { return stored, nil }
	tests := []struct {
		name      string
		list      Lister
		pc        *schedulingv1.PriorityClass
		forbidden bool
		err       bool
	}{
		{name: "not default", list: list, pc: pc("c", 3)},
		{name: "second default", list: list, pc: pc("c", 3, func(p *schedulingv1.PriorityClass) { p.GlobalDefault = true }), forbidden: true},
		{name: "same default updated", list: list, pc: pc("b", 2, func(p *schedulingv1.PriorityClass) { p.GlobalDefault = true })},
		{name: "no lister", pc: pc("c", 3, func(p *schedulingv1.PriorityClass) { p.GlobalDefault = true })},
		{name: "list fails", list: func(context.Context) ([]schedulingv1.PriorityClass, error) { return nil, errors.New("boom") },
			pc: pc("c", 3, func(p *schedulingv1.PriorityClass) { p.GlobalDefault = true }), err: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStrategy(tc.list)
			_, err := s.BeforeCreate(ctx, tc.pc, false)
			if got := apierrors.IsForbidden(err); got != tc.forbidden {
				t.Errorf("create forbidden = %v (%v), want %v", got, err, tc.forbidden)
			}
			if (err != nil) != (tc.forbidden || tc.err) {
				t.Errorf("create err = %v", err)
			}
			_, err = s.BeforeUpdate(ctx, tc.pc, pc(tc.pc.Name, tc.pc.Value), false)
			if got := apierrors.IsForbidden(err); got != tc.forbidden {
				t.Errorf("update forbidden = %v (%v), want %v", got, err, tc.forbidden)
			}
		})
	}
}

func TestSystemPriorityClasses(t *testing.T) {
	got := map[string]int32{}
	for _, p := range SystemPriorityClasses() {
		got[p.Name] = p.Value
		if p.Description == "" {
			t.Errorf("%s has no description", p.Name)
		}
		if errs := ValidatePriorityClass(&p); len(errs) != 1 || errs[0].Field != "preemptionPolicy" {
			// Undefaulted: only the preemption policy is missing.
			t.Errorf("%s: %v", p.Name, errs)
		}
	}
	want := map[string]int32{"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("system classes (-want +got):\n%s", diff)
	}
}

func TestTable(t *testing.T) {
	s := NewStrategy(nil)
	var cols []string
	for _, c := range s.TableColumns() {
		cols = append(cols, c.Name)
	}
	if diff := cmp.Diff([]string{"Name", "Value", "Global-Default", "Age", "PreemptionPolicy"}, cols); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
	p := pc("high", 1000, func(p *schedulingv1.PriorityClass) { p.GlobalDefault = true })
	DefaultPriorityClass(p)
	row, err := s.TableRow(p)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]interface{}{"high", int64(1000), true, "<unknown>", "PreemptLowerPriority"}, row); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
	if r := Resource(nil); r.Namespaced || r.StoragePrefix != "priorityclasses" || r.ShortNames[0] != "pc" {
		t.Errorf("resource = %+v", r)
	}
}
