package admission

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/skiff-sh/skiff/internal/apiserver/authn"
)

func TestEventRateLimit(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	p, err := NewEventRateLimit([]byte(`apiVersion: eventratelimit.admission.k8s.io/v1alpha1
kind: Configuration
limits:
- {type: Namespace, qps: 1, burst: 2}
- {type: User, qps: 1, burst: 3}
`), clk)
	if err != nil {
		t.Fatal(err)
	}
	event := func(ns, user string) *Attributes {
		return &Attributes{Operation: Create, Kind: schema.GroupVersionKind{Version: "v1", Kind: "Event"}, Namespace: ns,
			User: &authn.User{Name: user}, Object: &corev1.Event{}}
	}
	steps := []struct {
		name string
		a    *Attributes
		want string // "" admitted
	}{
		{"a/alice 1", event("a", "alice"), ""},
		{"a/alice 2", event("a", "alice"), ""},
		{"a/alice 3: namespace bucket empty", event("a", "alice"), "limit reached on type Namespace for key a"},
		{"b/alice: user bucket empty", event("b", "alice"), "limit reached on type User for key alice"},
		{"b/bob", event("b", "bob"), ""},
		{"a/bob: both", event("a", "bob"), "limit reached on type Namespace for key a"},
		{"not an event", &Attributes{Operation: Create, Kind: schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, Namespace: "a"}, ""},
		{"events.k8s.io is not limited", &Attributes{Operation: Create, Kind: schema.GroupVersionKind{Group: "events.k8s.io", Version: "v1", Kind: "Event"}, Namespace: "a"}, ""},
	}
	for _, s := range steps {
		err := p.Validate(context.Background(), s.a)
		switch {
		case s.want == "" && err != nil:
			t.Errorf("%s: %v", s.name, err)
		case s.want != "" && (!apierrors.IsTooManyRequests(err) || err.Error() != "Too many requests: "+s.want):
			t.Errorf("%s: %v, want 429 %q", s.name, err, s.want)
		}
	}
	clk.Step(time.Second) // one token back in each bucket
	if err := p.Validate(context.Background(), event("a", "carol")); err != nil {
		t.Errorf("after a second: %v", err)
	}

	for _, bad := range []string{"", "apiVersion: v1\nkind: Configuration\nlimits: [{type: Server, qps: 1, burst: 1}]",
		"apiVersion: eventratelimit.admission.k8s.io/v1alpha1\nkind: Configuration\nlimits: []",
		"apiVersion: eventratelimit.admission.k8s.io/v1alpha1\nkind: Configuration\nlimits: [{type: Pod, qps: 1, burst: 1}]",
		"apiVersion: eventratelimit.admission.k8s.io/v1alpha1\nkind: Configuration\nlimits: [{type: Server, qps: 0, burst: 1}]"} {
		if _, err := NewEventRateLimit([]byte(bad), clk); err == nil {
			t.Errorf("configuration %q accepted", bad)
		}
	}
}
