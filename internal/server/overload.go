package server

import (
	"time"

	"github.com/skiff-sh/skiff/internal/apiserver"
)

// OverloadConfig is the API server's overload protection, as
// kube-apiserver's flags set it (zero values: upstream's defaults).
type OverloadConfig struct {
	RequestTimeout               time.Duration
	MinRequestTimeout            time.Duration
	MaxRequestsInflight          int
	MaxMutatingRequestsInflight  int
	DisablePriorityAndFairness   bool
	HTTP2MaxStreamsPerConnection int
}

// applyTo copies the settings into the API server's config.
func (o OverloadConfig) applyTo(c apiserver.Config) apiserver.Config {
	c.RequestTimeout, c.MinRequestTimeout = o.RequestTimeout, o.MinRequestTimeout
	c.MaxRequestsInflight, c.MaxMutatingRequestsInflight = o.MaxRequestsInflight, o.MaxMutatingRequestsInflight
	c.DisablePriorityAndFairness = o.DisablePriorityAndFairness
	c.HTTP2MaxStreamsPerConnection = o.HTTP2MaxStreamsPerConnection
	return c
}
