// Package component holds what Skiff's control-plane components (the
// controller manager and the scheduler) share beside the API: their health
// and metrics endpoints, and running their work only while they hold a
// leader-election Lease.
package component

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// Serve listens on addr and serves /healthz, /livez and /readyz (which fail
// with "[-]leaderElection failed" when watchdog, if set, reports an expired
// Lease) and /metrics from metrics, over plain HTTP. It returns the
// address it bound and a func that shuts the server down.
func Serve(ctx context.Context, name, addr string, metrics prometheus.Gatherer, watchdog *leaderelection.HealthzAdaptor) (string, func(), error) {
	return ServeEndpoints(ctx, name, addr, Endpoints{Metrics: metrics, WatchDog: watchdog})
}

// Endpoints are what a component serves beside its work.
type Endpoints struct {
	// Metrics is served on /metrics.
	Metrics prometheus.Gatherer
	// WatchDog, when set, fails the health paths once the Lease expired.
	WatchDog *leaderelection.HealthzAdaptor
	// Auth, when set, guards /metrics and the profiles (auth.go).
	Auth *Auth
	// Profiling serves Go's profiles under /debug/pprof/, as upstream
	// components do with --profiling.
	Profiling bool
	// TLS, when set, serves HTTPS (the secure port, secure.go); else plain
	// HTTP.
	TLS *tls.Config
}

// ServeEndpoints listens on addr and serves e: /healthz, /livez, /readyz
// always open, /metrics and the profiles behind e.Auth.
func ServeEndpoints(ctx context.Context, name, addr string, e Endpoints) (string, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("%s: listen on %s: %w", name, addr, err)
	}
	if e.TLS != nil {
		ln = tls.NewListener(ln, e.TLS)
	}
	mux := http.NewServeMux()
	healthz := func(w http.ResponseWriter, r *http.Request) {
		if e.WatchDog != nil {
			if err := e.WatchDog.Check(r); err != nil {
				http.Error(w, "[-]leaderElection failed: "+err.Error(), http.StatusInternalServerError)
				return
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok"))
	}
	mux.HandleFunc("/healthz", healthz)
	mux.HandleFunc("/livez", healthz)
	mux.HandleFunc("/readyz", healthz)
	guard := func(h http.Handler) http.Handler { return h }
	if e.Auth != nil {
		guard = e.Auth.Wrap
	}
	mux.Handle("/metrics", guard(promhttp.HandlerFor(e.Metrics, promhttp.HandlerOpts{})))
	if e.Profiling {
		mux.Handle("/debug/pprof/", guard(http.HandlerFunc(pprof.Index)))
		mux.Handle("/debug/pprof/cmdline", guard(http.HandlerFunc(pprof.Cmdline)))
		mux.Handle("/debug/pprof/profile", guard(http.HandlerFunc(pprof.Profile)))
		mux.Handle("/debug/pprof/symbol", guard(http.HandlerFunc(pprof.Symbol)))
		mux.Handle("/debug/pprof/trace", guard(http.HandlerFunc(pprof.Trace)))
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.FromContext(ctx).Error(err, "Health and metrics server stopped")
		}
	}()
	return ln.Addr().String(), func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}, nil
}

// Election says which Lease to hold and how.
type Election struct {
	// Name prefixes errors ("controller manager", "scheduler").
	Name string
	// Work names what starts on leading, for the log ("controllers").
	Work                         string
	Client                       kubernetes.Interface
	Namespace, Lease, Identity   string
	LeaseDuration, RenewDeadline time.Duration
	RetryPeriod                  time.Duration
	WatchDog                     *leaderelection.HealthzAdaptor
	// Recampaign: when leadership is lost, stop run and campaign for the
	// Lease again instead of returning ErrLeadershipLost. A component
	// running in its own process exits instead, as upstream's do, and its
	// supervisor starts it again; one inside `skiff server` must not take
	// the API server and etcd down with it.
	Recampaign bool
}

// ErrLeadershipLost is what RunLeading returns (wrapped with the
// component's name) when the Lease was lost.
var ErrLeadershipLost = errors.New("leader election lost")

// RunLeading runs run while this process holds the Lease, releasing it when
// ctx ends. It returns run's error, nil when ctx ended, or ErrLeadershipLost
// when leadership was lost and e.Recampaign is not set; with it, each lost
// term ends run's context, and run runs again at the next one.
func RunLeading(ctx context.Context, e Election, run func(context.Context) error) error {
	for {
		err := runLeadingOnce(ctx, e, run)
		if !e.Recampaign || !errors.Is(err, ErrLeadershipLost) {
			return err
		}
		klog.FromContext(ctx).Info("Leadership lost; campaigning again", "lease", e.Namespace+"/"+e.Lease, "identity", e.Identity)
	}
}

func runLeadingOnce(ctx context.Context, e Election, run func(context.Context) error) error {
	logger := klog.FromContext(ctx)
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: e.Namespace, Name: e.Lease},
		Client:     e.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: e.Identity},
	}
	leCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		runErr  error
		started = make(chan struct{})
		done    = make(chan struct{})
	)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   e.LeaseDuration,
		RenewDeadline:   e.RenewDeadline,
		RetryPeriod:     e.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            e.Lease,
		WatchDog:        e.WatchDog,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				close(started)
				defer close(done)
				logger.Info("Became leader; starting "+e.Work, "identity", e.Identity)
				if err := run(lctx); err != nil {
					runErr = err
					cancel()
				}
			},
			OnStoppedLeading: func() { logger.Info("Stopped leading", "identity", e.Identity) },
			OnNewLeader: func(id string) {
				if id != e.Identity {
					logger.Info("New leader elected", "identity", id)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("%s: leader election: %w", e.Name, err)
	}
	elector.Run(leCtx)
	select {
	case <-started:
		<-done
	default:
	}
	if ctx.Err() != nil {
		// Stopping: what run met as everything it reads stopped with it
		// (an informer that would not take a handler any more, a cache
		// that never synced) is not a failure.
		return nil
	}
	if runErr != nil {
		return runErr
	}
	return fmt.Errorf("%s: %w", e.Name, ErrLeadershipLost)
}
