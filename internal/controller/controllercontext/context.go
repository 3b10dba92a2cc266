// Package controllercontext is the contract between the controller manager
// and the controllers it runs: what each controller is given (clients,
// shared informers, options) and what it must offer (Start).
package controllercontext

import (
	"context"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
)

// Context is what every controller is built from. Informers are shared:
// a controller asks the factory for the informers it needs while it is
// built; the manager starts the factory after building every controller and
// waits for the caches to sync before calling Start.
type Context struct {
	// Client writes through the API server. Each controller gets a client
	// whose user agent names it (e.g. "skiff-controller-manager/replicaset").
	Client kubernetes.Interface
	// Dynamic and Metadata reach any resource discovery lists (garbage
	// collector, namespace deletion).
	Dynamic  dynamic.Interface
	Metadata metadata.Interface
	// Informers and MetadataInformers are shared by all controllers.
	Informers         informers.SharedInformerFactory
	MetadataInformers metadatainformer.SharedInformerFactory
	// Recorder emits Events with the controller's component name.
	Recorder record.EventRecorder
	// Clock is injected so that tests never sleep for timers.
	Clock clock.WithTicker
	// Options are the manager's tunables (upstream's flags).
	Options Options
}

// Options are upstream's controller-manager durations, overridable by
// flags so integration tests can run them short.
type Options struct {
	// NodeMonitorGracePeriod is how long a node may go without a heartbeat
	// before it is marked Unknown (upstream 50s).
	NodeMonitorGracePeriod time.Duration
	// NodeMonitorPeriod is how often node health is checked (upstream 5s).
	NodeMonitorPeriod time.Duration
	// NodeStartupGracePeriod allows a new node longer to report (upstream 60s).
	NodeStartupGracePeriod time.Duration
	// NodeEvictionRate and SecondaryNodeEvictionRate are evictions per second
	// (upstream 0.1 and 0.01); UnhealthyZoneThreshold 0.55; LargeClusterSizeThreshold 50.
	NodeEvictionRate          float64
	SecondaryNodeEvictionRate float64
	UnhealthyZoneThreshold    float64
	LargeClusterSizeThreshold int
	// TerminatedPodGCThreshold is how many terminated pods pod GC keeps
	// (upstream 12500).
	TerminatedPodGCThreshold int
	// ConcurrentSyncs per controller (upstream: 5 for deployments and
	// replicasets, 5 endpoints, 20 garbage collector...). Zero means the
	// controller's own default.
	ConcurrentSyncs map[string]int
	// RootCAPEM is the cluster CA, published as the kube-root-ca.crt
	// ConfigMap in every namespace.
	RootCAPEM []byte
	// ServiceAccountPrivateKeyFile signs the legacy tokens of
	// kubernetes.io/service-account-token Secrets (upstream's
	// --service-account-private-key-file); empty turns that controller off.
	ServiceAccountPrivateKeyFile string
	// ClusterCIDR is the pod network node IPAM hands out node CIDRs from
	// (upstream --cluster-cidr; empty means Skiff's 10.42.0.0/16), in
	// blocks of NodeCIDRMaskSize bits (--node-cidr-mask-size; zero means 24).
	ClusterCIDR      string
	NodeCIDRMaskSize int
	// ClusterSigningCertFile and ClusterSigningKeyFile are the CA the
	// csrsigning controller signs approved certificate requests with
	// (upstream's --cluster-signing-{cert,key}-file); empty disables it.
	ClusterSigningCertFile, ClusterSigningKeyFile string

	// HorizontalPodAutoscalerSyncPeriod is how often each HPA is
	// reconciled (--horizontal-pod-autoscaler-sync-period; 0: upstream's
	// 15 s).
	HorizontalPodAutoscalerSyncPeriod time.Duration

	// ResourceQuotaSyncPeriod is how often every quota's usage is
	// recounted (--resource-quota-sync-period; 0: upstream's 5 minutes).
	ResourceQuotaSyncPeriod time.Duration
}

// Controller is one running reconcile loop.
type Controller interface {
	// Start runs the controller until ctx is done; informers are synced.
	Start(ctx context.Context) error
}

// InitFunc builds one controller. It must not start goroutines: only ask
// for informers and set up state. A nil Controller with a nil error means
// the controller is disabled by its own choice.
type InitFunc func(ctx context.Context, cc Context) (Controller, error)

// ControllerFunc adapts a function to Controller.
type ControllerFunc func(ctx context.Context) error

// Start calls f.
func (f ControllerFunc) Start(ctx context.Context) error { return f(ctx) }
