package pod

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Default values applied to pods, as upstream's v1 defaulting does.
const (
	DefaultTerminationGracePeriodSeconds int64 = 30
	DefaultTerminationMessagePath              = "/dev/termination-log"
	// DefaultTolerationSeconds is how long a pod stays bound to a node that
	// became not-ready or unreachable (upstream's DefaultTolerationSeconds
	// admission plugin).
	DefaultTolerationSeconds int64 = 300
	// volumeDefaultMode is 0644, the mode given to files projected from
	// secrets, config maps and the downward API.
	volumeDefaultMode int32 = 0o644
	// defaultTokenExpirationSeconds is the default lifetime of a projected
	// service account token.
	defaultTokenExpirationSeconds int64 = 3600
)

// DefaultPod applies the pod-level defaults: DefaultPodSpec plus the ones
// upstream applies only to Pods (not to pod templates): enableServiceLinks
// and container requests copied from limits.
func DefaultPod(pod *corev1.Pod) {
	DefaultPodSpec(&pod.Spec)
	if pod.Spec.EnableServiceLinks == nil {
		pod.Spec.EnableServiceLinks = ptr(corev1.DefaultEnableServiceLinks)
	}
	for i := range pod.Spec.Containers {
		defaultRequestsFromLimits(&pod.Spec.Containers[i].Resources)
	}
	for i := range pod.Spec.InitContainers {
		defaultRequestsFromLimits(&pod.Spec.InitContainers[i].Resources)
	}
	if pod.Spec.Resources != nil {
		defaultRequestsFromLimits(pod.Spec.Resources)
	}
}

// DefaultPodSpec applies upstream's v1 defaults to a pod spec. It is shared
// by pods and by every pod template (Deployments, ReplicaSets, Jobs, ...).
func DefaultPodSpec(spec *corev1.PodSpec) {
	if spec.DNSPolicy == "" {
		spec.DNSPolicy = corev1.DNSClusterFirst
	}
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = corev1.RestartPolicyAlways
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	if spec.TerminationGracePeriodSeconds == nil {
		spec.TerminationGracePeriodSeconds = ptr(DefaultTerminationGracePeriodSeconds)
	}
	if spec.SchedulerName == "" {
		spec.SchedulerName = corev1.DefaultSchedulerName
	}
	// The v1 wire format carries the service account twice; upstream's
	// conversion fills whichever one is missing.
	if spec.ServiceAccountName == "" {
		spec.ServiceAccountName = spec.DeprecatedServiceAccount
	}
	if spec.DeprecatedServiceAccount == "" {
		spec.DeprecatedServiceAccount = spec.ServiceAccountName
	}
	hostNetwork := spec.HostNetwork
	for i := range spec.InitContainers {
		defaultContainer(&spec.InitContainers[i], hostNetwork)
	}
	for i := range spec.Containers {
		defaultContainer(&spec.Containers[i], hostNetwork)
	}
	for i := range spec.EphemeralContainers {
		c := corev1.Container(spec.EphemeralContainers[i].EphemeralContainerCommon)
		defaultContainer(&c, hostNetwork)
		spec.EphemeralContainers[i].EphemeralContainerCommon = corev1.EphemeralContainerCommon(c)
	}
	for i := range spec.Volumes {
		defaultVolume(&spec.Volumes[i])
	}
}

func defaultContainer(c *corev1.Container, hostNetwork bool) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = defaultPullPolicy(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = DefaultTerminationMessagePath
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		p := &c.Ports[i]
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		if hostNetwork && p.HostPort == 0 {
			p.HostPort = p.ContainerPort
		}
	}
	for i := range c.Env {
		if vf := c.Env[i].ValueFrom; vf != nil && vf.FieldRef != nil && vf.FieldRef.APIVersion == "" {
			vf.FieldRef.APIVersion = "v1"
		}
	}
	defaultProbe(c.LivenessProbe)
	defaultProbe(c.ReadinessProbe)
	defaultProbe(c.StartupProbe)
	if c.Lifecycle != nil {
		defaultLifecycleHandler(c.Lifecycle.PostStart)
		defaultLifecycleHandler(c.Lifecycle.PreStop)
	}
}

// imageTag returns the tag of an image reference the way upstream's image
// name parser does: "latest" when there is neither a tag nor a digest, ""
// when there is only a digest.
// defaultPullPolicy is Always for an image tagged latest (or not tagged),
// IfNotPresent otherwise, for containers and image volumes alike.
func defaultPullPolicy(image string) corev1.PullPolicy {
	if imageTag(image) == "latest" {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

func imageTag(image string) string {
	name := image
	hasDigest := false
	if i := strings.Index(name, "@"); i >= 0 {
		name = name[:i]
		hasDigest = true
	}
	lastPart := name
	if i := strings.LastIndex(name, "/"); i >= 0 {
		lastPart = name[i+1:]
	}
	if i := strings.LastIndex(lastPart, ":"); i >= 0 {
		return lastPart[i+1:]
	}
	if hasDigest {
		return ""
	}
	return "latest"
}

func defaultProbe(p *corev1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	defaultHTTPGet(p.HTTPGet)
	if p.GRPC != nil && p.GRPC.Service == nil {
		p.GRPC.Service = ptr("")
	}
}

func defaultLifecycleHandler(h *corev1.LifecycleHandler) {
	if h != nil {
		defaultHTTPGet(h.HTTPGet)
	}
}

func defaultHTTPGet(h *corev1.HTTPGetAction) {
	if h == nil {
		return
	}
	if h.Path == "" {
		h.Path = "/"
	}
	if h.Scheme == "" {
		h.Scheme = corev1.URISchemeHTTP
	}
}

func defaultVolume(v *corev1.Volume) {
	if v.VolumeSource == (corev1.VolumeSource{}) {
		v.VolumeSource.EmptyDir = &corev1.EmptyDirVolumeSource{}
	}
	src := &v.VolumeSource
	if s := src.Image; s != nil && s.PullPolicy == "" {
		s.PullPolicy = defaultPullPolicy(s.Reference)
	}
	if s := src.Secret; s != nil && s.DefaultMode == nil {
		s.DefaultMode = ptr(volumeDefaultMode)
	}
	if s := src.ConfigMap; s != nil && s.DefaultMode == nil {
		s.DefaultMode = ptr(volumeDefaultMode)
	}
	if s := src.DownwardAPI; s != nil {
		if s.DefaultMode == nil {
			s.DefaultMode = ptr(volumeDefaultMode)
		}
		for i := range s.Items {
			if f := s.Items[i].FieldRef; f != nil && f.APIVersion == "" {
				f.APIVersion = "v1"
			}
		}
	}
	if s := src.Projected; s != nil {
		if s.DefaultMode == nil {
			s.DefaultMode = ptr(volumeDefaultMode)
		}
		for i := range s.Sources {
			if t := s.Sources[i].ServiceAccountToken; t != nil && t.ExpirationSeconds == nil {
				t.ExpirationSeconds = ptr(defaultTokenExpirationSeconds)
			}
			if d := s.Sources[i].DownwardAPI; d != nil {
				for j := range d.Items {
					if f := d.Items[j].FieldRef; f != nil && f.APIVersion == "" {
						f.APIVersion = "v1"
					}
				}
			}
		}
	}
	if s := src.HostPath; s != nil && s.Type == nil {
		s.Type = ptr(corev1.HostPathUnset)
	}
}

func defaultRequestsFromLimits(r *corev1.ResourceRequirements) {
	if r.Limits == nil {
		return
	}
	if r.Requests == nil {
		r.Requests = corev1.ResourceList{}
	}
	for name, limit := range r.Limits {
		if _, ok := r.Requests[name]; !ok {
			r.Requests[name] = limit.DeepCopy()
		}
	}
}

// AddDefaultTolerations adds the NoExecute tolerations for the
// node.kubernetes.io/not-ready and node.kubernetes.io/unreachable taints
// (300 s) unless the pod already tolerates them, as upstream's
// DefaultTolerationSeconds admission plugin does on pod creation.
func AddDefaultTolerations(pod *corev1.Pod) {
	for _, key := range []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable} {
		if toleratesNoExecute(pod.Spec.Tolerations, key) {
			continue
		}
		pod.Spec.Tolerations = append(pod.Spec.Tolerations, corev1.Toleration{
			Key:               key,
			Operator:          corev1.TolerationOpExists,
			Effect:            corev1.TaintEffectNoExecute,
			TolerationSeconds: ptr(DefaultTolerationSeconds),
		})
	}
}

func toleratesNoExecute(tolerations []corev1.Toleration, key string) bool {
	for _, t := range tolerations {
		if (t.Key == key || t.Key == "") && (t.Effect == corev1.TaintEffectNoExecute || t.Effect == "") {
			return true
		}
	}
	return false
}

func ptr[T any](v T) *T { return &v }
