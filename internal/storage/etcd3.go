package storage

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// Observer is told how long each etcd request took (for
// etcd_request_duration_seconds). It may be nil.
type Observer interface {
	ObserveEtcd(operation, resource string, d time.Duration)
}

// Store is the etcd v3 implementation of Interface for one resource.
type Store struct {
	client   *clientv3.Client
	codec    Codec
	newFunc  func() runtime.Object
	resource string // metric label, e.g. "pods"
	observer Observer
	ttl      int64
	// callTimeout bounds each etcd request (0: only the caller's context).
	callTimeout time.Duration
	// transformer encrypts values at rest (encryption.go); nil: none.
	transformer Transformer

	leaseMu      sync.Mutex
	leaseID      clientv3.LeaseID
	leaseGranted time.Time
}

// StoreOptions are the optional parts of a Store.
type StoreOptions struct {
	Observer Observer
	// TTL, when positive, makes every write expire after about that many
	// seconds (upstream keeps events for an hour this way). Writes within
	// a minute share one etcd lease.
	TTL int64
	// CallTimeout bounds each etcd request, so that a request fails with
	// a timeout (504) instead of hanging while etcd is unreachable
	// (0: only the caller's context bounds it).
	CallTimeout time.Duration
	// Transformer, when set, encrypts values at rest (encryption.go).
	Transformer Transformer
}

// NewStore returns a store for one resource's objects.
func NewStore(client *clientv3.Client, codec Codec, newFunc func() runtime.Object, resource string, opts StoreOptions) *Store {
	return &Store{client: client, codec: codec, newFunc: newFunc, resource: resource, observer: opts.Observer, ttl: opts.TTL, callTimeout: opts.CallTimeout, transformer: opts.Transformer}
}

// callCtx is the context of one etcd request: the caller's, bounded by the
// store's call timeout.
func (s *Store) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.callTimeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, s.callTimeout)
}

// etcdErr maps an etcd client error to the store's: a value over etcd's
// request limit (413), a call that ran out of time while its caller had
// not (504), a compacted or future revision; others pass through.
func (s *Store) etcdErr(ctx context.Context, err error, key string, rev int64) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, rpctypes.ErrRequestTooLarge) || errors.Is(err, rpctypes.ErrGRPCRequestTooLarge) ||
		(status.Code(err) == codes.ResourceExhausted && strings.Contains(err.Error(), "larger than max")) {
		return &Error{Code: ErrCodeRequestTooLarge, Key: key, Msg: "the object is larger than the store's request limit: " + err.Error()}
	}
	if ctx.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded) {
		return &Error{Code: ErrCodeTimeout, Key: key, Msg: fmt.Sprintf("etcd did not answer within %s", s.callTimeout)}
	}
	return mapEtcdErr(err, key, rev)
}

// putOpts attaches the shared lease when the store has a TTL.
func (s *Store) putOpts(ctx context.Context) ([]clientv3.OpOption, error) {
	if s.ttl <= 0 {
		return nil, nil
	}
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	if s.leaseID == 0 || time.Since(s.leaseGranted) > time.Minute {
		cctx, cancel := s.callCtx(ctx)
		resp, err := s.client.Grant(cctx, s.ttl+60)
		cancel()
		if err != nil {
			return nil, s.etcdErr(ctx, err, "", 0)
		}
		s.leaseID, s.leaseGranted = resp.ID, time.Now()
	}
	return []clientv3.OpOption{clientv3.WithLease(s.leaseID)}, nil
}

var _ Interface = (*Store)(nil)

func (s *Store) observe(op string, start time.Time) {
	if s.observer != nil {
		s.observer.ObserveEtcd(op, s.resource, time.Since(start))
	}
}

func formatRV(rev int64) string { return strconv.FormatInt(rev, 10) }

// ParseRV parses a resourceVersion; "" is 0.
func ParseRV(rv string) (int64, error) {
	if rv == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("invalid resource version %q", rv)
	}
	return n, nil
}

func (s *Store) encode(obj runtime.Object) ([]byte, error) {
	// Upstream stores objects without a resourceVersion: the revision is it.
	a, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	rv := a.GetResourceVersion()
	a.SetResourceVersion("")
	data, err := s.codec.Encode(obj)
	a.SetResourceVersion(rv)
	return data, err
}

func (s *Store) decode(data []byte, into runtime.Object, rev int64) error {
	if err := s.codec.Decode(data, into); err != nil {
		if o, ok := s.observer.(DecodeErrorObserver); ok {
			o.ObserveDecodeError(s.resource)
		}
		return newErr(ErrCodeInvalidObj, "", err.Error())
	}
	return setRV(into, rev)
}

func mapEtcdErr(err error, key string, rev int64) error {
	if errors.Is(err, rpctypes.ErrCompacted) {
		return &Error{Code: ErrCodeResourceExpired, Key: key, ResourceVersion: rev, Msg: "required revision has been compacted"}
	}
	if errors.Is(err, rpctypes.ErrFutureRev) {
		return &Error{Code: ErrCodeTooLargeResourceVersion, Key: key, ResourceVersion: rev, Msg: "revision is newer than the store"}
	}
	return err
}

func (s *Store) Create(ctx context.Context, key string, obj, out runtime.Object) error {
	if a, err := meta.Accessor(obj); err == nil && a.GetResourceVersion() != "" {
		return newErr(ErrCodeInvalidObj, key, "resourceVersion should not be set on objects to be created")
	}
	data, err := s.encode(obj)
	if err != nil {
		return err
	}
	if data, err = s.toStorage(key, data); err != nil {
		return err
	}
	popts, err := s.putOpts(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	cctx, cancel := s.callCtx(ctx)
	resp, err := s.client.Txn(cctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(data), popts...)).
		Commit()
	cancel()
	s.observe("create", start)
	if err != nil {
		return s.etcdErr(ctx, err, key, 0)
	}
	if !resp.Succeeded {
		return newErr(ErrCodeKeyExists, key, "")
	}
	if out != nil {
		return copyWithRV(out, obj, resp.Header.Revision)
	}
	return nil
}

// copyWithRV makes out the object just written, at its new revision,
// without decoding the bytes again: the caller owns obj and drops it.
func copyWithRV(out, obj runtime.Object, rev int64) error {
	ov, iv := reflect.ValueOf(out), reflect.ValueOf(obj)
	if ov.Kind() != reflect.Pointer || iv.Kind() != reflect.Pointer || ov.Type() != iv.Type() {
		return fmt.Errorf("cannot copy %T into %T", obj, out)
	}
	if ov.Pointer() != iv.Pointer() {
		ov.Elem().Set(iv.Elem())
	}
	return setRV(out, rev)
}

func (s *Store) Get(ctx context.Context, key string, out runtime.Object) error {
	start := time.Now()
	cctx, cancel := s.callCtx(ctx)
	resp, err := s.client.Get(cctx, key)
	cancel()
	s.observe("get", start)
	if err != nil {
		return s.etcdErr(ctx, err, key, 0)
	}
	if len(resp.Kvs) == 0 {
		return newErr(ErrCodeKeyNotFound, key, "")
	}
	return s.decodeStored(key, resp.Kvs[0].Value, out, resp.Kvs[0].ModRevision)
}

func (s *Store) CurrentRevision(ctx context.Context) (int64, error) {
	start := time.Now()
	cctx, cancel := s.callCtx(ctx)
	resp, err := s.client.Get(cctx, "/registry/health-revision", clientv3.WithCountOnly())
	cancel()
	s.observe("get", start)
	if err != nil {
		return 0, s.etcdErr(ctx, err, "", 0)
	}
	return resp.Header.Revision, nil
}

func (p *Preconditions) check(key string, obj runtime.Object) error {
	if p == nil {
		return nil
	}
	a, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	if p.UID != nil && *p.UID != a.GetUID() {
		return newErr(ErrCodeResourceVersionConflicts, key,
			fmt.Sprintf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *p.UID, a.GetUID()))
	}
	if p.ResourceVersion != nil && *p.ResourceVersion != a.GetResourceVersion() {
		return newErr(ErrCodeResourceVersionConflicts, key,
			fmt.Sprintf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *p.ResourceVersion, a.GetResourceVersion()))
	}
	return nil
}

// readChecked reads key's current value and object, and checks the
// preconditions against it.
func (s *Store) readChecked(ctx context.Context, key string, preconditions *Preconditions) (*mvccpb.KeyValue, runtime.Object, error) {
	start := time.Now()
	cctx, cancel := s.callCtx(ctx)
	resp, err := s.client.Get(cctx, key)
	cancel()
	s.observe("get", start)
	if err != nil {
		return nil, nil, s.etcdErr(ctx, err, key, 0)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil, newErr(ErrCodeKeyNotFound, key, "")
	}
	kv := resp.Kvs[0]
	cur := s.newFunc()
	if err := s.decodeStored(key, kv.Value, cur, kv.ModRevision); err != nil {
		return nil, nil, err
	}
	if err := preconditions.check(key, cur); err != nil {
		return nil, nil, err
	}
	return kv, cur, nil
}

func (s *Store) GuaranteedUpdate(ctx context.Context, key string, out runtime.Object, preconditions *Preconditions, tryUpdate UpdateFunc) error {
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		kv, cur, err := s.readChecked(ctx, key, preconditions)
		if err != nil {
			return err
		}
		updated, err := tryUpdate(cur)
		if err != nil {
			return err
		}
		data, err := s.encode(updated)
		if err != nil {
			return err
		}
		plain, stale, err := s.fromStorage(key, kv.Value)
		if err == nil && !stale && string(data) == string(plain) {
			// Nothing changed: no write, the object keeps its revision.
			return s.decode(plain, out, kv.ModRevision)
		}
		stored, err := s.toStorage(key, data)
		if err != nil {
			return err
		}
		popts, err := s.putOpts(ctx)
		if err != nil {
			return err
		}
		start := time.Now()
		cctx, cancel := s.callCtx(ctx)
		txn, err := s.client.Txn(cctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
			Then(clientv3.OpPut(key, string(stored), popts...)).
			Commit()
		cancel()
		s.observe("update", start)
		if err != nil {
			return s.etcdErr(ctx, err, key, 0)
		}
		if txn.Succeeded {
			if err := copyWithRV(out, updated, txn.Header.Revision); err != nil {
				return s.decode(data, out, txn.Header.Revision)
			}
			return nil
		}
		// Lost a race: read again and retry.
	}
}

func (s *Store) Delete(ctx context.Context, key string, out runtime.Object, preconditions *Preconditions) error {
	for {
		kv, cur, err := s.readChecked(ctx, key, preconditions)
		if err != nil {
			return err
		}
		start := time.Now()
		cctx, cancel := s.callCtx(ctx)
		txn, err := s.client.Txn(cctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
			Then(clientv3.OpDelete(key)).
			Commit()
		cancel()
		s.observe("delete", start)
		if err != nil {
			return s.etcdErr(ctx, err, key, 0)
		}
		if txn.Succeeded {
			if out != nil {
				return copyWithRV(out, cur, txn.Header.Revision)
			}
			return nil
		}
	}
}

// continueToken is upstream's continue format: base64 of
// {"v":"meta.k8s.io/v1","rv":N,"start":"<key after prefix>"}.
type continueToken struct {
	APIVersion      string `json:"v"`
	ResourceVersion int64  `json:"rv"`
	StartKey        string `json:"start"`
}

func encodeContinue(key, prefix string, rev int64) (string, error) {
	rel := strings.TrimPrefix(key, prefix)
	out, err := json.Marshal(continueToken{APIVersion: "meta.k8s.io/v1", ResourceVersion: rev, StartKey: rel})
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(out), nil
}

// latestRV is the revision a continue token carries to continue at the
// newest revision rather than its own (upstream's -1: the token a 410
// offers when the list's revision was compacted).
const latestRV = -1

// DecodeContinue parses a continue token into the key to start from and its
// revision; revision 0 means the newest (a token of latestRV).
func DecodeContinue(token, prefix string) (string, int64, error) {
	data, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return "", 0, fmt.Errorf("continue key is not valid: %v", err)
	}
	var c continueToken
	if err := json.Unmarshal(data, &c); err != nil {
		return "", 0, fmt.Errorf("continue key is not valid: %v", err)
	}
	if c.APIVersion != "meta.k8s.io/v1" {
		return "", 0, fmt.Errorf("continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
	}
	if c.ResourceVersion <= 0 && c.ResourceVersion != latestRV {
		return "", 0, fmt.Errorf("continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
	}
	cleaned := path.Clean(c.StartKey)
	if cleaned != c.StartKey || strings.HasPrefix(c.StartKey, "/") || strings.Contains(c.StartKey, "..") {
		return "", 0, fmt.Errorf("continue key is not valid: %s", c.StartKey)
	}
	return prefix + c.StartKey, max(c.ResourceVersion, 0), nil
}

// maxListBatch is the most keys one etcd read of a paged, filtered list
// asks for (upstream's maxLimit).
const maxListBatch = 10000

// List reads from etcd. With opts.Continue it reads the token's revision;
// with ResourceVersionMatch=Exact the given revision; otherwise the newest.
func (s *Store) List(ctx context.Context, prefix string, opts ListOptions, listObj runtime.Object) error {
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	listPtr, err := meta.GetItemsPtr(listObj)
	if err != nil {
		return err
	}
	v, err := conversion.EnforcePtr(listPtr)
	if err != nil || v.Kind() != reflect.Slice {
		return fmt.Errorf("need ptr to slice: %v", err)
	}
	startKey := prefix
	var rev int64
	if opts.Continue != "" {
		startKey, rev, err = DecodeContinue(opts.Continue, prefix)
		if err != nil {
			return newErr(ErrCodeInvalidContinue, prefix, err.Error())
		}
	} else if opts.ResourceVersionMatch == "Exact" {
		rev, err = ParseRV(opts.ResourceVersion)
		if err != nil {
			return newErr(ErrCodeInvalidObj, prefix, err.Error())
		}
	}
	// Otherwise a resourceVersion is a lower bound (NotOlderThan): etcd's
	// newest revision must have reached it.
	var atLeast int64
	if opts.Continue == "" && opts.ResourceVersionMatch != "Exact" && opts.ResourceVersion != "" {
		if atLeast, err = ParseRV(opts.ResourceVersion); err != nil {
			return newErr(ErrCodeInvalidObj, prefix, err.Error())
		}
	}
	end := clientv3.GetPrefixRangeEnd(prefix)
	limit := opts.Limit
	var (
		returned int64
		lastKey  string
		more     bool
		readRev  = rev
	)
	batch := limit
	if batch <= 0 || batch > 1000 {
		batch = 1000
	}
	if limit <= 0 {
		batch = 0 // all at once
	}
	for {
		getOpts := []clientv3.OpOption{clientv3.WithRange(end)}
		if batch > 0 {
			getOpts = append(getOpts, clientv3.WithLimit(batch))
		}
		if readRev > 0 {
			getOpts = append(getOpts, clientv3.WithRev(readRev))
		}
		start := time.Now()
		cctx, cancel := s.callCtx(ctx)
		resp, err := s.client.Get(cctx, startKey, getOpts...)
		cancel()
		s.observe("list", start)
		if err != nil {
			err = s.etcdErr(ctx, err, prefix, readRev)
			var se *Error
			if opts.Continue != "" && errors.As(err, &se) && se.Code == ErrCodeResourceExpired {
				// The token's revision is gone: offer to go on from the
				// same key at the newest revision, as upstream does.
				if se.Continue, err = encodeContinue(startKey, prefix, latestRV); err != nil {
					return err
				}
				return se
			}
			return err
		}
		if readRev == 0 {
			readRev = resp.Header.Revision
			if atLeast > readRev {
				return &Error{Code: ErrCodeTooLargeResourceVersion, ResourceVersion: atLeast, Msg: formatRV(readRev)}
			}
		}
		for _, kv := range resp.Kvs {
			if limit > 0 && returned >= limit {
				more = true
				break
			}
			obj := s.newFunc()
			if err := s.decodeStored(string(kv.Key), kv.Value, obj, kv.ModRevision); err != nil {
				return err
			}
			lastKey = string(kv.Key)
			ok, err := opts.Predicate.Matches(obj)
			if err != nil {
				return err
			}
			if ok {
				v.Set(reflect.Append(v, reflect.ValueOf(obj).Elem()))
				returned++
			}
		}
		if more || !resp.More || len(resp.Kvs) == 0 {
			if !more && resp.More && limit > 0 && returned >= limit {
				more = true
			}
			break
		}
		if limit > 0 && returned >= limit {
			more = true
			break
		}
		startKey = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
		if !opts.Predicate.Empty() && batch > 0 {
			// A selector that matches few objects would take one round
			// trip per few keys: grow the batch as upstream does.
			batch = min(batch*2, maxListBatch)
		}
	}
	lm, err := meta.ListAccessor(listObj)
	if err != nil {
		return err
	}
	lm.SetResourceVersion(formatRV(readRev))
	if more && lastKey != "" {
		token, err := encodeContinue(lastKey+"\x00", prefix, readRev)
		if err != nil {
			return err
		}
		lm.SetContinue(token)
		if opts.Predicate.Empty() {
			// Upstream tells how many items are left when it can count them
			// exactly: with no selector, every remaining key is an item.
			start := time.Now()
			cctx, cancel := s.callCtx(ctx)
			cresp, err := s.client.Get(cctx, lastKey+"\x00", clientv3.WithRange(end), clientv3.WithRev(readRev), clientv3.WithCountOnly())
			cancel()
			s.observe("list", start)
			if err != nil {
				return s.etcdErr(ctx, err, prefix, readRev)
			}
			remaining := cresp.Count
			lm.SetRemainingItemCount(&remaining)
		}
	}
	return nil
}

// Watch streams events straight from etcd (the Cacher is the usual way in;
// this serves watches the cache cannot, and feeds the cache itself).
func (s *Store) Watch(ctx context.Context, key string, opts ListOptions) (watch.Interface, error) {
	rev, err := ParseRV(opts.ResourceVersion)
	if err != nil {
		return nil, err
	}
	w := newEtcdWatcher(ctx, s, key, rev, opts)
	return w, nil
}

type etcdWatcher struct {
	cancel context.CancelFunc
	result chan watch.Event
}

func newEtcdWatcher(ctx context.Context, s *Store, key string, rev int64, opts ListOptions) *etcdWatcher {
	ctx, cancel := context.WithCancel(ctx)
	w := &etcdWatcher{cancel: cancel, result: make(chan watch.Event, 100)}
	wopts := []clientv3.OpOption{clientv3.WithPrevKV()}
	if opts.Recursive {
		if !strings.HasSuffix(key, "/") {
			key += "/"
		}
		wopts = append(wopts, clientv3.WithPrefix())
	}
	if rev > 0 {
		wopts = append(wopts, clientv3.WithRev(rev+1))
	}
	go func() {
		defer close(w.result)
		ch := s.client.Watch(clientv3.WithRequireLeader(ctx), key, wopts...)
		for resp := range ch {
			if err := resp.Err(); err != nil {
				w.send(ctx, watch.Event{Type: watch.Error, Object: nil}, mapEtcdErr(err, key, rev))
				return
			}
			for _, ev := range resp.Events {
				e, err := s.convertEvent(ev)
				if err != nil {
					continue
				}
				if ok, _ := opts.Predicate.Matches(e.Object); !ok {
					continue
				}
				if !w.send(ctx, e, nil) {
					return
				}
			}
		}
	}()
	return w
}

func (w *etcdWatcher) send(ctx context.Context, e watch.Event, err error) bool {
	if err != nil {
		e = watch.Event{Type: watch.Error, Object: StatusFor(err)}
	}
	select {
	case w.result <- e:
		return true
	case <-ctx.Done():
		return false
	}
}

func (w *etcdWatcher) Stop()                          { w.cancel() }
func (w *etcdWatcher) ResultChan() <-chan watch.Event { return w.result }

func (s *Store) convertEvent(ev *clientv3.Event) (watch.Event, error) {
	switch {
	case ev.Type == mvccpb.DELETE:
		if ev.PrevKv == nil {
			return watch.Event{}, fmt.Errorf("delete without previous value")
		}
		obj := s.newFunc()
		if err := s.decodeStored(string(ev.Kv.Key), ev.PrevKv.Value, obj, ev.Kv.ModRevision); err != nil {
			return watch.Event{}, err
		}
		return watch.Event{Type: watch.Deleted, Object: obj}, nil
	default:
		obj := s.newFunc()
		if err := s.decodeStored(string(ev.Kv.Key), ev.Kv.Value, obj, ev.Kv.ModRevision); err != nil {
			return watch.Event{}, err
		}
		if ev.IsCreate() {
			return watch.Event{Type: watch.Added, Object: obj}, nil
		}
		return watch.Event{Type: watch.Modified, Object: obj}, nil
	}
}
