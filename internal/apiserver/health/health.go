// Package health serves the API server's health endpoints, /healthz, /livez
// and /readyz, in upstream's format: "ok" on success, a per-check report with
// ?verbose ("[+]ping ok", "[-]etcd failed: reason withheld", then
// "readyz check passed"), checks skipped with ?exclude=name, 200 or 500.
// Each check is also served alone at /<endpoint>/<check name>.
package health

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// Check is one named health check. Fn returns nil when healthy; it is given
// the request's context.
type Check struct {
	Name string
	Fn   func(ctx context.Context) error
}

// Options lists the checks of each endpoint. The zero value serves only the
// built-in checks.
type Options struct {
	// Livez checks serve /livez and /healthz, and are part of /readyz too.
	Livez []Check
	// Readyz checks serve /readyz only (e.g. "etcd-readiness",
	// "informer-sync").
	Readyz []Check
}

// Health serves the health endpoints. Every endpoint starts with the "ping"
// check; /readyz also has "shutdown", which fails once SetShuttingDown was
// called so that load balancers stop sending traffic before the server stops.
type Health struct {
	mu           sync.RWMutex
	endpoints    map[string][]Check
	shuttingDown atomic.Bool
}

// Paths are the root paths Health serves; the handler chain lets them through
// without authentication.
var Paths = []string{"/healthz", "/livez", "/readyz"}

// New builds the handler.
func New(opts Options) *Health {
	h := &Health{}
	ping := Check{Name: "ping", Fn: func(context.Context) error { return nil }}
	shutdown := Check{Name: "shutdown", Fn: func(context.Context) error {
		if h.shuttingDown.Load() {
			return fmt.Errorf("process is shutting down")
		}
		return nil
	}}
	live := append([]Check{ping}, opts.Livez...)
	ready := append(append(append([]Check{ping}, opts.Livez...), opts.Readyz...), shutdown)
	h.endpoints = map[string][]Check{
		"healthz": live,
		"livez":   live,
		"readyz":  ready,
	}
	return h
}

// AddReadyz adds a check to /readyz (before "shutdown"), for a
// component started after the server (cluster DNS in `skiff server`).
// A check of the same name is replaced.
func (h *Health) AddReadyz(c Check) {
	h.mu.Lock()
	defer h.mu.Unlock()
	old := h.endpoints["readyz"]
	checks := make([]Check, 0, len(old)+1)
	for _, o := range old {
		if o.Name != c.Name && o.Name != "shutdown" {
			checks = append(checks, o)
		}
	}
	if last := old[len(old)-1]; last.Name == "shutdown" {
		checks = append(checks, c, last)
	} else {
		checks = append(checks, c)
	}
	h.endpoints["readyz"] = checks
}

func (h *Health) checks(endpoint string) ([]Check, bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	c, ok := h.endpoints[endpoint]
	return c, ok
}

// SetShuttingDown makes /readyz fail from now on.
func (h *Health) SetShuttingDown() { h.shuttingDown.Store(true) }

// Handles reports whether path is one Health serves.
func (h *Health) Handles(path string) bool {
	endpoint, check, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	checks, ok := h.checks(endpoint)
	if !ok {
		return false
	}
	if check == "" {
		return !strings.HasSuffix(path, "/")
	}
	_, ok = find(checks, check)
	return ok
}

// ServeHTTP serves /healthz, /livez, /readyz and /<endpoint>/<check>; other
// paths get 404.
func (h *Health) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	endpoint, name, hasCheck := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	checks, ok := h.checks(endpoint)
	if !ok || (hasCheck && name == "") {
		http.NotFound(w, r)
		return
	}
	if hasCheck {
		c, ok := find(checks, name)
		if !ok {
			http.NotFound(w, r)
			return
		}
		if err := c.Fn(r.Context()); err != nil {
			http.Error(w, fmt.Sprintf("internal server error: %v", err), http.StatusInternalServerError)
			return
		}
		writeText(w, http.StatusOK, "ok")
		return
	}
	h.serveRoot(w, r, endpoint, checks)
}

func (h *Health) serveRoot(w http.ResponseWriter, r *http.Request, endpoint string, checks []Check) {
	query := r.URL.Query()
	excluded := map[string]bool{}
	for _, n := range query["exclude"] {
		excluded[n] = true
	}
	var out bytes.Buffer
	failed := false
	for _, c := range checks {
		if excluded[c.Name] {
			delete(excluded, c.Name)
			fmt.Fprintf(&out, "[+]%s excluded: ok\n", c.Name)
			continue
		}
		// The root endpoints are public: the reason stays out of the body.
		// Ask /<endpoint>/<check> (authenticated) for it.
		if err := c.Fn(r.Context()); err != nil {
			fmt.Fprintf(&out, "[-]%s failed: reason withheld\n", c.Name)
			failed = true
			continue
		}
		fmt.Fprintf(&out, "[+]%s ok\n", c.Name)
	}
	if len(excluded) > 0 {
		names := make([]string, 0, len(excluded))
		for n := range excluded {
			names = append(names, fmt.Sprintf("%q", n))
		}
		sort.Strings(names)
		fmt.Fprintf(&out, "warn: some health checks cannot be excluded: no matches for %s\n", strings.Join(names, ","))
	}
	if failed {
		// Always verbose on failure, as upstream.
		fmt.Fprintf(&out, "%s check failed", endpoint)
		http.Error(w, out.String(), http.StatusInternalServerError)
		return
	}
	if _, verbose := query["verbose"]; !verbose {
		writeText(w, http.StatusOK, "ok")
		return
	}
	fmt.Fprintf(&out, "%s check passed\n", endpoint)
	writeText(w, http.StatusOK, out.String())
}

func find(checks []Check, name string) (Check, bool) {
	for _, c := range checks {
		if c.Name == name {
			return c, true
		}
	}
	return Check{}, false
}

func writeText(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(body))
}
