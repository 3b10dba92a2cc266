package apiserver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestAdmissionOptions(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const ps = "apiVersion: pod-security.admission.config.k8s.io/v1\nkind: PodSecurityConfiguration\ndefaults: {enforce: restricted}\n"
	write("ps.yaml", ps)
	embedded := write("embedded.yaml", "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: PodSecurity\n  configuration:\n    apiVersion: pod-security.admission.config.k8s.io/v1\n    kind: PodSecurityConfiguration\n    defaults: {enforce: baseline}\n")
	byPath := write("bypath.yaml", "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: PodSecurity\n  path: ps.yaml\n")
	other := write("other.yaml", "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: ImagePolicyWebhook\n  path: ipw.yaml\n")
	erl := write("erl.yaml", "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: EventRateLimit\n  configuration:\n    apiVersion: eventratelimit.admission.k8s.io/v1alpha1\n    kind: Configuration\n    limits: [{type: Namespace, qps: 1, burst: 2}]\n")
	kind := write("kind.yaml", "apiVersion: apiserver.config.k8s.io/v1\nkind: Nope\n")

	tests := []struct {
		name    string
		o       AdmissionOptions
		wantErr string
	}{
		{name: "zero"},
		{name: "enable and disable", o: AdmissionOptions{EnablePlugins: []string{"NodeRestriction", "AlwaysPullImages"}, DisablePlugins: []string{"LimitRanger"}}},
		{name: "unknown", o: AdmissionOptions{EnablePlugins: []string{"Magic"}}, wantErr: `unknown admission plugin "Magic"`},
		{name: "unknown disabled", o: AdmissionOptions{DisablePlugins: []string{"Magic"}}, wantErr: `unknown admission plugin "Magic"`},
		{name: "unsupported", o: AdmissionOptions{EnablePlugins: []string{"ImagePolicyWebhook"}}, wantErr: `admission plugin "ImagePolicyWebhook" is not supported by Skiff`},
		{name: "EventRateLimit without configuration", o: AdmissionOptions{EnablePlugins: []string{"EventRateLimit"}}, wantErr: "EventRateLimit: a configuration is required"},
		{name: "EventRateLimit", o: AdmissionOptions{EnablePlugins: []string{"EventRateLimit"}, ConfigFile: erl}},
		{name: "overlap", o: AdmissionOptions{EnablePlugins: []string{"PodSecurity"}, DisablePlugins: []string{"PodSecurity"}}, wantErr: "[PodSecurity] in enable-admission-plugins and disable-admission-plugins overlapped"},
		{name: "embedded config", o: AdmissionOptions{ConfigFile: embedded}},
		{name: "config by path", o: AdmissionOptions{ConfigFile: byPath}},
		{name: "config of another plugin", o: AdmissionOptions{ConfigFile: other}, wantErr: `a configuration for "ImagePolicyWebhook" is not supported`},
		{name: "config kind", o: AdmissionOptions{ConfigFile: kind}, wantErr: `kind "Nope"`},
	}
	for _, tt := range tests {
		err := ValidateAdmission(tt.o)
		if tt.wantErr == "" && err != nil {
			t.Errorf("%s: %v", tt.name, err)
		}
		if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.wantErr)
		}
	}

	got, err := loadAdmissionConfig(byPath)
	if err != nil || string(got["PodSecurity"]) != ps {
		t.Errorf("by path: %q %v", got["PodSecurity"], err)
	}
	got, err = loadAdmissionConfig(embedded)
	if err != nil || !strings.Contains(string(got["PodSecurity"]), `"enforce":"baseline"`) {
		t.Errorf("embedded: %q %v", got["PodSecurity"], err)
	}

	o := AdmissionOptions{EnablePlugins: []string{"AlwaysPullImages"}, DisablePlugins: []string{"NodeRestriction", "ResourceQuota"}}
	var on []string
	for _, n := range AllAdmissionPlugins {
		if o.admissionEnabled(n) {
			on = append(on, n)
		}
	}
	want := []string{"NamespaceLifecycle", "LimitRanger", "ServiceAccount", "TaintNodesByCondition", "AlwaysPullImages", "PodSecurity",
		"Priority", "DefaultTolerationSeconds", "DefaultStorageClass", "StorageObjectInUseProtection", "PodGroupProtection",
		"PersistentVolumeClaimResize", "RuntimeClass", "CertificateApproval", "CertificateSigning", "ClusterTrustBundleAttest",
		"CertificateSubjectRestriction", "DefaultIngressClass", "PodTopologyLabels", "NodeDeclaredFeatureValidator", "PodResizeValidator",
		"MutatingAdmissionPolicy", "MutatingAdmissionWebhook", "ValidatingAdmissionPolicy", "ValidatingAdmissionWebhook"}
	if diff := cmp.Diff(want, on); diff != "" {
		t.Errorf("enabled (-want +got):\n%s", diff)
	}
}
