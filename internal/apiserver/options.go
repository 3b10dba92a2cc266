package apiserver

import (
	"fmt"
	"net/url"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/storage"
)

// listParams are the query parameters of a list or watch.
type listParams struct {
	storage.ListOptions
	Watch          bool
	TimeoutSeconds int64
	IncludeObject  string
}

func parseListParams(q url.Values, supportedFields map[string]bool) (listParams, error) {
	var p listParams
	var errs field.ErrorList
	if s := q.Get("labelSelector"); s != "" {
		sel, err := labels.Parse(s)
		if err != nil {
			return p, apierrors.NewBadRequest(fmt.Sprintf("unable to parse requirement: %v", err))
		}
		p.Predicate.Label = sel
	}
	if s := q.Get("fieldSelector"); s != "" {
		sel, err := fields.ParseSelector(s)
		if err != nil {
			return p, apierrors.NewBadRequest(fmt.Sprintf("invalid field selector: %v", err))
		}
		for _, r := range sel.Requirements() {
			if !supportedFields[r.Field] {
				return p, apierrors.NewBadRequest(fmt.Sprintf("Unable to find \"%s\" field label: field label not supported: %s", "", r.Field))
			}
		}
		p.Predicate.Field = sel
	}
	p.ResourceVersion = q.Get("resourceVersion")
	if _, err := storage.ParseRV(p.ResourceVersion); err != nil {
		errs = append(errs, field.Invalid(field.NewPath("resourceVersion"), p.ResourceVersion, "must be a non-negative integer"))
	}
	p.ResourceVersionMatch = q.Get("resourceVersionMatch")
	switch p.ResourceVersionMatch {
	case "", "NotOlderThan", "Exact":
	default:
		errs = append(errs, field.NotSupported(field.NewPath("resourceVersionMatch"), p.ResourceVersionMatch, []string{"Exact", "NotOlderThan", ""}))
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			errs = append(errs, field.Invalid(field.NewPath("limit"), s, "must be a non-negative integer"))
		}
		p.Limit = n
	}
	p.Continue = q.Get("continue")
	p.Watch = boolParam(q.Get("watch"))
	p.AllowWatchBookmarks = boolParam(q.Get("allowWatchBookmarks"))
	if s := q.Get("sendInitialEvents"); s != "" {
		b := boolParam(s)
		p.SendInitialEvents = &b
	}
	if s := q.Get("timeoutSeconds"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			errs = append(errs, field.Invalid(field.NewPath("timeoutSeconds"), s, "must be a non-negative integer"))
		}
		p.TimeoutSeconds = n
	}
	p.IncludeObject = q.Get("includeObject")
	switch p.IncludeObject {
	case "", "None", "Metadata", "Object":
	default:
		errs = append(errs, field.NotSupported(field.NewPath("includeObject"), p.IncludeObject, []string{"None", "Metadata", "Object"}))
	}
	// upstream's rules for combining the options
	if p.Continue != "" && p.ResourceVersion != "" && !p.Watch {
		errs = append(errs, field.Forbidden(field.NewPath("resourceVersion"), "specifying resource version is not allowed when using continue"))
	}
	if p.ResourceVersionMatch != "" && !p.Watch {
		if p.ResourceVersion == "" {
			errs = append(errs, field.Forbidden(field.NewPath("resourceVersionMatch"), "resourceVersionMatch is forbidden unless resourceVersion is provided"))
		}
		if p.Continue != "" {
			errs = append(errs, field.Forbidden(field.NewPath("resourceVersionMatch"), "resourceVersionMatch is forbidden when continue is provided"))
		}
		if p.ResourceVersionMatch == "Exact" && p.ResourceVersion == "0" {
			errs = append(errs, field.Forbidden(field.NewPath("resourceVersionMatch"), "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""))
		}
	}
	if p.SendInitialEvents != nil {
		if !p.Watch {
			errs = append(errs, field.Forbidden(field.NewPath("sendInitialEvents"), "sendInitialEvents is forbidden for list"))
		} else if p.ResourceVersionMatch != "NotOlderThan" {
			errs = append(errs, field.Forbidden(field.NewPath("resourceVersionMatch"), "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"))
		}
	} else if p.Watch && p.ResourceVersionMatch != "" {
		errs = append(errs, field.Forbidden(field.NewPath("resourceVersionMatch"), "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"))
	}
	if len(errs) > 0 {
		return p, apierrors.NewBadRequest(errs.ToAggregate().Error())
	}
	return p, nil
}

func boolParam(s string) bool { return s == "true" || s == "1" }
