package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

// WebhookOptions send the events to a remote service, as upstream's
// --audit-webhook-* flags: each POST carries an audit.k8s.io/v1 EventList.
type WebhookOptions struct {
	// ConfigFile is a kubeconfig naming the service (its server URL is
	// posted to) and the credentials to present.
	ConfigFile string
	// Mode is "batch" (default: events are buffered and sent in batches
	// from a goroutine; a full buffer drops events) or "blocking" (each
	// event is sent before the request goes on).
	Mode string
	// BatchBufferSize (default 10000), BatchMaxSize (default 400) and
	// BatchMaxWait (default 30 s) shape the batches.
	BatchBufferSize int
	BatchMaxSize    int
	BatchMaxWait    time.Duration
	// InitialBackoff is the first wait before a failed POST is retried
	// (default 10 s; then ×1.5, five tries in all).
	InitialBackoff time.Duration
}

// Upstream's --audit-webhook-* defaults.
const (
	DefaultWebhookBatchBufferSize = 10000
	DefaultWebhookBatchMaxSize    = 400
	DefaultWebhookBatchMaxWait    = 30 * time.Second
	DefaultWebhookInitialBackoff  = 10 * time.Second
	webhookTries                  = 5
)

// ValidateWebhook checks the options (the kubeconfig is read).
func (o WebhookOptions) Validate() error {
	if o.ConfigFile == "" {
		return nil
	}
	switch o.Mode {
	case "", "batch", "blocking":
	default:
		return fmt.Errorf("--audit-webhook-mode %q: want batch or blocking", o.Mode)
	}
	if o.BatchBufferSize < 0 || o.BatchMaxSize < 0 || o.BatchMaxWait < 0 || o.InitialBackoff < 0 {
		return fmt.Errorf("--audit-webhook-batch-* and --audit-webhook-initial-backoff must not be negative")
	}
	_, err := clientcmd.BuildConfigFromFlags("", o.ConfigFile)
	return err
}

// webhook is the running backend.
type webhook struct {
	opts   WebhookOptions
	url    string
	client *http.Client
	queue  chan *auditv1.Event
	done   chan struct{}
	once   sync.Once
}

func newWebhook(o WebhookOptions) (*webhook, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", o.ConfigFile)
	if err != nil {
		return nil, fmt.Errorf("--audit-webhook-config-file: %w", err)
	}
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("--audit-webhook-config-file: %w", err)
	}
	if client.Timeout == 0 {
		client.Timeout = 30 * time.Second
	}
	if o.Mode == "" {
		o.Mode = "batch"
	}
	if o.BatchBufferSize == 0 {
		o.BatchBufferSize = DefaultWebhookBatchBufferSize
	}
	if o.BatchMaxSize == 0 {
		o.BatchMaxSize = DefaultWebhookBatchMaxSize
	}
	if o.BatchMaxWait == 0 {
		o.BatchMaxWait = DefaultWebhookBatchMaxWait
	}
	if o.InitialBackoff == 0 {
		o.InitialBackoff = DefaultWebhookInitialBackoff
	}
	w := &webhook{opts: o, url: cfg.Host, client: client, done: make(chan struct{})}
	if o.Mode == "batch" {
		w.queue = make(chan *auditv1.Event, o.BatchBufferSize)
		go w.run()
	} else {
		close(w.done)
	}
	return w, nil
}

// process sends ev (blocking mode) or queues it (batch mode; dropped when
// the buffer is full, as upstream).
func (w *webhook) process(ev *auditv1.Event) {
	if w.queue == nil {
		w.send([]auditv1.Event{*ev})
		return
	}
	select {
	case w.queue <- ev.DeepCopy():
	default:
		klog.ErrorS(nil, "Audit webhook buffer full; event dropped", "auditID", ev.AuditID)
	}
}

// run sends a batch when it holds BatchMaxSize events or BatchMaxWait
// after its first, and the rest when the queue is closed.
func (w *webhook) run() {
	defer close(w.done)
	var (
		batch []auditv1.Event
		timer *time.Timer
		wait  <-chan time.Time
	)
	flush := func() {
		if len(batch) > 0 {
			w.send(batch)
			batch = nil
		}
		if timer != nil {
			timer.Stop()
			timer, wait = nil, nil
		}
	}
	for {
		select {
		case ev, ok := <-w.queue:
			if !ok {
				flush()
				return
			}
			batch = append(batch, *ev)
			if len(batch) == 1 {
				timer = time.NewTimer(w.opts.BatchMaxWait)
				wait = timer.C
			}
			if len(batch) >= w.opts.BatchMaxSize {
				flush()
			}
		case <-wait:
			timer, wait = nil, nil
			flush()
		}
	}
}

// send POSTs one EventList, retrying with backoff.
func (w *webhook) send(events []auditv1.Event) {
	list := auditv1.EventList{TypeMeta: metav1.TypeMeta{APIVersion: "audit.k8s.io/v1", Kind: "EventList"}, Items: events}
	for i := range list.Items {
		list.Items[i].TypeMeta = metav1.TypeMeta{APIVersion: "audit.k8s.io/v1", Kind: "Event"}
	}
	body, err := json.Marshal(list)
	if err != nil {
		klog.ErrorS(err, "Audit webhook: events not sent", "events", len(events))
		return
	}
	delay := w.opts.InitialBackoff
	for try := 1; ; try++ {
		err = w.post(body)
		if err == nil {
			return
		}
		if try == webhookTries {
			break
		}
		time.Sleep(delay + time.Duration(rand.Float64()*0.2*float64(delay)))
		delay = delay * 3 / 2
	}
	klog.ErrorS(err, "Audit webhook: events not sent", "events", len(events))
}

func (w *webhook) post(body []byte) error {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := w.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("audit webhook answered %d: %s", resp.StatusCode, bytes.TrimSpace(msg))
	}
	return nil
}

// close sends what is queued and stops.
func (w *webhook) close() {
	w.once.Do(func() {
		if w.queue != nil {
			close(w.queue)
		}
	})
	<-w.done
}
