package apiserver

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

const (
	mediaJSON     = "application/json"
	mediaYAML     = "application/yaml"
	mediaProtobuf = "application/vnd.kubernetes.protobuf"
)

// maxBodyBytes is the largest request body accepted (upstream: 3 MiB).
const maxBodyBytes = 3 * 1024 * 1024

// output is the representation a client asked for in Accept.
type output struct {
	mediaType string // mediaJSON, mediaYAML or mediaProtobuf
	as        string // "", "Table", "PartialObjectMetadata", "PartialObjectMetadataList"
	pretty    bool
}

// negotiateOutput picks the first acceptable entry of the Accept header.
func negotiateOutput(r *http.Request) (output, error) { return negotiateOutputFor(r, true) }

// negotiateOutputFor is negotiateOutput for a resource that has a Table
// form (tables) or not: upstream's resources that cannot be listed (the
// access and token reviews) have no table convertor, so an Accept of only
// as=Table is 406 there.
func negotiateOutputFor(r *http.Request, tables bool) (output, error) {
	accept := r.Header.Get("Accept")
	if accept == "" {
		return output{mediaType: mediaJSON}, nil
	}
	for _, entry := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(entry))
		if err != nil {
			continue
		}
		var o output
		switch mt {
		case mediaJSON, "*/*", "application/*":
			o.mediaType = mediaJSON
		case mediaYAML:
			o.mediaType = mediaYAML
		case mediaProtobuf:
			o.mediaType = mediaProtobuf
		default:
			continue
		}
		if as := params["as"]; as != "" {
			if params["g"] != "meta.k8s.io" || (params["v"] != "v1" && params["v"] != "v1beta1") {
				continue
			}
			switch as {
			case "Table":
				if !tables {
					continue
				}
				o.as = as
			case "PartialObjectMetadata", "PartialObjectMetadataList":
				o.as = as
			default:
				continue
			}
		}
		if params["pretty"] == "1" || params["pretty"] == "true" {
			o.pretty = true
		}
		return o, nil
	}
	return output{}, apierrors.NewGenericServerResponse(http.StatusNotAcceptable, "", schema.GroupResource{}, "",
		fmt.Sprintf("only the following media types are accepted: %s, %s, %s", mediaJSON, mediaYAML, mediaProtobuf), 0, false)
}

// encode writes obj in the chosen media type.
func (c *codecs) encode(mediaType string, obj runtime.Object) ([]byte, error) {
	c.ensureKind(obj)
	var buf bytes.Buffer
	var err error
	switch mediaType {
	case mediaProtobuf:
		err = c.protobuf.Encode(obj, &buf)
	case mediaYAML:
		err = c.yaml.Encode(obj, &buf)
	default:
		err = c.json.Encode(obj, &buf)
	}
	return buf.Bytes(), err
}

// ensureKind fills in apiVersion and kind when an object has none.
func (c *codecs) ensureKind(obj runtime.Object) {
	if !obj.GetObjectKind().GroupVersionKind().Empty() {
		return
	}
	gvks, _, err := c.scheme.ObjectKinds(obj)
	if err == nil && len(gvks) > 0 {
		obj.GetObjectKind().SetGroupVersionKind(gvks[0])
	}
}

func (c *codecs) writeObject(w http.ResponseWriter, code int, out output, obj runtime.Object) {
	body, err := c.encode(out.mediaType, obj)
	if err != nil {
		c.writeError(w, apierrors.NewInternalError(err))
		return
	}
	w.Header().Set("Content-Type", out.mediaType)
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

// writeError sends err as a metav1.Status with upstream's reason and code.
func (c *codecs) writeError(w http.ResponseWriter, err error) {
	status := errorToStatus(err)
	body, encErr := c.encode(mediaJSON, status)
	if encErr != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", mediaJSON)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if status.Code == http.StatusTooManyRequests || status.Code == http.StatusServiceUnavailable || status.Code == http.StatusGatewayTimeout {
		if status.Details != nil && status.Details.RetryAfterSeconds > 0 {
			w.Header().Set("Retry-After", fmt.Sprint(status.Details.RetryAfterSeconds))
		}
	}
	w.WriteHeader(int(status.Code))
	_, _ = w.Write(body)
}

func errorToStatus(err error) *metav1.Status {
	var api apierrors.APIStatus
	if errors.As(err, &api) {
		s := api.Status()
		s.Kind, s.APIVersion = "Status", "v1"
		if s.Status == "" {
			s.Status = metav1.StatusFailure
		}
		if s.Code == 0 {
			s.Code = http.StatusInternalServerError
		}
		return &s
	}
	s := apierrors.NewInternalError(err).Status()
	s.Kind, s.APIVersion = "Status", "v1"
	return &s
}

// readBody reads a request body of at most maxBodyBytes; a larger one is a
// 413.
func readBody(r *http.Request) ([]byte, error) {
	if r.ContentLength > maxBodyBytes {
		return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", maxBodyBytes))
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("read request body: %v", err))
	}
	if len(data) > maxBodyBytes {
		return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", maxBodyBytes))
	}
	return data, nil
}

// requestMediaType is the body's media type, without parameters.
func requestMediaType(r *http.Request) (string, error) {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return mediaJSON, nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return "", unsupportedMediaType(ct)
	}
	return mt, nil
}

// decodeBody decodes a create or update body into into. fieldValidation
// "Strict" turns unknown or duplicate fields into a 400; "Warn" (the
// default) returns them as warnings; "Ignore" drops them.
func (c *codecs) decodeBody(r *http.Request, body []byte, into runtime.Object, gvk schema.GroupVersionKind) (warnings []string, err error) {
	mt, err := requestMediaType(r)
	if err != nil {
		return nil, err
	}
	validation := r.URL.Query().Get("fieldValidation")
	switch validation {
	case "", "Warn", "Strict", "Ignore":
	default:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("fieldValidation must be one of Ignore, Warn or Strict, got %q", validation))
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, apierrors.NewBadRequest("the request body is empty")
	}
	switch mt {
	case mediaJSON, mediaYAML, "application/yml", "text/yaml":
		if err := checkKind(body, mt != mediaJSON, gvk); err != nil {
			return nil, err
		}
		s := c.jsonStrict
		if mt != mediaJSON {
			s = c.yamlStrict
		}
		_, _, derr := s.Decode(body, &gvk, into)
		if derr != nil {
			if runtime.IsStrictDecodingError(derr) {
				se, _ := runtime.AsStrictDecodingError(derr)
				switch validation {
				case "Strict":
					return nil, apierrors.NewBadRequest(derr.Error())
				case "Ignore":
				default:
					if se != nil {
						for _, e := range se.Errors() {
							warnings = append(warnings, e.Error())
						}
					}
				}
			} else {
				return nil, apierrors.NewBadRequest(fmt.Sprintf("the object provided is unrecognized or malformed: %v", derr))
			}
		}
	case mediaProtobuf:
		if _, _, derr := c.protobuf.Decode(body, &gvk, into); derr != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the object provided is unrecognized or malformed: %v", derr))
		}
	default:
		return nil, unsupportedMediaType(mt)
	}
	got := into.GetObjectKind().GroupVersionKind()
	if got.Kind != "" && (got.Kind != gvk.Kind || got.GroupVersion() != gvk.GroupVersion()) {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", got.GroupVersion(), gvk.GroupVersion()))
	}
	into.GetObjectKind().SetGroupVersionKind(gvk)
	return warnings, nil
}

// protobufFrame writes one length-prefixed frame, as protobuf watch
// streams are framed.
func protobufFrame(w io.Writer, b []byte) error {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(b)))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	_, err := w.Write(b)
	return err
}

func unsupportedMediaType(mt string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusUnsupportedMediaType,
		Reason:  metav1.StatusReasonUnsupportedMediaType,
		Message: fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: %s, %s, %s", mediaJSON, mediaYAML, mediaProtobuf),
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: metav1.CauseTypeUnexpectedServerResponse, Message: mt}}},
	}}
}

// decodeOptions decodes an options body (DeleteOptions) in JSON, YAML or
// protobuf, whatever group the client labelled it with.
func (c *codecs) decodeOptions(r *http.Request, body []byte, into runtime.Object) error {
	mt, err := requestMediaType(r)
	if err != nil {
		return err
	}
	switch mt {
	case mediaProtobuf:
		if !bytes.HasPrefix(body, []byte("k8s\x00")) {
			return apierrors.NewBadRequest("the body of the request was malformed: missing protobuf envelope")
		}
		var unk runtime.Unknown
		if err := unk.Unmarshal(body[4:]); err != nil {
			return apierrors.NewBadRequest(fmt.Sprintf("the body of the request was malformed: %v", err))
		}
		m, ok := into.(interface{ Unmarshal([]byte) error })
		if !ok {
			return apierrors.NewInternalError(fmt.Errorf("%T cannot be decoded from protobuf", into))
		}
		if err := m.Unmarshal(unk.Raw); err != nil {
			return apierrors.NewBadRequest(fmt.Sprintf("the body of the request was malformed: %v", err))
		}
		return nil
	case mediaJSON, mediaYAML, "application/yml", "text/yaml", "":
		data := body
		if mt != mediaJSON {
			if data, err = yamlToJSON(body); err != nil {
				return apierrors.NewBadRequest(fmt.Sprintf("the body of the request was malformed: %v", err))
			}
		}
		if err := json.Unmarshal(data, into); err != nil {
			return apierrors.NewBadRequest(fmt.Sprintf("the body of the request was malformed: %v", err))
		}
		return nil
	}
	return unsupportedMediaType(mt)
}

func yamlToJSON(b []byte) ([]byte, error) { return yaml.YAMLToJSON(b) }

// checkKind refuses a body whose apiVersion and kind name another type than
// the endpoint serves (a Secret POSTed to configmaps), before decoding
// would read it as the endpoint's type.
func checkKind(body []byte, isYAML bool, want schema.GroupVersionKind) error {
	data := body
	if isYAML {
		var err error
		if data, err = yaml.YAMLToJSON(body); err != nil {
			return apierrors.NewBadRequest(fmt.Sprintf("the object provided is unrecognized or malformed: %v", err))
		}
	}
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal(data, &tm); err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("the object provided is unrecognized or malformed: %v", err))
	}
	if tm.Kind != "" && tm.Kind != want.Kind {
		return apierrors.NewBadRequest(fmt.Sprintf("the object provided is unrecognized (must be of type %s): kind %q is not %q", want.Kind, tm.Kind, want.Kind))
	}
	if tm.APIVersion != "" {
		gv, err := schema.ParseGroupVersion(tm.APIVersion)
		if err != nil || gv != want.GroupVersion() {
			return apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", tm.APIVersion, want.GroupVersion()))
		}
	}
	return nil
}
