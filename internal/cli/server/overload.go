package server

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/skiff-sh/skiff/internal/apiserver"
	"github.com/skiff-sh/skiff/internal/server"
)

// OverloadFlags are the API server's limits, named as kube-apiserver's.
type OverloadFlags struct {
	RequestTimeout               time.Duration
	MinRequestTimeout            int
	MaxRequestsInflight          int
	MaxMutatingRequestsInflight  int
	EnablePriorityAndFairness    bool
	HTTP2MaxStreamsPerConnection int
}

func defaultOverloadFlags() OverloadFlags {
	return OverloadFlags{
		RequestTimeout: apiserver.DefaultRequestTimeout, MinRequestTimeout: int(apiserver.DefaultMinRequestTimeout / time.Second),
		MaxRequestsInflight: apiserver.DefaultMaxRequestsInflight, MaxMutatingRequestsInflight: apiserver.DefaultMaxMutatingRequestsInflight,
		EnablePriorityAndFairness: true,
	}
}

func (f *OverloadFlags) addFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&f.RequestTimeout, "request-timeout", f.RequestTimeout, "how long a request that is not a watch, exec, log or proxy may take before it is answered 504")
	fs.IntVar(&f.MinRequestTimeout, "min-request-timeout", f.MinRequestTimeout, "seconds a watch without timeoutSeconds lasts at least (at most twice this, at random; also the cap on timeoutSeconds, doubled)")
	fs.IntVar(&f.MaxRequestsInflight, "max-requests-inflight", f.MaxRequestsInflight, "read-only requests served at once (with API Priority and Fairness, added to --max-mutating-requests-inflight as the server's seats); 0: no limit")
	fs.IntVar(&f.MaxMutatingRequestsInflight, "max-mutating-requests-inflight", f.MaxMutatingRequestsInflight, "mutating requests served at once (see --max-requests-inflight); 0: no limit")
	fs.BoolVar(&f.EnablePriorityAndFairness, "enable-priority-and-fairness", f.EnablePriorityAndFairness, "limit requests by API Priority and Fairness (FlowSchemas, PriorityLevelConfigurations); false: by the max-in-flight limits alone")
	fs.IntVar(&f.HTTP2MaxStreamsPerConnection, "http2-max-streams-per-connection", f.HTTP2MaxStreamsPerConnection, "streams an HTTP/2 client may open on one connection (0: upstream's 100)")
}

// config validates the flags.
func (f OverloadFlags) config() (server.OverloadConfig, error) {
	if f.RequestTimeout < 0 || f.MinRequestTimeout < 0 || f.MaxRequestsInflight < 0 || f.MaxMutatingRequestsInflight < 0 || f.HTTP2MaxStreamsPerConnection < 0 {
		return server.OverloadConfig{}, fmt.Errorf("--request-timeout, --min-request-timeout, --max-*-inflight and --http2-max-streams-per-connection must not be negative")
	}
	c := server.OverloadConfig{
		RequestTimeout: f.RequestTimeout, MinRequestTimeout: time.Duration(f.MinRequestTimeout) * time.Second,
		MaxRequestsInflight: f.MaxRequestsInflight, MaxMutatingRequestsInflight: f.MaxMutatingRequestsInflight,
		DisablePriorityAndFairness: !f.EnablePriorityAndFairness, HTTP2MaxStreamsPerConnection: f.HTTP2MaxStreamsPerConnection,
	}
	// 0 means no limit for the flag, but "default" for the config.
	if c.MaxRequestsInflight == 0 {
		c.MaxRequestsInflight = -1
	}
	if c.MaxMutatingRequestsInflight == 0 {
		c.MaxMutatingRequestsInflight = -1
	}
	return c, nil
}
