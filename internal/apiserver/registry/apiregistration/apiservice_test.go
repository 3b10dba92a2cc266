package apiregistration

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	apiregv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/utils/ptr"
)

func errorStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, string(e.Type)+" "+e.Field)
	}
	return out
}

func remote() *apiregv1.APIService {
	return &apiregv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: "v1beta2.custom.metrics.k8s.io"},
		Spec: apiregv1.APIServiceSpec{Group: "custom.metrics.k8s.io", Version: "v1beta2",
			Service:               &apiregv1.ServiceReference{Namespace: "monitoring", Name: "adapter"},
			InsecureSkipTLSVerify: true, GroupPriorityMinimum: 100, VersionPriority: 200},
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(a *apiregv1.APIService)
		want   []string
	}{
		{"valid", func(*apiregv1.APIService) {}, nil},
		{"name not version.group", func(a *apiregv1.APIService) { a.Name = "custom" }, []string{"FieldValueInvalid metadata.name"}},
		{"empty group not v1", func(a *apiregv1.APIService) { a.Spec.Group, a.Name = "", "v1beta2." },
			[]string{"FieldValueRequired spec.group"}},
		{"core v1", func(a *apiregv1.APIService) {
			a.Spec.Group, a.Spec.Version, a.Name, a.Spec.Service, a.Spec.InsecureSkipTLSVerify = "", "v1", "v1.", nil, false
		}, nil},
		{"priorities", func(a *apiregv1.APIService) { a.Spec.GroupPriorityMinimum, a.Spec.VersionPriority = 0, 1001 },
			[]string{"FieldValueInvalid spec.groupPriorityMinimum", "FieldValueInvalid spec.versionPriority"}},
		{"bad version", func(a *apiregv1.APIService) { a.Spec.Version, a.Name = "V1", "V1.custom.metrics.k8s.io" },
			[]string{"FieldValueInvalid spec.version"}},
		{"local with TLS settings", func(a *apiregv1.APIService) { a.Spec.Service, a.Spec.CABundle = nil, []byte("x") },
			[]string{"FieldValueInvalid spec.caBundle", "FieldValueInvalid spec.insecureSkipTLSVerify"}},
		{"service incomplete", func(a *apiregv1.APIService) {
			a.Spec.Service = &apiregv1.ServiceReference{Port: ptr.To[int32](0)}
		}, []string{"FieldValueRequired spec.service.namespace", "FieldValueRequired spec.service.name", "FieldValueInvalid spec.service.port"}},
		{"caBundle and insecure", func(a *apiregv1.APIService) { a.Spec.CABundle = []byte("pem") },
			[]string{"FieldValueInvalid spec.insecureSkipTLSVerify"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := remote()
			tc.change(a)
			if diff := cmp.Diff(tc.want, errorStrings(Strategy{}.Validate(context.Background(), a))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStatusRulesAndTable(t *testing.T) {
	ctx := context.Background()
	local := &apiregv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: "v1.apps"},
		Spec:   apiregv1.APIServiceSpec{Group: "apps", Version: "v1", GroupPriorityMinimum: 17800, VersionPriority: 15},
		Status: apiregv1.APIServiceStatus{Conditions: []apiregv1.APIServiceCondition{{Type: "Available", Status: "False"}}}}
	Strategy{}.PrepareForCreate(ctx, local)
	if c := Condition(local, apiregv1.Available); c == nil || c.Status != apiregv1.ConditionTrue || c.Reason != "Local" {
		t.Errorf("a Local APIService is created Available (Local), got %+v", local.Status)
	}
	r := remote()
	Strategy{}.PrepareForCreate(ctx, r)
	if len(r.Status.Conditions) != 0 || r.Spec.Service.Port == nil || *r.Spec.Service.Port != 443 {
		t.Errorf("remote on create: status %+v, port %v; want no status and port 443", r.Status, r.Spec.Service.Port)
	}
	// The main resource keeps the status; /status keeps the spec.
	upd := r.DeepCopy()
	upd.Status.Conditions = []apiregv1.APIServiceCondition{{Type: "Available", Status: "True"}}
	Strategy{}.PrepareForUpdate(ctx, upd, r)
	if len(upd.Status.Conditions) != 0 {
		t.Errorf("update changed the status")
	}
	st := r.DeepCopy()
	st.Spec.VersionPriority = 1
	st.Status.Conditions = []apiregv1.APIServiceCondition{{Type: "Available", Status: "Maybe"}}
	Strategy{}.PrepareForStatusUpdate(ctx, st, r)
	if st.Spec.VersionPriority != 200 {
		t.Errorf("status update changed the spec")
	}
	if diff := cmp.Diff([]string{"FieldValueNotSupported status.conditions[0].status"}, errorStrings(Strategy{}.ValidateStatusUpdate(ctx, st, r))); diff != "" {
		t.Errorf("status errors (-want +got):\n%s", diff)
	}

	for _, tc := range []struct {
		obj           *apiregv1.APIService
		service, want string
	}{
		{local, "Local", "True"},
		{r, "monitoring/adapter", "Unknown"},
		{func() *apiregv1.APIService {
			x := r.DeepCopy()
			SetCondition(x, apiregv1.APIServiceCondition{Type: apiregv1.Available, Status: apiregv1.ConditionFalse, Reason: "MissingEndpoints"})
			return x
		}(), "monitoring/adapter", "False (MissingEndpoints)"},
	} {
		row, err := Strategy{}.TableRow(tc.obj)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]interface{}{tc.obj.Name, tc.service, tc.want}, row[:3]); diff != "" {
			t.Errorf("row (-want +got):\n%s", diff)
		}
	}
}
