// Package kubelet is Skiff's node agent core: it registers the node, keeps
// its Lease and status, and runs the pods bound to it through a CRI runtime
// (containerd). Each pod has one level-triggered worker that reads what the
// runtime shows of the pod, decides what to do with the pure plan package,
// does it (sandbox, image pulls, init containers, sidecars, containers,
// kills with grace), and writes the status computed by podstatus when it
// changed. Probes (prober), the crash-loop back-off (backoff), volumes
// (volume) and the CNI config (cni) are packages of their own.
//
// The surface other node components use (the kubelet API server in
// internal/kubelet/server): GetPods and GetPodByName for the pods the
// kubelet knows,
// RuntimeService and ImageService for the CRI clients, PodLogDir and
// ContainerLogPath for the CRI-format logs under /var/log/pods, and
// ContainerID to find a pod's running container.
package kubelet

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	nodelisters "k8s.io/client-go/listers/node/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/kubelet/backoff"
	"github.com/skiff-sh/skiff/internal/kubelet/cni"
	"github.com/skiff-sh/skiff/internal/kubelet/eviction"
	"github.com/skiff-sh/skiff/internal/kubelet/volume"
)

// Defaults.
const (
	DefaultMaxPods               = 110
	DefaultPodLogsDir            = "/var/log/pods"
	DefaultClusterDomain         = "cluster.local"
	DefaultClusterDNS            = "10.43.0.10"
	DefaultLeaseDuration         = 40 * time.Second
	DefaultStatusReportFrequency = time.Minute
	DefaultResyncInterval        = 10 * time.Second
	DefaultRelistPeriod          = time.Second
	DefaultPort                  = 10250
	// Version is what the node reports as its kubelet version.
	Version = "v1.37.2-skiff"
)

// Options tune the kubelet; the zero value means the defaults, except
// NodeName and RootDir which are required.
type Options struct {
	// NodeName is the Node's name (required).
	NodeName string
	// RootDir holds pod directories (volumes, etc-hosts,
	// termination-message files) under pods/<uid> (required).
	RootDir string
	// PodLogsDir is where the runtime writes container logs (default
	// /var/log/pods).
	PodLogsDir string
	// CNIConfDir receives the CNI config once the node has a pod CIDR;
	// empty leaves networking to the runtime's own configuration.
	CNIConfDir string
	// CNI is the template of that config (bridge, host-local's store,
	// masquerade); the kubelet fills in the pod CIDRs.
	CNI cni.Config
	// CgroupRoot is the cgroup under which pods' kubepods hierarchy lives
	// (upstream's --cgroup-root; default "/": /kubepods/...). Agents
	// sharing a host give each its own.
	CgroupRoot string
	// PodCIDR is set on the Node at registration when it has none (for
	// clusters without a node-IPAM controller).
	PodCIDR string
	// NodeIP is the node's InternalIP (default: the host's primary address).
	NodeIP string
	// NodeLabels are added to the Node's labels; RegisterWithTaints are set
	// at registration.
	NodeLabels         map[string]string
	RegisterWithTaints []corev1.Taint
	// KubeReserved and SystemReserved are subtracted from capacity for
	// allocatable, as are the memory.available and nodefs.available hard
	// eviction thresholds.
	KubeReserved   corev1.ResourceList
	SystemReserved corev1.ResourceList
	// Eviction configures the eviction manager (evict.go); nil Thresholds
	// means eviction.DefaultHard, an empty non-nil slice none.
	// EvictionInterval is how often it observes the node (default 10 s).
	Eviction         eviction.Config
	EvictionInterval time.Duration
	// Stats observes the node and pods for eviction (default: the host's
	// cgroups, filesystems and CRI stats).
	Stats StatsProvider
	// GC configures image and dead-container garbage collection (gc.go).
	GC GCOptions
	// Metrics receives pod start, pod worker, eviction and image GC
	// measurements (default: none kept).
	Metrics Metrics
	// MaxPods (default 110).
	MaxPods int
	// ClusterDNS and ClusterDomain fill ClusterFirst pods' resolv.conf.
	ClusterDNS    []string
	ClusterDomain string
	// ResolvConf is the host's resolv.conf for DNSDefault pods (default
	// /etc/resolv.conf).
	ResolvConf string
	// Port is the kubelet API port the Node advertises (default 10250).
	Port int
	// LeaseDuration (default 40 s; renewed every quarter of it),
	// StatusReportFrequency (default 1 min), ResyncInterval (default 10 s,
	// how often each pod is synced without an event) and RelistPeriod
	// (default 1 s, how often the runtime is checked for changes).
	LeaseDuration         time.Duration
	StatusReportFrequency time.Duration
	ResyncInterval        time.Duration
	RelistPeriod          time.Duration
	// Clock (default the real one).
	Clock clock.Clock
}

func (o *Options) defaults() {
	if o.PodLogsDir == "" {
		o.PodLogsDir = DefaultPodLogsDir
	}
	if o.MaxPods <= 0 {
		o.MaxPods = DefaultMaxPods
	}
	if o.ClusterDomain == "" {
		o.ClusterDomain = DefaultClusterDomain
	}
	if o.ClusterDNS == nil {
		o.ClusterDNS = []string{DefaultClusterDNS}
	}
	if o.ResolvConf == "" {
		o.ResolvConf = "/etc/resolv.conf"
	}
	if o.Port == 0 {
		o.Port = DefaultPort
	}
	if o.LeaseDuration <= 0 {
		o.LeaseDuration = DefaultLeaseDuration
	}
	if o.StatusReportFrequency <= 0 {
		o.StatusReportFrequency = DefaultStatusReportFrequency
	}
	if o.ResyncInterval <= 0 {
		o.ResyncInterval = DefaultResyncInterval
	}
	if o.RelistPeriod <= 0 {
		o.RelistPeriod = DefaultRelistPeriod
	}
	if o.Eviction.Thresholds == nil {
		o.Eviction.Thresholds, _ = eviction.Parse(eviction.DefaultHard, "", "")
	}
	if o.EvictionInterval <= 0 {
		o.EvictionInterval = DefaultEvictionInterval
	}
	o.GC.defaults()
	if o.Metrics == nil {
		o.Metrics = noMetrics{}
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
}

// Kubelet runs the pods bound to one node.
type Kubelet struct {
	client  kubernetes.Interface
	runtime internalapi.RuntimeService
	images  internalapi.ImageManagerService
	opts    Options
	clock   clock.Clock

	ready     chan struct{}
	readyOnce sync.Once

	recorder      record.EventRecorder
	broadcaster   record.EventBroadcaster
	volumes       *volume.Manager
	crashBackoff  *backoff.Backoff
	imageBackoff  *backoff.Backoff
	probes        *probeManager
	serviceLister corelisters.ServiceLister
	podLister     corelisters.PodLister
	// runtimeClasses resolve a pod's runtimeClassName to its CRI handler
	// (runtimeclass.go).
	runtimeClasses nodelisters.RuntimeClassLister
	// configMaps and secrets hold the objects the pods reference, each
	// kept by a watch of its own (objectcache.go).
	configMaps *objectCache
	secrets    *objectCache

	runtimeName    string
	runtimeVersion string

	stats   StatsProvider
	metrics Metrics

	mu           sync.Mutex
	workers      map[types.UID]*podWorker
	pods         map[types.UID]*corev1.Pod // as last seen by the informer
	admitted     map[types.UID]bool
	syncs        map[types.UID]*podSync
	ctx          context.Context
	node         *corev1.Node
	networkReady bool
	hostAddrs    []string
	// handlers are the runtime's handlers for status.runtimeHandlers.
	handlers []corev1.NodeRuntimeHandler
	// statusKick asks the status loop for a check now.
	statusKick chan struct{}
	// containerSnap is the last relist's containers by "<pod uid>/<name>"
	// (the probes read it instead of asking the runtime each second).
	containerSnap map[string][]*runtimeapi.Container
	// evictionState and pressure are the eviction manager's (evict.go).
	evictionState eviction.State
	pressure      []corev1.NodeConditionType
	// imagesLastUsed is when image GC last saw each image in use (gc.go).
	imagesLastUsed  map[string]time.Time
	imagesFirstSeen map[string]time.Time
	// alloc are the pods' allocated resources (resize.go).
	alloc *allocations
}

// New returns a kubelet for the node opts.NodeName that talks to the API
// through client and to the runtime through the CRI services. It does
// nothing until Start.
func New(client kubernetes.Interface, rs internalapi.RuntimeService, is internalapi.ImageManagerService, opts Options) *Kubelet {
	opts.defaults()
	k := &Kubelet{
		client:       client,
		runtime:      rs,
		images:       is,
		opts:         opts,
		clock:        opts.Clock,
		ready:        make(chan struct{}),
		crashBackoff: backoff.New(opts.Clock, 0, 0),
		imageBackoff: backoff.New(opts.Clock, 0, 0),
		workers:      map[types.UID]*podWorker{},
		pods:         map[types.UID]*corev1.Pod{},
		admitted:     map[types.UID]bool{},
		statusKick:   make(chan struct{}, 1),
		runtimeName:  "containerd",
		metrics:      opts.Metrics,
		configMaps:   newConfigMapCache(client),
		secrets:      newSecretCache(client),
	}
	k.alloc = loadAllocations("")
	if opts.RootDir != "" {
		k.alloc = loadAllocations(allocationsPath(opts.RootDir))
	}
	k.stats = opts.Stats
	if k.stats == nil {
		k.stats = newHostStats(k)
	}
	k.volumes = volume.NewManager(opts.RootDir, k)
	k.volumes.Allocatable = k.allocatable
	k.volumes.Tokens = volume.NewTokens(k, opts.Clock)
	k.volumes.Certificates = volume.NewCertificates(k, opts.Clock)
	k.volumes.Certificates.Event = func(pod *corev1.Pod, eventType, reason, message string) {
		if k.recorder != nil {
			k.recorder.Event(pod, eventType, reason, message)
		}
	}
	k.volumes.TrustBundles = k
	k.probes = newProbeManager(k)
	return k
}

// Ready is closed once the node is registered and the pod informer synced.
func (k *Kubelet) Ready() <-chan struct{} { return k.ready }

// Start runs the kubelet until ctx ends.
func (k *Kubelet) Start(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("node", k.opts.NodeName)
	ctx = klog.NewContext(ctx, logger)
	if k.opts.NodeName == "" || k.opts.RootDir == "" {
		return fmt.Errorf("kubelet: NodeName and RootDir are required")
	}
	if err := os.MkdirAll(filepath.Join(k.opts.RootDir, "pods"), 0o750); err != nil {
		return fmt.Errorf("kubelet: %w", err)
	}
	if err := os.MkdirAll(k.opts.PodLogsDir, 0o755); err != nil {
		return fmt.Errorf("kubelet: %w", err)
	}

	k.mu.Lock()
	k.ctx = ctx
	k.mu.Unlock()
	if err := k.waitRuntime(ctx); err != nil {
		return err
	}

	k.broadcaster = record.NewBroadcaster(record.WithContext(ctx))
	k.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: k.client.CoreV1().Events("")})
	defer k.broadcaster.Shutdown()
	k.recorder = k.broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: k.opts.NodeName})

	if err := k.registerNode(ctx); err != nil {
		return err
	}

	podFactory := informers.NewSharedInformerFactoryWithOptions(k.client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", k.opts.NodeName).String()
		}))
	podInformer := podFactory.Core().V1().Pods()
	k.podLister = podInformer.Lister()
	_, _ = podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { k.podChanged(ctx, obj) },
		UpdateFunc: func(_, obj any) { k.podChanged(ctx, obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				k.podDeleted(ctx, p)
			}
		},
	})
	nodeFactory := informers.NewSharedInformerFactoryWithOptions(k.client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", k.opts.NodeName).String()
		}))
	nodeInformer := nodeFactory.Core().V1().Nodes().Informer()
	_, _ = nodeInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { k.nodeChanged(ctx, obj.(*corev1.Node)) },
		UpdateFunc: func(_, obj any) { k.nodeChanged(ctx, obj.(*corev1.Node)) },
	})
	svcFactory := informers.NewSharedInformerFactory(k.client, 0)
	k.serviceLister = svcFactory.Core().V1().Services().Lister()
	svcFactory.Core().V1().Services().Informer()
	rcInformer := svcFactory.Node().V1().RuntimeClasses()
	k.runtimeClasses = rcInformer.Lister()
	rcInformer.Informer()

	defer podFactory.Shutdown()
	defer nodeFactory.Shutdown()
	defer svcFactory.Shutdown()
	// Shutdown waits for the informers, which stop only with ctx: cancel it
	// first (defers run last-in first-out) so an early error cannot hang here.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	podFactory.Start(ctx.Done())
	nodeFactory.Start(ctx.Done())
	svcFactory.Start(ctx.Done())
	for _, synced := range []cache.InformerSynced{podInformer.Informer().HasSynced, nodeInformer.HasSynced} {
		if !cache.WaitForCacheSync(ctx.Done(), synced) {
			return ctx.Err()
		}
	}
	// Services matter for env vars only: wait a little, not forever.
	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	cache.WaitForCacheSync(waitCtx.Done(), svcFactory.Core().V1().Services().Informer().HasSynced, rcInformer.Informer().HasSynced)
	cancel()

	var wg sync.WaitGroup
	run := func(f func(context.Context)) {
		wg.Add(1)
		go func() { defer wg.Done(); f(ctx) }()
	}
	run(k.leaseLoop)
	run(k.statusLoop)
	run(k.relistLoop)
	run(k.housekeeping)
	run(k.evictionLoop)
	run(k.gcLoop)
	k.cleanupOrphans(ctx)
	k.readyOnce.Do(func() { close(k.ready) })
	logger.Info("Kubelet ready", "runtime", k.runtimeName+"://"+k.runtimeVersion)

	<-ctx.Done()
	k.stopWorkers()
	wg.Wait()
	return nil
}

// waitRuntime waits until the runtime answers Version.
func (k *Kubelet) waitRuntime(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	for i := 0; ; i++ {
		v, err := k.runtime.Version(ctx, "v1")
		if err == nil {
			k.runtimeName = v.RuntimeName
			k.runtimeVersion = v.RuntimeVersion
			return nil
		}
		if i%10 == 0 {
			logger.Info("Waiting for the container runtime", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-k.clock.After(500 * time.Millisecond):
		}
	}
}

// baseCtx is the context Start runs under (for goroutines started later).
func (k *Kubelet) baseCtx() context.Context {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ctx == nil {
		return context.Background()
	}
	return k.ctx
}

// ---- The surface for other node components. ----

// GetPods returns the pods bound to this node that the kubelet knows.
func (k *Kubelet) GetPods() []*corev1.Pod {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]*corev1.Pod, 0, len(k.pods))
	for _, p := range k.pods {
		out = append(out, p)
	}
	return out
}

// GetPodByName returns the pod namespace/name if it is bound to this node,
// with the status the kubelet last wrote (the informer's copy may not have
// it yet: a client that saw the pod Running asks for its logs at once).
// While a pod of the name is being deleted and its replacement (a
// StatefulSet's) is already here, the replacement is the one returned.
func (k *Kubelet) GetPodByName(namespace, name string) (*corev1.Pod, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var found *corev1.Pod
	for _, p := range k.pods {
		if p.Namespace != namespace || p.Name != name {
			continue
		}
		if found == nil || newerPod(p, found) {
			found = p
		}
	}
	if found == nil {
		return nil, false
	}
	if ps := k.syncs[found.UID]; ps != nil && ps.sent != nil {
		found = found.DeepCopy()
		found.Status = *ps.sent.DeepCopy()
	}
	return found, true
}

// newerPod: a pod not being deleted wins over one that is, then the later
// created.
func newerPod(a, b *corev1.Pod) bool {
	if (a.DeletionTimestamp == nil) != (b.DeletionTimestamp == nil) {
		return a.DeletionTimestamp == nil
	}
	return b.CreationTimestamp.Before(&a.CreationTimestamp)
}

// RuntimeService is the CRI runtime client.
func (k *Kubelet) RuntimeService() internalapi.RuntimeService { return k.runtime }

// ImageService is the CRI image client.
func (k *Kubelet) ImageService() internalapi.ImageManagerService { return k.images }

// NodeName is the node this kubelet runs.
func (k *Kubelet) NodeName() string { return k.opts.NodeName }

// PodLogDir is the directory of a pod's container logs:
// <logs>/<namespace>_<name>_<uid>.
func (k *Kubelet) PodLogDir(namespace, name string, uid types.UID) string {
	return filepath.Join(k.opts.PodLogsDir, namespace+"_"+name+"_"+string(uid))
}

// ContainerLogPath is the CRI-format log of one run (restart count) of a
// container.
func (k *Kubelet) ContainerLogPath(namespace, name string, uid types.UID, container string, restartCount int) string {
	return filepath.Join(k.PodLogDir(namespace, name, uid), containerLogPath(container, restartCount))
}

// ContainerID returns the runtime id of the newest instance of a pod's
// container (previous selects the one before it) and whether it is running.
func (k *Kubelet) ContainerID(ctx context.Context, uid types.UID, container string, previous bool) (id string, running bool, err error) {
	st, err := k.readState(ctx, string(uid))
	if err != nil {
		return "", false, err
	}
	c := st.Latest(container)
	if previous {
		c = st.Previous(container)
	}
	if c == nil {
		return "", false, fmt.Errorf("container %q of pod %s not found", container, uid)
	}
	return c.ID, c.State == "running", nil
}

// ---- Sources for volumes and env. ----

// ConfigMap reads a ConfigMap (volume.Getter).
// Read from the watch of each referenced ConfigMap (objectcache.go); the
// object is shared: callers do not change it.
func (k *Kubelet) ConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error) {
	obj, err := k.configMaps.read(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return obj.(*corev1.ConfigMap), nil
}

// Secret reads a Secret (volume.Getter).
// Read from the watch of each referenced Secret (objectcache.go), shared as
// ConfigMap's.
func (k *Kubelet) Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	obj, err := k.secrets.read(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return obj.(*corev1.Secret), nil
}

// RequestToken asks for a service-account token as this node
// (volume.TokenRequester).
func (k *Kubelet) RequestToken(ctx context.Context, namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	return k.client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, tr, metav1.CreateOptions{})
}

// CreatePodCertificateRequest asks a signer for a pod's certificate
// (volume.CertificateRequester).
func (k *Kubelet) CreatePodCertificateRequest(ctx context.Context, pcr *certificatesv1.PodCertificateRequest) (*certificatesv1.PodCertificateRequest, error) {
	return k.client.CertificatesV1().PodCertificateRequests(pcr.Namespace).Create(ctx, pcr, metav1.CreateOptions{})
}

// GetPodCertificateRequest reads a request (volume.CertificateRequester).
func (k *Kubelet) GetPodCertificateRequest(ctx context.Context, namespace, name string) (*certificatesv1.PodCertificateRequest, error) {
	return k.client.CertificatesV1().PodCertificateRequests(namespace).Get(ctx, name, metav1.GetOptions{})
}

// ServiceAccountUID is the UID of a pod's service account
// (volume.CertificateRequester).
func (k *Kubelet) ServiceAccountUID(ctx context.Context, namespace, name string) (types.UID, error) {
	sa, err := k.client.CoreV1().ServiceAccounts(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return sa.UID, nil
}

// NodeUID is the UID of this node's Node (volume.CertificateRequester).
func (k *Kubelet) NodeUID() types.UID {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.node == nil {
		return ""
	}
	return k.node.UID
}

// ClusterTrustBundle reads a bundle (volume.TrustBundleGetter).
func (k *Kubelet) ClusterTrustBundle(ctx context.Context, name string) (*certificatesv1.ClusterTrustBundle, error) {
	return k.client.CertificatesV1().ClusterTrustBundles().Get(ctx, name, metav1.GetOptions{})
}

// ClusterTrustBundles lists the bundles matching sel
// (volume.TrustBundleGetter).
func (k *Kubelet) ClusterTrustBundles(ctx context.Context, sel labels.Selector) ([]certificatesv1.ClusterTrustBundle, error) {
	l, err := k.client.CertificatesV1().ClusterTrustBundles().List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// PersistentVolumeClaim reads a claim (volume.Getter).
func (k *Kubelet) PersistentVolumeClaim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	return k.client.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
}

// PersistentVolume reads a volume (volume.Getter).
func (k *Kubelet) PersistentVolume(ctx context.Context, name string) (*corev1.PersistentVolume, error) {
	return k.client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
}

func (k *Kubelet) allocatable() corev1.ResourceList {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.node == nil {
		return nil
	}
	return k.node.Status.Allocatable
}

func (k *Kubelet) memoryCapacity() int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.node == nil {
		return 0
	}
	return k.node.Status.Capacity.Memory().Value()
}

func (k *Kubelet) hostIPs() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.hostAddrs...)
}

// primaryAddress is the address of the default route's interface (IPv4
// first), found by "connecting" a UDP socket; loopback if there is none.
func primaryAddress() string {
	for _, target := range []string{"192.0.2.1:9", "[2001:db8::1]:9"} {
		c, err := net.Dial("udp", target)
		if err != nil {
			continue
		}
		ip := c.LocalAddr().(*net.UDPAddr).IP
		c.Close()
		if !ip.IsLoopback() && !ip.IsUnspecified() {
			return ip.String()
		}
	}
	return "127.0.0.1"
}

func arch() string { return runtime.GOARCH }

func leaseFor(node *corev1.Node, name string, duration time.Duration, now time.Time) *coordinationv1.Lease {
	secs := int32(duration / time.Second)
	renew := metav1.NewMicroTime(now)
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: corev1.NamespaceNodeLease},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       &name,
			LeaseDurationSeconds: &secs,
			RenewTime:            &renew,
		},
	}
	if node != nil && node.UID != "" {
		l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}
	}
	return l
}
