package health

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Upstream's addresses of the components componentstatuses probe when they
// do not run in this process: their secure ports on loopback.
const (
	SchedulerHealthz         = "https://127.0.0.1:10259/healthz"
	ControllerManagerHealthz = "https://127.0.0.1:10257/healthz"
)

// Components tells the health of the control plane's other components,
// for componentstatuses: a component running in this process reports
// through the check it was given (Set); any other is probed on its
// healthz address, as upstream probes them (TLS unverified, as upstream;
// plain HTTP when the port answers HTTP). A component that does not
// answer is unhealthy.
type Components struct {
	mu     sync.Mutex
	checks map[string]func(context.Context) error
	urls   map[string]string
	client *http.Client
}

// NewComponents probes the scheduler and controller manager at upstream's
// addresses until Set says otherwise.
func NewComponents() *Components {
	return &Components{
		checks: map[string]func(context.Context) error{},
		urls:   map[string]string{"scheduler": SchedulerHealthz, "controller-manager": ControllerManagerHealthz},
		client: &http.Client{
			Timeout: 2 * time.Second,
			Transport: &http.Transport{
				TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // upstream's componentstatus probe does not verify either
				DisableKeepAlives: true,
			},
		},
	}
}

// Set makes name report through check (in-process components).
func (c *Components) Set(name string, check func(context.Context) error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checks[name] = check
}

// SetURL makes name probed at url.
func (c *Components) SetURL(name, url string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.urls[name] = url
	delete(c.checks, name)
}

// Names are the components reported, sorted as upstream lists them.
func (c *Components) Names() []string { return []string{"controller-manager", "scheduler"} }

// Check is nil when name is healthy, else why not.
func (c *Components) Check(ctx context.Context, name string) error {
	c.mu.Lock()
	check, url := c.checks[name], c.urls[name]
	c.mu.Unlock()
	if check != nil {
		return check(ctx)
	}
	if url == "" {
		return fmt.Errorf("no health check for %s", name)
	}
	err := c.probe(ctx, url)
	if err != nil && strings.HasPrefix(url, "https://") && strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") {
		err = c.probe(ctx, "http://"+strings.TrimPrefix(url, "https://"))
	}
	return err
}

func (c *Components) probe(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}
