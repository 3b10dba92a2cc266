package apiserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// protoRawFormat names the cached encoding of an object's own protobuf
// message, without the "k8s\0" envelope: the form list items take.
const protoRawFormat = "proto-raw"

// serveCachedList answers a list served by the watch cache by
// concatenating the per-object encodings the cache keeps (shared with
// watch events), instead of copying every object into a typed list and
// marshalling it again. It covers plain JSON and protobuf lists; tables,
// partial metadata and pretty output take the general path.
func (h *resourceHandler) serveCachedList(ctx context.Context, w http.ResponseWriter, ns string, p listParams, out output) {
	p.Predicate.GetAttrs = h.attrs
	objs, rv, err := h.store.ListCached(ctx, h.listPrefix(ns), p.ListOptions)
	if err != nil {
		h.codecs.writeError(w, h.apiErr(err, ""))
		return
	}
	listKind := h.res.ListKind
	if listKind == "" {
		listKind = h.res.Kind + "List"
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	if out.mediaType == mediaProtobuf {
		items := make([][]byte, len(objs))
		for i, o := range objs {
			if items[i], err = o.Encoded(protoRawFormat, marshalProto); err != nil {
				h.codecs.writeError(w, h.apiErr(err, ""))
				return
			}
		}
		w.Header().Set("Content-Type", mediaProtobuf)
		w.WriteHeader(http.StatusOK)
		writeProtoList(bw, h.gvk.GroupVersion().String(), listKind, formatRV(rv), items)
	} else {
		items := make([][]byte, len(objs))
		for i, o := range objs {
			b, err := o.Encoded(mediaJSON, func(obj runtime.Object) ([]byte, error) { return h.codecs.encode(mediaJSON, obj) })
			if err != nil {
				h.codecs.writeError(w, h.apiErr(err, ""))
				return
			}
			items[i] = bytes.TrimRight(b, "\n")
		}
		w.Header().Set("Content-Type", mediaJSON)
		w.WriteHeader(http.StatusOK)
		head, _ := json.Marshal(struct {
			Kind       string          `json:"kind"`
			APIVersion string          `json:"apiVersion"`
			Metadata   metav1.ListMeta `json:"metadata"`
		}{listKind, h.gvk.GroupVersion().String(), metav1.ListMeta{ResourceVersion: formatRV(rv)}})
		bw.Write(head[:len(head)-1])
		bw.WriteString(`,"items":[`)
		for i, it := range items {
			if i > 0 {
				bw.WriteByte(',')
			}
			bw.Write(it)
		}
		bw.WriteString("]}\n")
	}
	_ = bw.Flush()
}

func formatRV(rv int64) string { return fmt.Sprint(rv) }

func marshalProto(obj runtime.Object) ([]byte, error) {
	m, ok := obj.(interface{ Marshal() ([]byte, error) })
	if !ok {
		return nil, fmt.Errorf("%T is not a protobuf message", obj)
	}
	return m.Marshal()
}

// writeProtoList writes a list as upstream's protobuf envelope: "k8s\0",
// then runtime.Unknown{typeMeta: 1, raw: 2} whose raw is the list message
// {metadata: 1, items: 2 (repeated)}.
func writeProtoList(w *bufio.Writer, apiVersion, kind, rv string, items [][]byte) {
	lm, _ := (&metav1.ListMeta{ResourceVersion: rv}).Marshal()
	listLen := 1 + varintLen(len(lm)) + len(lm)
	for _, it := range items {
		listLen += 1 + varintLen(len(it)) + len(it)
	}
	tm, _ := (&runtime.TypeMeta{APIVersion: apiVersion, Kind: kind}).Marshal()
	w.Write([]byte{0x6b, 0x38, 0x73, 0x00})
	writeField(w, 1, tm)
	w.WriteByte(0x12) // Unknown.raw
	writeVarint(w, listLen)
	writeField(w, 1, lm)
	for _, it := range items {
		writeField(w, 2, it)
	}
}

func writeField(w *bufio.Writer, num int, b []byte) {
	w.WriteByte(byte(num<<3 | 2))
	writeVarint(w, len(b))
	w.Write(b)
}

func writeVarint(w *bufio.Writer, n int) {
	var buf [binary.MaxVarintLen64]byte
	w.Write(buf[:binary.PutUvarint(buf[:], uint64(n))])
}

func varintLen(n int) int {
	var buf [binary.MaxVarintLen64]byte
	return binary.PutUvarint(buf[:], uint64(n))
}
