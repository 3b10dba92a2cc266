package apiserver

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"net/http"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/skiff-sh/skiff/internal/storage"
)

func (h *resourceHandler) serveWatch(w http.ResponseWriter, r *http.Request, info RequestInfo, out output) {
	p, err := parseListParams(r.URL.Query(), h.fieldSet)
	if err != nil {
		h.codecs.writeError(w, err)
		return
	}
	if info.Name != "" {
		sel := fields.OneTermEqualSelector("metadata.name", info.Name)
		if p.Predicate.Field != nil && !p.Predicate.Field.Empty() {
			sel = fields.AndSelectors(sel, p.Predicate.Field)
		}
		p.Predicate.Field = sel
	}
	ctx, cancel := context.WithTimeout(r.Context(), watchTimeout(p.TimeoutSeconds, h.srv.cfg.MinRequestTimeout))
	defer cancel()
	cw, err := h.store.WatchCached(ctx, h.listPrefix(info.Namespace), p.ListOptions)
	if err != nil {
		h.codecs.writeError(w, h.apiErr(err, ""))
		return
	}
	defer cw.Stop()
	// A client that stops reading is dropped once the cache gives up on
	// it: the blocked write is cut short, so neither the goroutine nor
	// its buffers stay.
	var cutMu sync.Mutex
	served := false
	stopCut := context.AfterFunc(doneContext(cw.Done()), func() {
		cutMu.Lock()
		defer cutMu.Unlock()
		if !served {
			_ = http.NewResponseController(w).SetWriteDeadline(time.Now())
		}
	})
	defer func() {
		stopCut()
		cutMu.Lock()
		served = true
		cutMu.Unlock()
	}()

	flusher, _ := w.(http.Flusher)
	contentType := out.mediaType
	if out.mediaType == mediaProtobuf {
		contentType = mediaProtobuf + ";stream=watch"
	} else {
		out.mediaType = mediaJSON // watch streams JSON or protobuf only
		contentType = mediaJSON
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Transfer-Encoding", "chunked")
	w.WriteHeader(http.StatusOK)
	if flusher != nil {
		flusher.Flush()
	}
	first := true
	var buf bytes.Buffer
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.srv.stopping:
			return
		case ev, ok := <-cw.ResultChan():
			if !ok {
				return
			}
			if ev.Type == watch.Bookmark && out.as == "Table" {
				continue
			}
			buf.Reset()
			if err := h.encodeWatchEvent(&buf, ev, out, p.IncludeObject, first); err != nil {
				return
			}
			if ev.Type != watch.Bookmark {
				first = false
			}
			if _, err := w.Write(buf.Bytes()); err != nil {
				return
			}
			if flusher != nil && len(cw.ResultChan()) == 0 {
				flusher.Flush()
			}
		}
	}
}

// watchTimeout is how long a watch lasts: the client's timeoutSeconds, at
// most twice the minimum request timeout; without one, a random time
// between the minimum and twice it, so reconnections spread out (upstream).
func watchTimeout(timeoutSeconds int64, minRequestTimeout time.Duration) time.Duration {
	if timeoutSeconds > 0 {
		return min(time.Duration(timeoutSeconds)*time.Second, 2*minRequestTimeout)
	}
	return minRequestTimeout + time.Duration(rand.Int63n(int64(minRequestTimeout)))
}

// doneContext is a context that ends when done is closed.
func doneContext(done <-chan struct{}) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-done
		cancel()
	}()
	return ctx
}

// encodeWatchEvent writes one frame. The object's bytes come from the
// cache's encode-once store, so N watchers of one change cost one encoding.
func (h *resourceHandler) encodeWatchEvent(buf *bytes.Buffer, ev storage.WatchEvent, out output, include string, first bool) error {
	var objBytes []byte
	var err error
	switch {
	case ev.Type == watch.Bookmark:
		obj := h.res.New()
		m, _ := metaOf(obj)
		m.SetResourceVersion(fmt.Sprint(ev.RV))
		if ev.InitialEventsEnd {
			m.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
		}
		obj.GetObjectKind().SetGroupVersionKind(h.gvk)
		if out.as != "" {
			// A metadata watch's bookmarks are PartialObjectMetadata too:
			// its clients (metadata informers) decode nothing else.
			var pm *metav1.PartialObjectMetadata
			if pm, err = partialMetadata(obj); err == nil {
				objBytes, err = h.codecs.encode(out.mediaType, pm)
			}
			break
		}
		objBytes, err = h.codecs.encode(out.mediaType, obj)
	case out.as == "Table":
		var obj runtime.Object
		var t *metav1.Table
		if obj, err = ev.Object.Object(); err == nil {
			t, err = h.table([]runtime.Object{obj}, include, first)
		}
		if err == nil {
			objBytes, err = h.codecs.encode(out.mediaType, t)
		}
	case out.as != "":
		var obj runtime.Object
		var pm *metav1.PartialObjectMetadata
		if obj, err = ev.Object.Object(); err == nil {
			pm, err = partialMetadata(obj)
		}
		if err == nil {
			objBytes, err = h.codecs.encode(out.mediaType, pm)
		}
	default:
		mt := out.mediaType
		objBytes, err = ev.Object.Encoded(mt, func(o runtime.Object) ([]byte, error) {
			return h.codecs.encode(mt, o)
		})
	}
	if err != nil {
		return err
	}
	if out.mediaType == mediaProtobuf {
		we := metav1.WatchEvent{Type: string(ev.Type), Object: runtime.RawExtension{Raw: objBytes}}
		b, err := we.Marshal()
		if err != nil {
			return err
		}
		return protobufFrame(buf, b)
	}
	buf.WriteString(`{"type":"`)
	buf.WriteString(string(ev.Type))
	buf.WriteString(`","object":`)
	buf.Write(bytes.TrimRight(objBytes, "\n"))
	buf.WriteString("}\n")
	return nil
}
