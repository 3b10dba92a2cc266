package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// applyPatchType is server-side apply's content type.
const applyPatchType = types.ApplyYAMLPatchType

// maxFieldManagerLength is upstream's limit on a manager's name.
const maxFieldManagerLength = 128

// fieldManagers track managedFields of one resource: one manager for the
// main resource and one for each subresource that writes the object
// itself (status, and pods' ephemeralcontainers and resize), whose
// entries say so in their subresource field.
type fieldManagers struct {
	main *managedfields.FieldManager
	subs map[string]*managedfields.FieldManager
}

// newFieldManagers builds the managers from the OpenAPI type converter.
func newFieldManagers(tc managedfields.TypeConverter, scheme *runtime.Scheme, gvk schema.GroupVersionKind, subresources []string) (*fieldManagers, error) {
	main, err := managedfields.NewDefaultFieldManager(tc, scheme, scheme, scheme, gvk, gvk.GroupVersion(), "", nil)
	if err != nil {
		return nil, err
	}
	fm := &fieldManagers{main: main, subs: map[string]*managedfields.FieldManager{}}
	for _, sub := range subresources {
		if fm.subs[sub], err = managedfields.NewDefaultFieldManager(tc, scheme, scheme, scheme, gvk, gvk.GroupVersion(), sub, nil); err != nil {
			return nil, err
		}
	}
	return fm, nil
}

// forSubresource is the manager of writes through sub ("" for the main
// resource), nil when sub does not write the object.
func (f *fieldManagers) forSubresource(sub string) *managedfields.FieldManager {
	if f == nil {
		return nil
	}
	if sub == "" {
		return f.main
	}
	return f.subs[sub]
}

// managerName is the field manager of a write: the fieldManager
// parameter, else the client's User-Agent up to its first "/", as upstream.
func managerName(r *http.Request) (string, error) {
	m := r.URL.Query().Get("fieldManager")
	if m == "" {
		ua := r.Header.Get("User-Agent")
		if i := strings.Index(ua, "/"); i >= 0 {
			ua = ua[:i]
		}
		if len(ua) > maxFieldManagerLength {
			ua = ua[:maxFieldManagerLength]
		}
		return ua, nil
	}
	if len(m) > maxFieldManagerLength {
		return "", apierrors.NewInvalid(schema.GroupKind{}, "", field.ErrorList{field.TooLong(field.NewPath("fieldManager"), "", maxFieldManagerLength)})
	}
	for _, c := range m {
		if c < 0x20 || c == 0x7f {
			return "", apierrors.NewInvalid(schema.GroupKind{}, "", field.ErrorList{field.Invalid(field.NewPath("fieldManager"), m, "may only contain printable characters")})
		}
	}
	return m, nil
}

// trackUpdate records a non-apply write in managedFields.
func (h *resourceHandler) trackUpdate(r *http.Request, sub string, live, next runtime.Object) (runtime.Object, error) {
	fm := h.fields.forSubresource(sub)
	if fm == nil {
		return next, nil
	}
	manager, err := managerName(r)
	if err != nil {
		return nil, err
	}
	return fm.UpdateNoErrors(live, next, manager), nil
}

// decodeApply parses an apply configuration (YAML or JSON).
func (h *resourceHandler) decodeApply(body []byte) (*unstructured.Unstructured, error) {
	js, err := yaml.YAMLToJSON(body)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding YAML: %v", err))
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(js); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding apply configuration: %v", err))
	}
	if u.GroupVersionKind() != h.gvk {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the apply configuration's apiVersion and kind (%s) must be %s", u.GroupVersionKind(), h.gvk))
	}
	return u, nil
}

// apply serves server-side apply: it creates the object when it does not
// exist, else merges the configuration into it, owning the fields it sets.
func (h *resourceHandler) apply(ctx context.Context, r *http.Request, info RequestInfo) (runtime.Object, int, error) {
	fm := h.fields.forSubresource(info.Subresource)
	if fm == nil {
		return nil, 0, unsupportedPatch(string(applyPatchType))
	}
	if r.URL.Query().Get("fieldManager") == "" {
		return nil, 0, apierrors.NewBadRequest("PATCH, application/apply-patch+yaml requests must have a fieldManager")
	}
	manager, err := managerName(r)
	if err != nil {
		return nil, 0, err
	}
	force := boolParam(r.URL.Query().Get("force"))
	body, err := readBody(r)
	if err != nil {
		return nil, 0, err
	}
	applied, err := h.decodeApply(body)
	if err != nil {
		return nil, 0, err
	}
	// As upstream's apply, duplicate keys in the configuration (which the
	// decoding above resolves to the last) are reported after the merge:
	// Strict refuses them with 400, Warn (the default) warns, Ignore drops
	// them.
	strictErr := applyStrictErrors(r, body)
	if applied.GetName() != info.Name {
		return nil, 0, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", applied.GetName(), info.Name))
	}
	if h.res.Namespaced {
		if applied.GetNamespace() == "" {
			applied.SetNamespace(info.Namespace)
		} else if applied.GetNamespace() != info.Namespace {
			return nil, 0, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
		}
	}
	if strictErr == nil {
		setWarnings(ctx, applyStrictWarnings(r, body))
	}
	mode := h.modeFor(info.Subresource)
	dry, _ := dryRun(r)
	obj, err := h.updateWith(ctx, r, info.Namespace, info.Name, func(ctx context.Context, cur runtime.Object) (runtime.Object, error) {
		next, err := fm.Apply(cur, applied.DeepCopy(), manager, force)
		if err != nil {
			return nil, err
		}
		if strictErr != nil {
			return nil, strictErr
		}
		return h.admitUpdate(ctx, info, next, cur, mode, dry, nil)
	})
	if !apierrors.IsNotFound(err) || info.Subresource != "" {
		return obj, http.StatusOK, err
	}
	// Nothing there yet: apply creates it.
	empty := h.res.New()
	created, err := fm.Apply(empty, applied.DeepCopy(), manager, force)
	if err != nil {
		return nil, 0, err
	}
	if strictErr != nil {
		return nil, 0, strictErr
	}
	obj, err = h.createObject(ctx, r, info, created, true)
	return obj, http.StatusCreated, err
}

// Strict YAML errors begin with one of these (sigs.k8s.io/yaml's), then
// list one problem a line.
const (
	yamlStrictPrefix     = "yaml: unmarshal errors:\n"
	yamlJSONStrictPrefix = "error converting YAML to JSON: " + yamlStrictPrefix
)

// applyStrict decodes an apply configuration strictly (duplicate keys are
// errors); nil when it has none or fieldValidation is Ignore.
func applyStrict(r *http.Request, body []byte) error {
	if r.URL.Query().Get("fieldValidation") == "Ignore" {
		return nil
	}
	return yaml.UnmarshalStrict(body, &map[string]any{})
}

// applyStrictErrors is the 400 fieldValidation=Strict gives an apply
// configuration with duplicate keys, worded as upstream's.
func applyStrictErrors(r *http.Request, body []byte) error {
	if r.URL.Query().Get("fieldValidation") != "Strict" {
		return nil
	}
	if err := applyStrict(r, body); err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("error strict decoding patch: %v", err))
	}
	return nil
}

// applyStrictWarnings are the warnings fieldValidation=Warn (the default)
// gives an apply configuration with duplicate keys: one a problem, as
// upstream splits the YAML decoder's message.
func applyStrictWarnings(r *http.Request, body []byte) []string {
	if r.URL.Query().Get("fieldValidation") == "Strict" {
		return nil
	}
	err := applyStrict(r, body)
	if err == nil {
		return nil
	}
	msg := err.Error()
	rest, ok := strings.CutPrefix(msg, yamlJSONStrictPrefix)
	if !ok {
		if rest, ok = strings.CutPrefix(msg, yamlStrictPrefix); !ok {
			return []string{msg}
		}
	}
	var out []string
	for _, line := range strings.Split(rest, "\n") {
		out = append(out, strings.TrimSpace(line))
	}
	return out
}
