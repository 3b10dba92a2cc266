package metrics

import "github.com/skiff-sh/skiff/internal/storage"

// Metrics is what the etcd store reports its request durations to.
var _ storage.Observer = (*Metrics)(nil)
