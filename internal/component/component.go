// Package component holds what Skiff's control-plane components (the
// controller manager and the scheduler) share beside the API: their health
// and metrics endpoints, and running their work only while they hold a
// leader-election Lease.
package component

import (
	"context"
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
// Lease) and /metrics from metrics. It returns the address it bound and a
// func that shuts the server down.
func Serve(ctx context.Context, name, addr string, metrics prometheus.Gatherer, watchdog *leaderelection.HealthzAdaptor) (string, func(), error) {
	return ServeWithAuth(ctx, name, addr, metrics, watchdog, nil)
}

// ServeWithAuth is Serve with /metrics behind auth (auth.go) when auth is
// not nil.
func ServeWithAuth(ctx context.Context, name, addr string, metrics prometheus.Gatherer, watchdog *leaderelection.HealthzAdaptor, auth *Auth) (string, func(), error) {
	return serve(ctx, name, addr, metrics, watchdog, auth, false)
}

// ServeWithProfiling is ServeWithAuth that also serves Go's profiles
// under /debug/pprof/ behind the same auth, as upstream components do with
// --profiling.
func ServeWithProfiling(ctx context.Context, name, addr string, metrics prometheus.Gatherer, watchdog *leaderelection.HealthzAdaptor, auth *Auth) (string, func(), error) {
	return serve(ctx, name, addr, metrics, watchdog, auth, true)
}

func serve(ctx context.Context, name, addr string, metrics prometheus.Gatherer, watchdog *leaderelection.HealthzAdaptor, auth *Auth, profiling bool) (string, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("%s: listen on %s: %w", name, addr, err)
	}
	mux := http.NewServeMux()
	healthz := func(w http.ResponseWriter, r *http.Request) {
		if watchdog != nil {
			if err := watchdog.Check(r); err != nil {
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
	var metricsHandler http.Handler = promhttp.HandlerFor(metrics, promhttp.HandlerOpts{})
	if auth != nil {
		metricsHandler = auth.Wrap(metricsHandler)
	}
	mux.Handle("/metrics", metricsHandler)
	if profiling {
		guard := func(h http.Handler) http.Handler { return h }
		if auth != nil {
			guard = auth.Wrap
		}
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
}

// RunLeading runs run while this process holds the Lease, releasing it when
// ctx ends. It returns run's error, nil when ctx ended, or an error when
// leadership was lost.
func RunLeading(ctx context.Context, e Election, run func(context.Context) error) error {
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
	if runErr != nil {
		return runErr
	}
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("%s: leader election lost", e.Name)
}
