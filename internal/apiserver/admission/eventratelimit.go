package admission

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
	"k8s.io/utils/lru"
	"sigs.k8s.io/yaml"
)

// EventRateLimit is upstream's EventRateLimit: creates and updates of
// core Events are refused with 429 ("limit reached on type Namespace for
// key ns") once a token bucket of the configuration is empty. Buckets are
// kept per limit type: Server (one), Namespace, User, SourceAndObject
// (the event's source and involved object), the last three in an LRU of
// cacheSize (default 4096).
type EventRateLimit struct {
	limits []*eventLimit
}

type eventLimit struct {
	typ     string
	newRate func() flowcontrol.RateLimiter
	single  flowcontrol.RateLimiter // Server
	cache   *lru.Cache
	key     func(*Attributes) string
}

// EventRateLimitConfig is eventratelimit.admission.k8s.io/v1alpha1
// Configuration.
type EventRateLimitConfig struct {
	APIVersion string                `json:"apiVersion"`
	Kind       string                `json:"kind"`
	Limits     []EventRateLimitLimit `json:"limits"`
}

// EventRateLimitLimit is one limit of the configuration.
type EventRateLimitLimit struct {
	Type      string `json:"type"`
	QPS       int32  `json:"qps"`
	Burst     int32  `json:"burst"`
	CacheSize int32  `json:"cacheSize,omitempty"`
}

const defaultEventCacheSize = 4096

// NewEventRateLimit builds the plugin from its configuration (required,
// as upstream). c is the buckets' clock (nil: the real one).
func NewEventRateLimit(config []byte, c clock.Clock) (*EventRateLimit, error) {
	if len(config) == 0 {
		return nil, errors.New("EventRateLimit: a configuration is required (--admission-control-config-file)")
	}
	var cfg EventRateLimitConfig
	if err := yaml.UnmarshalStrict(config, &cfg); err != nil {
		return nil, fmt.Errorf("EventRateLimit configuration: %w", err)
	}
	if cfg.APIVersion != "eventratelimit.admission.k8s.io/v1alpha1" || cfg.Kind != "Configuration" {
		return nil, fmt.Errorf("EventRateLimit configuration: apiVersion %q kind %q: want eventratelimit.admission.k8s.io/v1alpha1 Configuration", cfg.APIVersion, cfg.Kind)
	}
	if len(cfg.Limits) == 0 {
		return nil, errors.New("EventRateLimit configuration: limits: Required value: must not be empty")
	}
	if c == nil {
		c = clock.RealClock{}
	}
	p := &EventRateLimit{}
	for i, l := range cfg.Limits {
		if l.QPS <= 0 || l.Burst <= 0 || l.CacheSize < 0 {
			return nil, fmt.Errorf("EventRateLimit configuration: limits[%d]: qps and burst must be positive, cacheSize not negative", i)
		}
		newRate := func() flowcontrol.RateLimiter {
			return flowcontrol.NewTokenBucketRateLimiterWithClock(float32(l.QPS), int(l.Burst), c)
		}
		el := &eventLimit{typ: l.Type, newRate: newRate}
		switch l.Type {
		case "Server":
			el.single = newRate()
		case "Namespace":
			el.key = func(a *Attributes) string { return a.Namespace }
		case "User":
			el.key = func(a *Attributes) string {
				if a.User == nil {
					return ""
				}
				return a.User.Name
			}
		case "SourceAndObject":
			el.key = sourceAndObjectKey
		default:
			return nil, fmt.Errorf("EventRateLimit configuration: limits[%d].type: Unsupported value: %q: supported values: \"Namespace\", \"Server\", \"SourceAndObject\", \"User\"", i, l.Type)
		}
		if el.single == nil {
			size := int(l.CacheSize)
			if size == 0 {
				size = defaultEventCacheSize
			}
			el.cache = lru.New(size)
		}
		p.limits = append(p.limits, el)
	}
	return p, nil
}

func sourceAndObjectKey(a *Attributes) string {
	ev, ok := a.Object.(*corev1.Event)
	if !ok {
		return ""
	}
	o := ev.InvolvedObject
	return strings.Join([]string{ev.Source.Component, ev.Source.Host, o.Kind, o.Namespace, o.Name, string(o.UID), o.APIVersion}, "")
}

// Name is the upstream name.
func (*EventRateLimit) Name() string { return "EventRateLimit" }

// Handles creates and updates.
func (*EventRateLimit) Handles(op Operation) bool { return op == Create || op == Update }

// Validate takes a token from each limit's bucket.
func (p *EventRateLimit) Validate(_ context.Context, a *Attributes) error {
	if a.Kind.Group != "" || a.Kind.Kind != "Event" || a.DryRun {
		return nil
	}
	var msgs []string
	for _, l := range p.limits {
		rl, key := l.single, ""
		if rl == nil {
			key = l.key(a)
			if v, ok := l.cache.Get(key); ok {
				rl = v.(flowcontrol.RateLimiter)
			} else {
				rl = l.newRate()
				l.cache.Add(key, rl)
			}
		}
		if !rl.TryAccept() {
			msgs = append(msgs, fmt.Sprintf("limit reached on type %v for key %v", l.typ, key))
		}
	}
	switch len(msgs) {
	case 0:
		return nil
	case 1:
		return apierrors.NewTooManyRequestsError(msgs[0])
	}
	return apierrors.NewTooManyRequestsError("[" + strings.Join(msgs, ", ") + "]")
}
