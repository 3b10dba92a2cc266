package apiserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/skiff-sh/skiff/internal/apiserver/admission"
	"github.com/skiff-sh/skiff/internal/apiserver/admission/webhook"
	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// AdmissionOptions are kube-apiserver's admission flags.
type AdmissionOptions struct {
	// EnablePlugins are turned on beside the default-on ones
	// (--enable-admission-plugins); DisablePlugins are turned off
	// (--disable-admission-plugins). Order does not matter: the chain runs
	// in upstream's order.
	EnablePlugins  []string
	DisablePlugins []string
	// ConfigFile is an AdmissionConfiguration
	// (apiserver.config.k8s.io/v1, --admission-control-config-file) with
	// plugins' configurations, embedded or by path (relative to the file):
	// PodSecurity's PodSecurityConfiguration, EventRateLimit's
	// Configuration and the webhook plugins' WebhookAdmissionConfiguration
	// are used; others are refused.
	ConfigFile string
}

// AllAdmissionPlugins are upstream's plugin names (AllOrderedPlugins,
// v1.37), in its order.
var AllAdmissionPlugins = []string{
	"AlwaysAdmit", "NamespaceAutoProvision", "NamespaceLifecycle", "NamespaceExists",
	"LimitPodHardAntiAffinityTopology", "LimitRanger", "ServiceAccount", "NodeRestriction",
	"TaintNodesByCondition", "AlwaysPullImages", "ImagePolicyWebhook", "PodSecurity",
	"PodNodeSelector", "Priority", "DefaultTolerationSeconds", "PodTolerationRestriction",
	"EventRateLimit", "ExtendedResourceToleration", "DefaultStorageClass",
	"StorageObjectInUseProtection", "PodGroupProtection", "OwnerReferencesPermissionEnforcement",
	"PersistentVolumeClaimResize", "RuntimeClass", "CertificateApproval", "CertificateSigning",
	"ClusterTrustBundleAttest", "CertificateSubjectRestriction", "DefaultIngressClass",
	"DenyServiceExternalIPs", "PodTopologyLabels", "NodeDeclaredFeatureValidator",
	"PodResizeValidator", "MutatingAdmissionPolicy", "MutatingAdmissionWebhook",
	"ValidatingAdmissionPolicy", "ValidatingAdmissionWebhook", "ResourceQuota", "AlwaysDeny",
}

// DefaultOnAdmissionPlugins are on unless disabled: upstream's default-on
// set, and NodeRestriction, which Skiff (like kubeadm and k3s) turns on.
var DefaultOnAdmissionPlugins = []string{
	"NamespaceLifecycle", "LimitRanger", "ServiceAccount", "NodeRestriction",
	"TaintNodesByCondition", "PodSecurity", "Priority", "DefaultTolerationSeconds",
	"DefaultStorageClass", "StorageObjectInUseProtection", "PodGroupProtection",
	"PersistentVolumeClaimResize", "RuntimeClass", "CertificateApproval", "CertificateSigning",
	"ClusterTrustBundleAttest", "CertificateSubjectRestriction", "DefaultIngressClass",
	"PodTopologyLabels", "NodeDeclaredFeatureValidator", "PodResizeValidator",
	"MutatingAdmissionPolicy", "MutatingAdmissionWebhook", "ValidatingAdmissionPolicy",
	"ValidatingAdmissionWebhook", "ResourceQuota",
}

// admissionNotPlugins are default-on upstream plugins whose work Skiff
// does elsewhere (always) or that have nothing to do here: their names
// are accepted, and disabling them changes nothing.
var admissionNotPlugins = map[string]string{
	"TaintNodesByCondition":        "the node strategy taints new nodes not-ready",
	"DefaultTolerationSeconds":     "the pod strategy adds the not-ready/unreachable tolerations",
	"PodGroupProtection":           "no PodGroup API",
	"ClusterTrustBundleAttest":     "no ClusterTrustBundle API",
	"PodTopologyLabels":            "feature gate off upstream",
	"NodeDeclaredFeatureValidator": "feature gate off upstream",
}

// optionalAdmissionPlugins are off by default and built here when enabled.
var optionalAdmissionPlugins = map[string]func() admission.Plugin{
	"AlwaysAdmit":      func() admission.Plugin { return admission.AlwaysAdmit{} },
	"AlwaysDeny":       func() admission.Plugin { return admission.AlwaysDeny{} },
	"AlwaysPullImages": func() admission.Plugin { return admission.AlwaysPullImages{} },
}

// ValidateAdmission checks the plugin lists and the configuration file:
// names upstream knows, none both enabled and disabled, none enabled that
// Skiff does not have.
func ValidateAdmission(o AdmissionOptions) error {
	var errs []error
	for _, n := range append(slices.Clone(o.EnablePlugins), o.DisablePlugins...) {
		if !slices.Contains(AllAdmissionPlugins, n) {
			errs = append(errs, fmt.Errorf("unknown admission plugin %q", n))
		}
	}
	var both []string
	for _, n := range o.EnablePlugins {
		if slices.Contains(o.DisablePlugins, n) {
			both = append(both, n)
		}
		if slices.Contains(AllAdmissionPlugins, n) && !slices.Contains(DefaultOnAdmissionPlugins, n) && optionalAdmissionPlugins[n] == nil && n != "EventRateLimit" {
			errs = append(errs, fmt.Errorf("admission plugin %q is not supported by Skiff", n))
		}
	}
	if len(both) > 0 {
		errs = append(errs, fmt.Errorf("%v in enable-admission-plugins and disable-admission-plugins overlapped", both))
	}
	var configs map[string][]byte
	if o.ConfigFile != "" {
		var err error
		if configs, err = loadAdmissionConfig(o.ConfigFile); err != nil {
			errs = append(errs, err)
		}
	}
	if o.admissionEnabled("EventRateLimit") {
		if _, err := admission.NewEventRateLimit(configs["EventRateLimit"], nil); err != nil {
			errs = append(errs, err)
		}
	}
	for _, name := range []string{"MutatingAdmissionWebhook", "ValidatingAdmissionWebhook"} {
		if data := configs[name]; data != nil && o.admissionEnabled(name) {
			if err := webhook.CheckConfig(data); err != nil {
				errs = append(errs, fmt.Errorf("--admission-control-config-file: %s: %w", name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// admissionEnabled says whether plugin name runs.
func (o AdmissionOptions) admissionEnabled(name string) bool {
	if slices.Contains(o.DisablePlugins, name) {
		return false
	}
	return slices.Contains(DefaultOnAdmissionPlugins, name) || slices.Contains(o.EnablePlugins, name)
}

// configurablePlugins are the plugins whose configuration
// --admission-control-config-file may give.
var configurablePlugins = []string{"PodSecurity", "EventRateLimit", "MutatingAdmissionWebhook", "ValidatingAdmissionWebhook"}

// loadAdmissionConfig reads an AdmissionConfiguration into each plugin's
// configuration bytes (JSON or YAML, as its own loader takes them).
func loadAdmissionConfig(path string) (map[string][]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--admission-control-config-file: %w", err)
	}
	var c struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Plugins    []struct {
			Name          string          `json:"name"`
			Path          string          `json:"path"`
			Configuration json.RawMessage `json:"configuration"`
		} `json:"plugins"`
	}
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, fmt.Errorf("--admission-control-config-file %s: %w", path, err)
	}
	switch c.APIVersion {
	case "apiserver.config.k8s.io/v1", "apiserver.config.k8s.io/v1alpha1", "apiserver.k8s.io/v1alpha1":
	default:
		return nil, fmt.Errorf("--admission-control-config-file %s: apiVersion %q: want apiserver.config.k8s.io/v1", path, c.APIVersion)
	}
	if c.Kind != "AdmissionConfiguration" {
		return nil, fmt.Errorf("--admission-control-config-file %s: kind %q: want AdmissionConfiguration", path, c.Kind)
	}
	out := map[string][]byte{}
	for _, p := range c.Plugins {
		switch {
		case !slices.Contains(AllAdmissionPlugins, p.Name):
			return nil, fmt.Errorf("--admission-control-config-file %s: unknown admission plugin %q", path, p.Name)
		case !slices.Contains(configurablePlugins, p.Name):
			return nil, fmt.Errorf("--admission-control-config-file %s: a configuration for %q is not supported by Skiff (only %s's)", path, p.Name, strings.Join(configurablePlugins, "'s, "))
		case out[p.Name] != nil:
			return nil, fmt.Errorf("--admission-control-config-file %s: plugin %q configured twice", path, p.Name)
		case len(p.Configuration) > 0 && string(p.Configuration) != "null":
			out[p.Name] = p.Configuration
		case p.Path != "":
			file := p.Path
			if !filepath.IsAbs(file) {
				file = filepath.Join(filepath.Dir(path), file)
			}
			b, err := os.ReadFile(file)
			if err != nil {
				return nil, fmt.Errorf("--admission-control-config-file %s: plugin %q: %w", path, p.Name, err)
			}
			out[p.Name] = b
		}
	}
	return out, nil
}

// admissionPluginConfig is plugin name's configuration from
// Config.Admission.ConfigFile (nil: the plugin's defaults).
func admissionPluginConfig(r registry.Reader, name string) ([]byte, error) {
	rd, ok := r.(reader)
	if !ok || rd.srv.cfg.Admission.ConfigFile == "" {
		return nil, nil
	}
	configs, err := loadAdmissionConfig(rd.srv.cfg.Admission.ConfigFile)
	if err != nil {
		return nil, err
	}
	return configs[name], nil
}

// enabledAdmissionPlugins keeps the plugins Config.Admission enables and
// adds the optional ones it asks for.
func enabledAdmissionPlugins(r registry.Reader, plugins []admission.Plugin) ([]admission.Plugin, error) {
	rd, ok := r.(reader)
	if !ok {
		return plugins, nil
	}
	o := rd.srv.cfg.Admission
	if err := ValidateAdmission(o); err != nil {
		return nil, err
	}
	var out []admission.Plugin
	for _, p := range plugins {
		if o.admissionEnabled(p.Name()) {
			out = append(out, p)
		}
	}
	var optional []string
	for name := range optionalAdmissionPlugins {
		optional = append(optional, name)
	}
	sort.Strings(optional)
	for _, name := range optional {
		if o.admissionEnabled(name) {
			out = append(out, optionalAdmissionPlugins[name]())
		}
	}
	if o.admissionEnabled("EventRateLimit") {
		config, err := admissionPluginConfig(r, "EventRateLimit")
		if err != nil {
			return nil, err
		}
		p, err := admission.NewEventRateLimit(config, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// AdmissionPluginsHelp lists the plugin names for the flags' help.
func AdmissionPluginsHelp() string { return strings.Join(AllAdmissionPlugins, ", ") }
