package server

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/skiff-sh/skiff/internal/apiserver"
)

// AdmissionFlags are kube-apiserver's admission flags.
type AdmissionFlags struct {
	EnablePlugins  []string
	DisablePlugins []string
	ConfigFile     string
}

func (f *AdmissionFlags) addFlags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&f.EnablePlugins, "enable-admission-plugins", f.EnablePlugins, fmt.Sprintf("admission plugins to turn on beside the default-on ones (%v); Skiff also has AlwaysPullImages, AlwaysDeny, AlwaysAdmit and EventRateLimit (which needs its configuration). The chain runs in upstream's order whatever the order here. All names: %s", apiserver.DefaultOnAdmissionPlugins, apiserver.AdmissionPluginsHelp()))
	fs.StringSliceVar(&f.DisablePlugins, "disable-admission-plugins", f.DisablePlugins, "admission plugins to turn off, default-on ones included")
	fs.StringVar(&f.ConfigFile, "admission-control-config-file", f.ConfigFile, "AdmissionConfiguration file (apiserver.config.k8s.io/v1) with the plugins' configurations; Skiff reads PodSecurity's PodSecurityConfiguration (defaults, exemptions) and EventRateLimit's Configuration")
}

// options validates the flags.
func (f AdmissionFlags) options() (apiserver.AdmissionOptions, error) {
	o := apiserver.AdmissionOptions{EnablePlugins: f.EnablePlugins, DisablePlugins: f.DisablePlugins, ConfigFile: f.ConfigFile}
	return o, apiserver.ValidateAdmission(o)
}
