// Package config reads a KubeSchedulerConfiguration file
// (kubescheduler.config.k8s.io/v1, upstream's format) into the scheduler's
// typed configuration: one runtime.Profile per profile, the queue's
// backoffs, parallelism, leader election and client settings.
//
// The schema is mirrored by small local structs (k8s.io/kube-scheduler is
// a separate module). Decoding is strict: an unknown field is an error, so
// is a plugin the registry does not know. As upstream does, each profile's
// plugins are merged with the default profile's MultiPoint plugins: a
// plugin enabled in the file with the same name as a default one replaces
// it (keeping its place, with the new weight), disabled ones (or "*") are
// removed, and the others are appended.
package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
	"github.com/skiff-sh/skiff/internal/scheduler/framework/runtime"
)

// APIVersion and Kind of the file.
const (
	APIVersion = "kubescheduler.config.k8s.io/v1"
	Kind       = "KubeSchedulerConfiguration"
)

// Defaults, upstream's unless noted.
const (
	DefaultSchedulerName     = "default-scheduler"
	DefaultParallelism       = 16
	DefaultPodInitialBackoff = 1 * time.Second
	DefaultPodMaxBackoff     = 10 * time.Second
	DefaultLeaseNamespace    = "kube-system"
	DefaultLeaseName         = "kube-scheduler"
	DefaultLeaseDuration     = 15 * time.Second
	DefaultRenewDeadline     = 10 * time.Second
	DefaultRetryPeriod       = 2 * time.Second
	// DefaultQPS and DefaultBurst are well above upstream's 50/100 so that
	// binding a thousand pods a second is not throttled by the client.
	DefaultQPS   = 5000
	DefaultBurst = 10000
	// DefaultContentType is upstream's clientConnection.contentType default:
	// requests, and (with no acceptContentTypes) answers and watch events,
	// in protobuf, which costs the API server and the scheduler far less to
	// encode and decode than JSON.
	DefaultContentType = k8sruntime.ContentTypeProtobuf
)

// File is the file's schema (the fields Skiff reads).
type File struct {
	APIVersion                string                `json:"apiVersion"`
	Kind                      string                `json:"kind"`
	Parallelism               *int32                `json:"parallelism,omitempty"`
	LeaderElection            *LeaderElectionFile   `json:"leaderElection,omitempty"`
	ClientConnection          *ClientConnectionFile `json:"clientConnection,omitempty"`
	EnableProfiling           *bool                 `json:"enableProfiling,omitempty"`
	EnableContentionProfiling *bool                 `json:"enableContentionProfiling,omitempty"`
	PercentageOfNodesToScore  *int32                `json:"percentageOfNodesToScore,omitempty"`
	PodInitialBackoffSeconds  *int64                `json:"podInitialBackoffSeconds,omitempty"`
	PodMaxBackoffSeconds      *int64                `json:"podMaxBackoffSeconds,omitempty"`
	Profiles                  []ProfileFile         `json:"profiles,omitempty"`
	Extenders                 []json.RawMessage     `json:"extenders,omitempty"`
	DelayCacheUntilActive     bool                  `json:"delayCacheUntilActive,omitempty"`
}

// LeaderElectionFile is componentbaseconfig's LeaderElectionConfiguration.
type LeaderElectionFile struct {
	LeaderElect       *bool            `json:"leaderElect,omitempty"`
	LeaseDuration     *metav1.Duration `json:"leaseDuration,omitempty"`
	RenewDeadline     *metav1.Duration `json:"renewDeadline,omitempty"`
	RetryPeriod       *metav1.Duration `json:"retryPeriod,omitempty"`
	ResourceLock      string           `json:"resourceLock,omitempty"`
	ResourceName      string           `json:"resourceName,omitempty"`
	ResourceNamespace string           `json:"resourceNamespace,omitempty"`
}

// ClientConnectionFile is componentbaseconfig's ClientConnectionConfiguration.
type ClientConnectionFile struct {
	Kubeconfig         string  `json:"kubeconfig,omitempty"`
	AcceptContentTypes string  `json:"acceptContentTypes,omitempty"`
	ContentType        string  `json:"contentType,omitempty"`
	QPS                float32 `json:"qps,omitempty"`
	Burst              int32   `json:"burst,omitempty"`
}

// ProfileFile is a KubeSchedulerProfile.
type ProfileFile struct {
	SchedulerName            *string            `json:"schedulerName,omitempty"`
	PercentageOfNodesToScore *int32             `json:"percentageOfNodesToScore,omitempty"`
	Plugins                  *PluginsFile       `json:"plugins,omitempty"`
	PluginConfig             []PluginConfigFile `json:"pluginConfig,omitempty"`
}

// PluginsFile lists plugins per extension point.
type PluginsFile struct {
	PreEnqueue PluginSetFile `json:"preEnqueue,omitempty"`
	QueueSort  PluginSetFile `json:"queueSort,omitempty"`
	PreFilter  PluginSetFile `json:"preFilter,omitempty"`
	Filter     PluginSetFile `json:"filter,omitempty"`
	PostFilter PluginSetFile `json:"postFilter,omitempty"`
	PreScore   PluginSetFile `json:"preScore,omitempty"`
	Score      PluginSetFile `json:"score,omitempty"`
	Reserve    PluginSetFile `json:"reserve,omitempty"`
	Permit     PluginSetFile `json:"permit,omitempty"`
	PreBind    PluginSetFile `json:"preBind,omitempty"`
	Bind       PluginSetFile `json:"bind,omitempty"`
	PostBind   PluginSetFile `json:"postBind,omitempty"`
	MultiPoint PluginSetFile `json:"multiPoint,omitempty"`
}

// PluginSetFile enables and disables plugins.
type PluginSetFile struct {
	Enabled  []PluginFile `json:"enabled,omitempty"`
	Disabled []PluginFile `json:"disabled,omitempty"`
}

// PluginFile names a plugin.
type PluginFile struct {
	Name   string `json:"name"`
	Weight *int32 `json:"weight,omitempty"`
}

// PluginConfigFile carries one plugin's args.
type PluginConfigFile struct {
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
}

// Config is the validated configuration.
type Config struct {
	Profiles          []runtime.Profile
	Parallelism       int
	PodInitialBackoff time.Duration
	PodMaxBackoff     time.Duration
	LeaderElection    LeaderElection
	// Kubeconfig, QPS, Burst and the content types come from
	// clientConnection.
	Kubeconfig         string
	QPS                float32
	Burst              int
	ContentType        string
	AcceptContentTypes string
}

// LeaderElection configures the Lease the schedulers compete for.
type LeaderElection struct {
	LeaderElect       bool
	LeaseDuration     time.Duration
	RenewDeadline     time.Duration
	RetryPeriod       time.Duration
	ResourceNamespace string
	ResourceName      string
}

// Default is the configuration without a file: one profile, defaultProfile
// (usually plugins.DefaultProfile()).
func Default(defaultProfile runtime.Profile) Config {
	if defaultProfile.SchedulerName == "" {
		defaultProfile.SchedulerName = DefaultSchedulerName
	}
	return Config{
		Profiles:          []runtime.Profile{defaultProfile},
		Parallelism:       DefaultParallelism,
		PodInitialBackoff: DefaultPodInitialBackoff,
		PodMaxBackoff:     DefaultPodMaxBackoff,
		LeaderElection: LeaderElection{
			LeaderElect:       true,
			LeaseDuration:     DefaultLeaseDuration,
			RenewDeadline:     DefaultRenewDeadline,
			RetryPeriod:       DefaultRetryPeriod,
			ResourceNamespace: DefaultLeaseNamespace,
			ResourceName:      DefaultLeaseName,
		},
		QPS:         DefaultQPS,
		Burst:       DefaultBurst,
		ContentType: DefaultContentType,
	}
}

// Load reads and decodes the file at path.
func Load(path string, registry framework.Registry, defaultProfile runtime.Profile) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("read scheduler config: %w", err)
	}
	cfg, err := Decode(data, registry, defaultProfile)
	if err != nil {
		return Config{}, fmt.Errorf("scheduler config %s: %w", path, err)
	}
	return cfg, nil
}

// Decode decodes and validates a KubeSchedulerConfiguration. registry
// names the known plugins; defaultProfile gives the default MultiPoint
// plugins every profile is merged with.
func Decode(data []byte, registry framework.Registry, defaultProfile runtime.Profile) (Config, error) {
	var f File
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return Config{}, fmt.Errorf("decode: %w", err)
	}
	if f.APIVersion != APIVersion || f.Kind != Kind {
		return Config{}, fmt.Errorf("apiVersion %q, kind %q: want %s %s", f.APIVersion, f.Kind, APIVersion, Kind)
	}
	cfg := Default(defaultProfile)
	var errs []error
	if len(f.Extenders) > 0 {
		errs = append(errs, errors.New("extenders: not supported"))
	}
	if f.Parallelism != nil {
		if *f.Parallelism <= 0 {
			errs = append(errs, fmt.Errorf("parallelism: Invalid value: %d: should be an integer value greater than zero", *f.Parallelism))
		}
		cfg.Parallelism = int(*f.Parallelism)
	}
	if f.PodInitialBackoffSeconds != nil {
		if *f.PodInitialBackoffSeconds <= 0 {
			errs = append(errs, fmt.Errorf("podInitialBackoffSeconds: Invalid value: %d: must be greater than 0", *f.PodInitialBackoffSeconds))
		}
		cfg.PodInitialBackoff = time.Duration(*f.PodInitialBackoffSeconds) * time.Second
	}
	if f.PodMaxBackoffSeconds != nil {
		cfg.PodMaxBackoff = time.Duration(*f.PodMaxBackoffSeconds) * time.Second
	}
	if cfg.PodMaxBackoff < cfg.PodInitialBackoff {
		errs = append(errs, fmt.Errorf("podMaxBackoffSeconds: Invalid value: %v: must be greater than or equal to PodInitialBackoffSeconds", cfg.PodMaxBackoff.Seconds()))
	}
	if le := f.LeaderElection; le != nil {
		l := &cfg.LeaderElection
		if le.LeaderElect != nil {
			l.LeaderElect = *le.LeaderElect
		}
		for _, d := range []struct {
			in  *metav1.Duration
			out *time.Duration
		}{{le.LeaseDuration, &l.LeaseDuration}, {le.RenewDeadline, &l.RenewDeadline}, {le.RetryPeriod, &l.RetryPeriod}} {
			if d.in != nil {
				*d.out = d.in.Duration
			}
		}
		if le.ResourceLock != "" && le.ResourceLock != "leases" {
			errs = append(errs, fmt.Errorf("leaderElection.resourceLock: Unsupported value: %q: supported values: \"leases\"", le.ResourceLock))
		}
		if le.ResourceName != "" {
			l.ResourceName = le.ResourceName
		}
		if le.ResourceNamespace != "" {
			l.ResourceNamespace = le.ResourceNamespace
		}
		if l.LeaderElect && l.LeaseDuration <= l.RenewDeadline {
			errs = append(errs, errors.New("leaderElection.leaseDuration: Invalid value: must be greater than renewDeadline"))
		}
		if l.LeaderElect && l.RetryPeriod <= 0 {
			errs = append(errs, errors.New("leaderElection.retryPeriod: Invalid value: must be greater than zero"))
		}
	}
	if cc := f.ClientConnection; cc != nil {
		cfg.Kubeconfig = cc.Kubeconfig
		if cc.QPS != 0 {
			cfg.QPS = cc.QPS
		}
		if cc.Burst != 0 {
			cfg.Burst = int(cc.Burst)
		}
		if cc.ContentType != "" {
			cfg.ContentType = cc.ContentType
		}
		cfg.AcceptContentTypes = cc.AcceptContentTypes
	}
	var globalPct int32
	if f.PercentageOfNodesToScore != nil {
		globalPct = *f.PercentageOfNodesToScore
		if globalPct < 0 || globalPct > 100 {
			errs = append(errs, fmt.Errorf("percentageOfNodesToScore: Invalid value: %d: not in valid range [0-100]", globalPct))
		}
	}
	if len(f.Profiles) > 0 {
		cfg.Profiles = nil
		seen := map[string]bool{}
		for i, pf := range f.Profiles {
			p, perrs := profile(fmt.Sprintf("profiles[%d]", i), pf, globalPct, registry, defaultProfile)
			errs = append(errs, perrs...)
			if seen[p.SchedulerName] {
				errs = append(errs, fmt.Errorf("profiles[%d].schedulerName: Duplicate value: %q", i, p.SchedulerName))
			}
			seen[p.SchedulerName] = true
			cfg.Profiles = append(cfg.Profiles, p)
		}
	} else {
		cfg.Profiles[0].PercentageOfNodesToScore = globalPct
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

func profile(path string, pf ProfileFile, globalPct int32, registry framework.Registry, def runtime.Profile) (runtime.Profile, []error) {
	var errs []error
	p := runtime.Profile{SchedulerName: DefaultSchedulerName, PercentageOfNodesToScore: globalPct}
	if pf.SchedulerName != nil {
		p.SchedulerName = *pf.SchedulerName
		if p.SchedulerName == "" {
			errs = append(errs, fmt.Errorf("%s.schedulerName: Required value", path))
		}
	}
	if pf.PercentageOfNodesToScore != nil {
		p.PercentageOfNodesToScore = *pf.PercentageOfNodesToScore
		if v := p.PercentageOfNodesToScore; v < 0 || v > 100 {
			errs = append(errs, fmt.Errorf("%s.percentageOfNodesToScore: Invalid value: %d: not in valid range [0-100]", path, v))
		}
	}
	var in PluginsFile
	if pf.Plugins != nil {
		in = *pf.Plugins
	}
	known := func(field string, refs []PluginFile, allowStar bool) {
		for i, r := range refs {
			if r.Name == "*" && allowStar {
				continue
			}
			if _, ok := registry[r.Name]; !ok {
				errs = append(errs, fmt.Errorf("%s.plugins.%s[%d]: plugin %q is not registered (known plugins: %s)", path, field, i, r.Name, strings.Join(names(registry), ", ")))
			}
			if r.Weight != nil && *r.Weight < 0 {
				errs = append(errs, fmt.Errorf("%s.plugins.%s[%d].weight: Invalid value: %d: must be non-negative", path, field, i, *r.Weight))
			}
		}
	}
	sets := []struct {
		field string
		in    PluginSetFile
		out   *runtime.PluginSet
	}{
		{"preEnqueue", in.PreEnqueue, &p.Plugins.PreEnqueue},
		{"queueSort", in.QueueSort, &p.Plugins.QueueSort},
		{"preFilter", in.PreFilter, &p.Plugins.PreFilter},
		{"filter", in.Filter, &p.Plugins.Filter},
		{"postFilter", in.PostFilter, &p.Plugins.PostFilter},
		{"preScore", in.PreScore, &p.Plugins.PreScore},
		{"score", in.Score, &p.Plugins.Score},
		{"reserve", in.Reserve, &p.Plugins.Reserve},
		{"permit", in.Permit, &p.Plugins.Permit},
		{"preBind", in.PreBind, &p.Plugins.PreBind},
		{"bind", in.Bind, &p.Plugins.Bind},
		{"postBind", in.PostBind, &p.Plugins.PostBind},
		{"multiPoint", in.MultiPoint, &p.Plugins.MultiPoint},
	}
	enabled := map[string]bool{}
	for _, s := range sets {
		known(s.field+".enabled", s.in.Enabled, false)
		known(s.field+".disabled", s.in.Disabled, true)
		*s.out = runtime.PluginSet{Enabled: refs(s.in.Enabled), Disabled: refs(s.in.Disabled)}
		if s.field == "multiPoint" {
			*s.out = MergePluginSet(def.Plugins.MultiPoint, *s.out)
		}
		for _, r := range s.out.Enabled {
			enabled[r.Name] = true
		}
	}
	seen := map[string]bool{}
	for i, pc := range pf.PluginConfig {
		if seen[pc.Name] {
			errs = append(errs, fmt.Errorf("%s.pluginConfig[%d].name: Duplicate value: %q", path, i, pc.Name))
		}
		seen[pc.Name] = true
		if _, ok := registry[pc.Name]; !ok {
			errs = append(errs, fmt.Errorf("%s.pluginConfig[%d]: plugin %q is not registered (known plugins: %s)", path, i, pc.Name, strings.Join(names(registry), ", ")))
			continue
		}
		// Args of a plugin not enabled are accepted and ignored, as
		// upstream's defaults carry args for every default plugin.
		if !enabled[pc.Name] {
			continue
		}
		var args any
		if len(pc.Args) > 0 && string(pc.Args) != "null" {
			args = pc.Args
		}
		p.PluginConfig = append(p.PluginConfig, runtime.PluginConfig{Name: pc.Name, Args: args})
	}
	return p, errs
}

func refs(in []PluginFile) []runtime.PluginRef {
	var out []runtime.PluginRef
	for _, r := range in {
		ref := runtime.PluginRef{Name: r.Name}
		if r.Weight != nil {
			ref.Weight = *r.Weight
		}
		out = append(out, ref)
	}
	return out
}

// MergePluginSet merges custom into the defaults the way upstream's v1
// defaulting does: custom's disabled plugins ("*" for all) are dropped
// from the defaults, a default re-enabled by custom takes custom's weight
// in place, and custom's other enabled plugins follow.
func MergePluginSet(defaults, custom runtime.PluginSet) runtime.PluginSet {
	disabled := map[string]bool{}
	for _, r := range custom.Disabled {
		disabled[r.Name] = true
	}
	customIdx := map[string]int{}
	for i, r := range custom.Enabled {
		customIdx[r.Name] = i
	}
	used := map[int]bool{}
	var out []runtime.PluginRef
	if !disabled["*"] {
		for _, r := range defaults.Enabled {
			if disabled[r.Name] {
				continue
			}
			if i, ok := customIdx[r.Name]; ok {
				used[i] = true
				r = custom.Enabled[i]
			}
			out = append(out, r)
		}
	}
	for i, r := range custom.Enabled {
		if !used[i] {
			out = append(out, r)
		}
	}
	// The disabled plugins are applied: the runtime must not apply them
	// (a "*" there would also drop custom's enabled plugins).
	return runtime.PluginSet{Enabled: out}
}

func names(r framework.Registry) []string {
	out := make([]string, 0, len(r))
	for n := range r {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
