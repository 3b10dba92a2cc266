package pod

import (
	"fmt"
	"math"
	"net"
	"regexp"
	"slices"
	"strings"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilsysctl "k8s.io/component-helpers/node/util/sysctl"

	"github.com/skiff-sh/skiff/internal/apiserver/registry/podcertificaterequest"
)

var (
	restartPolicies  = []corev1.RestartPolicy{corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever}
	dnsPolicies      = []corev1.DNSPolicy{corev1.DNSClusterFirstWithHostNet, corev1.DNSClusterFirst, corev1.DNSDefault, corev1.DNSNone}
	pullPolicies     = []corev1.PullPolicy{corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever}
	protocols        = []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP}
	messagePolicies  = []corev1.TerminationMessagePolicy{corev1.TerminationMessageReadFile, corev1.TerminationMessageFallbackToLogsOnError}
	taintEffects     = []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}
	tolerationOps    = []corev1.TolerationOperator{corev1.TolerationOpExists, corev1.TolerationOpEqual}
	preemptPolicies  = []corev1.PreemptionPolicy{corev1.PreemptLowerPriority, corev1.PreemptNever}
	initRestartRules = []corev1.ContainerRestartPolicy{corev1.ContainerRestartPolicyAlways}
)

// ValidatePodTemplateSpec validates the labels and annotations of a pod
// template and its spec, the shared part of every workload's validation.
func ValidatePodTemplateSpec(t *corev1.PodTemplateSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, metavalidation.ValidateLabels(t.Labels, path.Child("metadata", "labels"))...)
	errs = append(errs, apivalidation.ValidateAnnotations(t.Annotations, path.Child("metadata", "annotations"))...)
	errs = append(errs, ValidatePodSpec(&t.Spec, path.Child("spec"))...)
	return errs
}

// ValidatePodSpec checks a (defaulted) pod spec with upstream's rules, field
// paths and messages for the parts a client is likely to hit.
func ValidatePodSpec(spec *corev1.PodSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	volumes, volErrs := validateVolumes(spec.Volumes, path.Child("volumes"))
	errs = append(errs, volErrs...)

	names := sets.New[string]()
	errs = append(errs, validateContainers(spec.Containers, volumes, names, path.Child("containers"), false)...)
	errs = append(errs, validateContainers(spec.InitContainers, volumes, names, path.Child("initContainers"), true)...)
	if len(spec.Containers) == 0 {
		errs = append(errs, field.Required(path.Child("containers"), ""))
	}
	for i := range spec.Containers {
		errs = append(errs, validateResizePolicy(spec.Containers[i].ResizePolicy, spec.RestartPolicy, path.Child("containers").Index(i).Child("resizePolicy"))...)
	}
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		rpPath := path.Child("initContainers").Index(i).Child("resizePolicy")
		errs = append(errs, validateResizePolicy(c.ResizePolicy, spec.RestartPolicy, rpPath)...)
		if isSidecar(c) {
			continue
		}
		for j, p := range c.ResizePolicy {
			if p.RestartPolicy == corev1.RestartContainer {
				errs = append(errs, field.Invalid(rpPath.Index(j).Child("restartPolicy"), p.RestartPolicy, "must not be set to 'RestartContainer' for non-sidecar initContainers"))
			}
		}
	}

	switch {
	case spec.RestartPolicy == "":
		errs = append(errs, field.Required(path.Child("restartPolicy"), ""))
	case !contains(restartPolicies, spec.RestartPolicy):
		errs = append(errs, field.NotSupported(path.Child("restartPolicy"), spec.RestartPolicy, restartPolicies))
	}
	switch {
	case spec.DNSPolicy == "":
		errs = append(errs, field.Required(path.Child("dnsPolicy"), ""))
	case !contains(dnsPolicies, spec.DNSPolicy):
		errs = append(errs, field.NotSupported(path.Child("dnsPolicy"), spec.DNSPolicy, dnsPolicies))
	case spec.DNSPolicy == corev1.DNSNone && spec.DNSConfig == nil:
		errs = append(errs, field.Required(path.Child("dnsConfig"), "must provide `dnsConfig` when `dnsPolicy` is None"))
	}
	if spec.DNSConfig != nil {
		errs = append(errs, validateDNSConfig(spec.DNSConfig, path.Child("dnsConfig"))...)
	}
	errs = append(errs, metavalidation.ValidateLabels(spec.NodeSelector, path.Child("nodeSelector"))...)
	if spec.ServiceAccountName != "" {
		for _, msg := range validation.IsDNS1123Subdomain(spec.ServiceAccountName) {
			errs = append(errs, field.Invalid(path.Child("serviceAccountName"), spec.ServiceAccountName, msg))
		}
	}
	if spec.NodeName != "" {
		for _, msg := range validation.IsDNS1123Subdomain(spec.NodeName) {
			errs = append(errs, field.Invalid(path.Child("nodeName"), spec.NodeName, msg))
		}
	}
	if spec.ActiveDeadlineSeconds != nil {
		if v := *spec.ActiveDeadlineSeconds; v < 1 || v > math.MaxInt32 {
			errs = append(errs, field.Invalid(path.Child("activeDeadlineSeconds"), v, validation.InclusiveRangeError(1, math.MaxInt32)))
		}
	}
	if spec.Hostname != "" {
		for _, msg := range validation.IsDNS1123Label(spec.Hostname) {
			errs = append(errs, field.Invalid(path.Child("hostname"), spec.Hostname, msg))
		}
	}
	if spec.Subdomain != "" {
		for _, msg := range validation.IsDNS1123Label(spec.Subdomain) {
			errs = append(errs, field.Invalid(path.Child("subdomain"), spec.Subdomain, msg))
		}
	}
	if spec.SchedulerName == "" {
		errs = append(errs, field.Required(path.Child("schedulerName"), ""))
	}
	errs = append(errs, validateTolerations(spec.Tolerations, path.Child("tolerations"))...)
	if spec.PreemptionPolicy != nil && !contains(preemptPolicies, *spec.PreemptionPolicy) {
		errs = append(errs, field.NotSupported(path.Child("preemptionPolicy"), *spec.PreemptionPolicy, preemptPolicies))
	}
	for i, g := range spec.SchedulingGates {
		errs = append(errs, metavalidation.ValidateLabelName(g.Name, path.Child("schedulingGates").Index(i).Child("name"))...)
	}
	for i, s := range spec.ImagePullSecrets {
		if s.Name == "" {
			errs = append(errs, field.Required(path.Child("imagePullSecrets").Index(i).Child("name"), ""))
		}
	}
	if sc := spec.SecurityContext; sc != nil {
		errs = append(errs, validateSysctls(sc.Sysctls, spec, path.Child("securityContext", "sysctls"))...)
	}
	return errs
}

// sysctlName is upstream's sysctl name: dot- or slash-separated segments
// of lower-case letters, digits, '-' and '_', at most 253 characters.
var sysctlName = regexp.MustCompile(`^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$`)

const sysctlMaxLength = 253

// validateSysctls checks names and duplicates, and refuses a sysctl of the
// network (IPC) namespace in a pod that shares the host's, as upstream's.
func validateSysctls(sysctls []corev1.Sysctl, spec *corev1.PodSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, s := range sysctls {
		p := path.Index(i).Child("name")
		switch {
		case s.Name == "":
			errs = append(errs, field.Required(p, ""))
		case len(s.Name) > sysctlMaxLength || !sysctlName.MatchString(s.Name):
			errs = append(errs, field.Invalid(p, s.Name, fmt.Sprintf("must have at most %d characters and match regex %s", sysctlMaxLength, sysctlName)))
		case seen.Has(s.Name):
			errs = append(errs, field.Duplicate(p, s.Name))
		}
		seen.Insert(s.Name)
		ns, _, _ := utilsysctl.GetNamespace(s.Name)
		switch {
		case spec.HostNetwork && ns == utilsysctl.NetNamespace:
			errs = append(errs, field.Invalid(p, s.Name, "may not be specified when 'hostNetwork' is true"))
		case spec.HostIPC && ns == utilsysctl.IPCNamespace:
			errs = append(errs, field.Invalid(p, s.Name, "may not be specified when 'hostIPC' is true"))
		}
	}
	return errs
}

func validateDNSConfig(c *corev1.PodDNSConfig, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	const maxNameservers, maxSearches = 3, 32
	if len(c.Nameservers) > maxNameservers {
		errs = append(errs, field.Invalid(path.Child("nameservers"), c.Nameservers, fmt.Sprintf("must not have more than %v nameservers", maxNameservers)))
	}
	if len(c.Searches) > maxSearches {
		errs = append(errs, field.Invalid(path.Child("searches"), c.Searches, fmt.Sprintf("must not have more than %v search paths", maxSearches)))
	}
	for i, o := range c.Options {
		if o.Name == "" {
			errs = append(errs, field.Required(path.Child("options").Index(i), "must not be empty"))
		}
	}
	return errs
}

// validateVolumes checks volume names and sources and returns the set of
// valid names for the volume mounts to refer to.
func validateVolumes(volumes []corev1.Volume, path *field.Path) (sets.Set[string], field.ErrorList) {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, v := range volumes {
		idx := path.Index(i)
		namePath := idx.Child("name")
		ok := true
		switch {
		case v.Name == "":
			errs = append(errs, field.Required(namePath, ""))
			ok = false
		case names.Has(v.Name):
			errs = append(errs, field.Duplicate(namePath, v.Name))
			ok = false
		default:
			for _, msg := range validation.IsDNS1123Label(v.Name) {
				errs = append(errs, field.Invalid(namePath, v.Name, msg))
				ok = false
			}
		}
		switch n := countVolumeSources(&v.VolumeSource); {
		case n == 0:
			errs = append(errs, field.Required(idx, "must specify a volume type"))
		case n > 1:
			errs = append(errs, field.Forbidden(idx, "may not specify more than 1 volume type"))
		}
		errs = append(errs, validateVolumeSource(&v.VolumeSource, idx)...)
		if ok {
			names.Insert(v.Name)
		}
	}
	return names, errs
}

func validateVolumeSource(src *corev1.VolumeSource, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s := src.Image; s != nil {
		p := path.Child("image")
		if s.Reference == "" {
			errs = append(errs, field.Required(p.Child("reference"), ""))
		}
		switch {
		case s.PullPolicy == "":
			errs = append(errs, field.Required(p.Child("pullPolicy"), ""))
		case !contains(pullPolicies, s.PullPolicy):
			errs = append(errs, field.NotSupported(p.Child("pullPolicy"), s.PullPolicy, pullPolicies))
		}
	}
	if s := src.Secret; s != nil {
		p := path.Child("secret")
		if s.SecretName == "" {
			errs = append(errs, field.Required(p.Child("secretName"), ""))
		}
		errs = append(errs, validateMode(s.DefaultMode, p.Child("defaultMode"))...)
		errs = append(errs, validateKeyToPaths(s.Items, p.Child("items"))...)
	}
	if s := src.ConfigMap; s != nil {
		p := path.Child("configMap")
		if s.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), ""))
		}
		errs = append(errs, validateMode(s.DefaultMode, p.Child("defaultMode"))...)
		errs = append(errs, validateKeyToPaths(s.Items, p.Child("items"))...)
	}
	if s := src.HostPath; s != nil {
		p := path.Child("hostPath")
		if s.Path == "" {
			errs = append(errs, field.Required(p.Child("path"), ""))
		}
		if s.Type != nil && !contains(hostPathTypes, *s.Type) {
			errs = append(errs, field.NotSupported(p.Child("type"), *s.Type, hostPathTypes))
		}
	}
	if s := src.PersistentVolumeClaim; s != nil && s.ClaimName == "" {
		errs = append(errs, field.Required(path.Child("persistentVolumeClaim", "claimName"), ""))
	}
	if s := src.EmptyDir; s != nil && s.SizeLimit != nil && s.SizeLimit.Sign() < 0 {
		errs = append(errs, field.Forbidden(path.Child("emptyDir", "sizeLimit"), "SizeLimit field must be a valid resource quantity"))
	}
	if s := src.Projected; s != nil {
		errs = append(errs, validateCertificateSources(s.Sources, path.Child("projected"))...)
	}
	return errs
}

// podCertificateKeyTypes are the key types a kubelet generates.
var podCertificateKeyTypes = []string{"RSA3072", "RSA4096", "ECDSAP256", "ECDSAP384", "ECDSAP521", "ED25519"}

// validateCertificateSources checks a projected volume's podCertificate
// and clusterTrustBundle sources with upstream's rules and messages (the
// other sources' checks are not done here yet).
func validateCertificateSources(sources []corev1.VolumeProjection, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	paths := sets.New[string]()
	addPath := func(p string, fp *field.Path) {
		errs = append(errs, validateLocalPath(p, fp)...)
		if paths.Has(p) {
			errs = append(errs, field.Invalid(path, p, "conflicting duplicate paths"))
		}
		paths.Insert(p)
	}
	for i, src := range sources {
		sp := path.Child("sources").Index(i)
		if b := src.ClusterTrustBundle; b != nil {
			bp := sp.Child("clusterTrustBundle")
			switch {
			case b.Name != nil && b.SignerName != nil:
				errs = append(errs, field.Invalid(bp, b, "only one of name and signerName may be used"))
			case b.Name != nil:
				if *b.Name == "" {
					errs = append(errs, field.Required(bp.Child("name"), "must be a valid object name"))
				}
				if b.LabelSelector != nil {
					errs = append(errs, field.Invalid(bp.Child("labelSelector"), b.LabelSelector, "labelSelector must be unset if name is specified"))
				}
			case b.SignerName != nil:
				errs = append(errs, podcertificaterequest.ValidateSignerName(bp.Child("signerName"), *b.SignerName)...)
				errs = append(errs, metavalidation.ValidateLabelSelector(b.LabelSelector, metavalidation.LabelSelectorValidationOptions{}, bp.Child("labelSelector"))...)
			default:
				errs = append(errs, field.Required(bp, "either name or signerName must be specified"))
			}
			if b.Path == "" {
				errs = append(errs, field.Required(bp.Child("path"), ""))
			} else {
				addPath(b.Path, bp.Child("path"))
			}
		}
		c := src.PodCertificate
		if c == nil {
			continue
		}
		cp := sp.Child("podCertificate")
		errs = append(errs, podcertificaterequest.ValidateSignerName(cp.Child("signerName"), c.SignerName)...)
		if c.UserAnnotations != nil {
			errs = append(errs, apivalidation.ValidateAnnotations(c.UserAnnotations, cp.Child("userAnnotations"))...)
		}
		if !slices.Contains(podCertificateKeyTypes, c.KeyType) {
			errs = append(errs, field.NotSupported(cp.Child("keyType"), c.KeyType, podCertificateKeyTypes))
		}
		if m := c.MaxExpirationSeconds; m != nil {
			if *m < 3600 {
				errs = append(errs, field.Invalid(cp.Child("maxExpirationSeconds"), *m, "if provided, maxExpirationSeconds must be >= 3600"))
			}
			upper := int32(91 * 24 * 3600)
			if podcertificaterequest.IsKubernetesSignerName(c.SignerName) {
				upper = 24 * 3600
			}
			if *m > upper {
				errs = append(errs, field.Invalid(cp.Child("maxExpirationSeconds"), *m, fmt.Sprintf("if provided, maxExpirationSeconds must be <= %d", upper)))
			}
		}
		n := 0
		for _, f := range []struct {
			p     string
			child string
		}{{c.CredentialBundlePath, "credentialBundlePath"}, {c.KeyPath, "keyPath"}, {c.CertificateChainPath, "certificateChainPath"}} {
			if f.p != "" {
				n++
				addPath(f.p, cp.Child(f.child))
			}
		}
		if n == 0 {
			errs = append(errs, field.Required(cp, "specify at least one of credentialBundlePath, keyPath, and certificateChainPath"))
		}
	}
	return errs
}

var hostPathTypes = []corev1.HostPathType{
	corev1.HostPathUnset, corev1.HostPathDirectoryOrCreate, corev1.HostPathDirectory, corev1.HostPathFileOrCreate,
	corev1.HostPathFile, corev1.HostPathSocket, corev1.HostPathCharDev, corev1.HostPathBlockDev,
}

func validateMode(mode *int32, path *field.Path) field.ErrorList {
	if mode != nil && (*mode > 0o777 || *mode < 0) {
		return field.ErrorList{field.Invalid(path, *mode, "must be a number between 0 and 0777 (octal), both inclusive")}
	}
	return nil
}

func validateKeyToPaths(items []corev1.KeyToPath, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, kp := range items {
		p := path.Index(i)
		if kp.Key == "" {
			errs = append(errs, field.Required(p.Child("key"), ""))
		}
		if kp.Path == "" {
			errs = append(errs, field.Required(p.Child("path"), ""))
		} else {
			errs = append(errs, validateLocalPath(kp.Path, p.Child("path"))...)
		}
		errs = append(errs, validateMode(kp.Mode, p.Child("mode"))...)
	}
	return errs
}

// validateLocalPath checks a relative path that must stay inside its volume.
func validateLocalPath(p string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if strings.HasPrefix(p, "/") {
		errs = append(errs, field.Invalid(path, p, "must be a relative path"))
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			errs = append(errs, field.Invalid(path, p, "must not contain '..'"))
			break
		}
	}
	return errs
}

func countVolumeSources(s *corev1.VolumeSource) int {
	n := 0
	for _, set := range []bool{
		s.HostPath != nil, s.EmptyDir != nil, s.GCEPersistentDisk != nil, s.AWSElasticBlockStore != nil,
		s.GitRepo != nil, s.Secret != nil, s.NFS != nil, s.ISCSI != nil, s.Glusterfs != nil,
		s.PersistentVolumeClaim != nil, s.RBD != nil, s.FlexVolume != nil, s.Cinder != nil, s.CephFS != nil,
		s.Flocker != nil, s.DownwardAPI != nil, s.FC != nil, s.AzureFile != nil, s.ConfigMap != nil,
		s.VsphereVolume != nil, s.Quobyte != nil, s.AzureDisk != nil, s.PhotonPersistentDisk != nil,
		s.Projected != nil, s.PortworxVolume != nil, s.ScaleIO != nil, s.StorageOS != nil, s.CSI != nil,
		s.Ephemeral != nil, s.Image != nil,
	} {
		if set {
			n++
		}
	}
	return n
}

func validateContainers(containers []corev1.Container, volumes sets.Set[string], names sets.Set[string], path *field.Path, init bool) field.ErrorList {
	var errs field.ErrorList
	for i := range containers {
		c := &containers[i]
		idx := path.Index(i)
		namePath := idx.Child("name")
		switch {
		case c.Name == "":
			errs = append(errs, field.Required(namePath, ""))
		case names.Has(c.Name):
			errs = append(errs, field.Duplicate(namePath, c.Name))
		default:
			for _, msg := range validation.IsDNS1123Label(c.Name) {
				errs = append(errs, field.Invalid(namePath, c.Name, msg))
			}
			names.Insert(c.Name)
		}
		if c.Image == "" {
			errs = append(errs, field.Required(idx.Child("image"), ""))
		} else if strings.TrimSpace(c.Image) != c.Image {
			errs = append(errs, field.Invalid(idx.Child("image"), c.Image, "must not have leading or trailing whitespace"))
		}
		switch {
		case c.ImagePullPolicy == "":
			errs = append(errs, field.Required(idx.Child("imagePullPolicy"), ""))
		case !contains(pullPolicies, c.ImagePullPolicy):
			errs = append(errs, field.NotSupported(idx.Child("imagePullPolicy"), c.ImagePullPolicy, pullPolicies))
		}
		switch {
		case c.TerminationMessagePolicy == "":
			errs = append(errs, field.Required(idx.Child("terminationMessagePolicy"), "must be 'File' or 'FallbackToLogsOnError'"))
		case !contains(messagePolicies, c.TerminationMessagePolicy):
			errs = append(errs, field.Invalid(idx.Child("terminationMessagePolicy"), c.TerminationMessagePolicy, "must be 'File' or 'FallbackToLogsOnError'"))
		}
		if c.RestartPolicy != nil {
			if !init {
				errs = append(errs, field.Forbidden(idx.Child("restartPolicy"), "may not be set for non-init containers"))
			} else if !contains(initRestartRules, *c.RestartPolicy) {
				errs = append(errs, field.NotSupported(idx.Child("restartPolicy"), *c.RestartPolicy, initRestartRules))
			}
		}
		sidecar := init && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		errs = append(errs, validatePorts(c.Ports, idx.Child("ports"))...)
		errs = append(errs, validateEnv(c.Env, idx.Child("env"))...)
		errs = append(errs, validateVolumeMounts(c.VolumeMounts, volumes, idx.Child("volumeMounts"))...)
		errs = append(errs, ValidateResourceRequirements(&c.Resources, idx.Child("resources"))...)
		if init && !sidecar {
			for _, probe := range []struct {
				name string
				p    *corev1.Probe
			}{{"livenessProbe", c.LivenessProbe}, {"readinessProbe", c.ReadinessProbe}, {"startupProbe", c.StartupProbe}} {
				if probe.p != nil {
					errs = append(errs, field.Forbidden(idx.Child(probe.name), "may not be set for init containers without restartPolicy=Always"))
				}
			}
			if c.Lifecycle != nil {
				errs = append(errs, field.Forbidden(idx.Child("lifecycle"), "may not be set for init containers without restartPolicy=Always"))
			}
		} else {
			errs = append(errs, validateProbe(c.LivenessProbe, idx.Child("livenessProbe"), true)...)
			errs = append(errs, validateProbe(c.ReadinessProbe, idx.Child("readinessProbe"), false)...)
			errs = append(errs, validateProbe(c.StartupProbe, idx.Child("startupProbe"), true)...)
		}
	}
	return errs
}

func validatePorts(ports []corev1.ContainerPort, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, p := range ports {
		idx := path.Index(i)
		if p.Name != "" {
			for _, msg := range validation.IsValidPortName(p.Name) {
				errs = append(errs, field.Invalid(idx.Child("name"), p.Name, msg))
			}
			if names.Has(p.Name) {
				errs = append(errs, field.Duplicate(idx.Child("name"), p.Name))
			}
			names.Insert(p.Name)
		}
		if p.ContainerPort == 0 {
			errs = append(errs, field.Required(idx.Child("containerPort"), ""))
		} else {
			for _, msg := range validation.IsValidPortNum(int(p.ContainerPort)) {
				errs = append(errs, field.Invalid(idx.Child("containerPort"), p.ContainerPort, msg))
			}
		}
		if p.HostPort != 0 {
			for _, msg := range validation.IsValidPortNum(int(p.HostPort)) {
				errs = append(errs, field.Invalid(idx.Child("hostPort"), p.HostPort, msg))
			}
		}
		switch {
		case p.Protocol == "":
			errs = append(errs, field.Required(idx.Child("protocol"), ""))
		case !contains(protocols, p.Protocol):
			errs = append(errs, field.NotSupported(idx.Child("protocol"), p.Protocol, protocols))
		}
	}
	return errs
}

func validateEnv(env []corev1.EnvVar, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, e := range env {
		idx := path.Index(i)
		if e.Name == "" {
			errs = append(errs, field.Required(idx.Child("name"), ""))
		} else {
			for _, msg := range validation.IsRelaxedEnvVarName(e.Name) {
				errs = append(errs, field.Invalid(idx.Child("name"), e.Name, msg))
			}
		}
		vf := e.ValueFrom
		if vf == nil {
			continue
		}
		n := 0
		for _, set := range []bool{vf.FieldRef != nil, vf.ResourceFieldRef != nil, vf.ConfigMapKeyRef != nil, vf.SecretKeyRef != nil, vf.FileKeyRef != nil} {
			if set {
				n++
			}
		}
		vfPath := idx.Child("valueFrom")
		switch {
		case n == 0:
			errs = append(errs, field.Invalid(vfPath, "", "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"))
		case n > 1:
			errs = append(errs, field.Invalid(vfPath, "", "may not have more than one field specified at a time"))
		}
		if e.Value != "" && n > 0 {
			errs = append(errs, field.Invalid(vfPath, "", "may not be specified when `value` is not empty"))
		}
		if r := vf.ConfigMapKeyRef; r != nil {
			errs = append(errs, validateKeySelector(r.Name, r.Key, vfPath.Child("configMapKeyRef"))...)
		}
		if r := vf.SecretKeyRef; r != nil {
			errs = append(errs, validateKeySelector(r.Name, r.Key, vfPath.Child("secretKeyRef"))...)
		}
		if r := vf.FieldRef; r != nil && r.FieldPath == "" {
			errs = append(errs, field.Required(vfPath.Child("fieldRef", "fieldPath"), ""))
		}
		if r := vf.ResourceFieldRef; r != nil && r.Resource == "" {
			errs = append(errs, field.Required(vfPath.Child("resourceFieldRef", "resource"), ""))
		}
	}
	return errs
}

func validateKeySelector(name, key string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if name == "" {
		errs = append(errs, field.Required(path.Child("name"), ""))
	}
	if key == "" {
		errs = append(errs, field.Required(path.Child("key"), ""))
	} else {
		for _, msg := range validation.IsConfigMapKey(key) {
			errs = append(errs, field.Invalid(path.Child("key"), key, msg))
		}
	}
	return errs
}

func validateVolumeMounts(mounts []corev1.VolumeMount, volumes sets.Set[string], path *field.Path) field.ErrorList {
	var errs field.ErrorList
	paths := sets.New[string]()
	for i, m := range mounts {
		idx := path.Index(i)
		switch {
		case m.Name == "":
			errs = append(errs, field.Required(idx.Child("name"), ""))
		case !volumes.Has(m.Name):
			errs = append(errs, field.NotFound(idx.Child("name"), m.Name))
		}
		if m.MountPath == "" {
			errs = append(errs, field.Required(idx.Child("mountPath"), ""))
		} else if paths.Has(m.MountPath) {
			errs = append(errs, field.Invalid(idx.Child("mountPath"), m.MountPath, "must be unique"))
		}
		paths.Insert(m.MountPath)
		if m.SubPath != "" {
			errs = append(errs, validateLocalPath(m.SubPath, idx.Child("subPath"))...)
		}
	}
	return errs
}

func validateProbe(p *corev1.Probe, path *field.Path, mustSucceedOnce bool) field.ErrorList {
	if p == nil {
		return nil
	}
	var errs field.ErrorList
	n := 0
	for _, set := range []bool{p.Exec != nil, p.HTTPGet != nil, p.TCPSocket != nil, p.GRPC != nil} {
		if set {
			n++
		}
	}
	switch {
	case n == 0:
		errs = append(errs, field.Required(path, "must specify a handler type"))
	case n > 1:
		errs = append(errs, field.Forbidden(path, "may not specify more than 1 handler type"))
	}
	for _, f := range []struct {
		name string
		v    int32
	}{
		{"initialDelaySeconds", p.InitialDelaySeconds}, {"timeoutSeconds", p.TimeoutSeconds},
		{"periodSeconds", p.PeriodSeconds}, {"successThreshold", p.SuccessThreshold}, {"failureThreshold", p.FailureThreshold},
	} {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(f.v), path.Child(f.name))...)
	}
	if mustSucceedOnce && p.SuccessThreshold != 1 {
		errs = append(errs, field.Invalid(path.Child("successThreshold"), p.SuccessThreshold, "must be 1"))
	}
	if p.HTTPGet != nil {
		errs = append(errs, validatePortNumOrName(p.HTTPGet.Port.IntValue(), p.HTTPGet.Port.String(), p.HTTPGet.Port.Type == 0, path.Child("httpGet", "port"))...)
		if s := p.HTTPGet.Scheme; s != corev1.URISchemeHTTP && s != corev1.URISchemeHTTPS {
			errs = append(errs, field.NotSupported(path.Child("httpGet", "scheme"), s, []corev1.URIScheme{corev1.URISchemeHTTP, corev1.URISchemeHTTPS}))
		}
	}
	if p.TCPSocket != nil {
		errs = append(errs, validatePortNumOrName(p.TCPSocket.Port.IntValue(), p.TCPSocket.Port.String(), p.TCPSocket.Port.Type == 0, path.Child("tcpSocket", "port"))...)
	}
	if p.Exec != nil && len(p.Exec.Command) == 0 {
		errs = append(errs, field.Required(path.Child("exec", "command"), ""))
	}
	return errs
}

func validatePortNumOrName(num int, str string, isInt bool, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if isInt {
		for _, msg := range validation.IsValidPortNum(num) {
			errs = append(errs, field.Invalid(path, num, msg))
		}
		return errs
	}
	for _, msg := range validation.IsValidPortName(str) {
		errs = append(errs, field.Invalid(path, str, msg))
	}
	return errs
}

// ValidateResourceRequirements checks resource names and quantities and that
// each request is at most its limit.
func ValidateResourceRequirements(r *corev1.ResourceRequirements, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	limPath, reqPath := path.Child("limits"), path.Child("requests")
	for name, q := range r.Limits {
		errs = append(errs, validateResourceQuantity(name, q, limPath.Key(string(name)))...)
	}
	for name, q := range r.Requests {
		p := reqPath.Key(string(name))
		errs = append(errs, validateResourceQuantity(name, q, p)...)
		limit, ok := r.Limits[name]
		if ok && q.Cmp(limit) > 0 {
			errs = append(errs, field.Invalid(p, q.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", name, limit.String())))
		}
	}
	return errs
}

func validateResourceQuantity(name corev1.ResourceName, q resource.Quantity, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(string(name)) {
		errs = append(errs, field.Invalid(path, name, msg))
	}
	if q.Sign() < 0 {
		errs = append(errs, field.Invalid(path, q.String(), "must be greater than or equal to 0"))
	}
	if (name == corev1.ResourceMemory || name == corev1.ResourceEphemeralStorage) && q.MilliValue()%1000 != 0 {
		errs = append(errs, field.Invalid(path, q.String(), "must be an integer"))
	}
	return errs
}

func validateTolerations(tolerations []corev1.Toleration, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, t := range tolerations {
		idx := path.Index(i)
		if t.Key != "" {
			errs = append(errs, metavalidation.ValidateLabelName(t.Key, idx.Child("key"))...)
		}
		if t.Key == "" && t.Operator != corev1.TolerationOpExists {
			errs = append(errs, field.Invalid(idx.Child("operator"), t.Operator, "operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
		}
		if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
			errs = append(errs, field.Invalid(idx.Child("effect"), t.Effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
		}
		switch t.Operator {
		case corev1.TolerationOpEqual, "":
			for _, msg := range validation.IsValidLabelValue(t.Value) {
				errs = append(errs, field.Invalid(idx.Child("operator"), t.Value, msg))
			}
		case corev1.TolerationOpExists:
			if t.Value != "" {
				errs = append(errs, field.Invalid(idx.Child("operator"), t.Value, "value must be empty when `operator` is 'Exists'"))
			}
		default:
			errs = append(errs, field.NotSupported(idx.Child("operator"), t.Operator, tolerationOps))
		}
		if t.Effect != "" && !contains(taintEffects, t.Effect) {
			errs = append(errs, field.NotSupported(idx.Child("effect"), t.Effect, taintEffects))
		}
	}
	return errs
}

// podUpdateForbiddenMessage lists what a pod update may change, as upstream
// words it.
const podUpdateForbiddenMessage = "pod updates may not change fields other than `spec.containers[*].image`," +
	"`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations)," +
	"`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"

// validatePodUpdate checks the few spec changes a pod allows after creation.
func validatePodUpdate(pod, old *corev1.Pod) field.ErrorList {
	specPath := field.NewPath("spec")
	errs := allowExistingInitRestart(ValidatePodSpec(&pod.Spec, specPath), old)

	if len(pod.Spec.Containers) != len(old.Spec.Containers) || len(pod.Spec.InitContainers) != len(old.Spec.InitContainers) {
		errs = append(errs, field.Forbidden(specPath, podUpdateForbiddenMessage))
		return errs
	}
	// activeDeadlineSeconds may be added or lowered, never removed or raised.
	if old.Spec.ActiveDeadlineSeconds != nil {
		adsPath := specPath.Child("activeDeadlineSeconds")
		switch n := pod.Spec.ActiveDeadlineSeconds; {
		case n == nil:
			errs = append(errs, field.Invalid(adsPath, n, "must not update from a positive integer to nil value"))
		case *n > *old.Spec.ActiveDeadlineSeconds:
			errs = append(errs, field.Invalid(adsPath, *n, "must be less than or equal to previous value"))
		}
	}
	errs = append(errs, validateTolerationsUpdate(pod.Spec.Tolerations, old.Spec.Tolerations, specPath.Child("tolerations"))...)

	// Copy the mutable fields from the new spec onto the old one: anything
	// else that differs is a forbidden change.
	munged := *old.Spec.DeepCopy()
	for i := range munged.Containers {
		munged.Containers[i].Image = pod.Spec.Containers[i].Image
	}
	for i := range munged.InitContainers {
		munged.InitContainers[i].Image = pod.Spec.InitContainers[i].Image
	}
	munged.ActiveDeadlineSeconds = pod.Spec.ActiveDeadlineSeconds
	munged.Tolerations = pod.Spec.Tolerations
	if old.Spec.TerminationGracePeriodSeconds != nil && *old.Spec.TerminationGracePeriodSeconds < 0 &&
		pod.Spec.TerminationGracePeriodSeconds != nil && *pod.Spec.TerminationGracePeriodSeconds == 1 {
		munged.TerminationGracePeriodSeconds = pod.Spec.TerminationGracePeriodSeconds
	}
	// Scheduling gates may only be removed; while the pod is still gated its
	// node selector may gain entries.
	if len(pod.Spec.SchedulingGates) <= len(old.Spec.SchedulingGates) && isSubset(pod.Spec.SchedulingGates, old.Spec.SchedulingGates) {
		munged.SchedulingGates = pod.Spec.SchedulingGates
	}
	if len(old.Spec.SchedulingGates) > 0 && nodeSelectorGrows(old.Spec.NodeSelector, pod.Spec.NodeSelector) {
		munged.NodeSelector = pod.Spec.NodeSelector
	}
	// Ephemeral containers change through their own subresource; resources
	// through pods/resize.
	munged.EphemeralContainers = pod.Spec.EphemeralContainers
	if !apiequality.Semantic.DeepEqual(pod.Spec, munged) {
		diff := cmp.Diff(old.Spec, munged)
		errs = append(errs, field.Forbidden(specPath, podUpdateForbiddenMessage+"\n"+diff))
	}
	return errs
}

func isSubset[T comparable](sub, of []T) bool {
	set := sets.New(of...)
	for _, v := range sub {
		if !set.Has(v) {
			return false
		}
	}
	return true
}

func nodeSelectorGrows(old, new map[string]string) bool {
	for k, v := range old {
		if nv, ok := new[k]; !ok || nv != v {
			return false
		}
	}
	return true
}

func validateTolerationsUpdate(tolerations, old []corev1.Toleration, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, o := range old {
		found := false
		for _, n := range tolerations {
			if n.Key == o.Key && n.Operator == o.Operator && n.Value == o.Value && n.Effect == o.Effect {
				// tolerationSeconds may only shrink, and not be dropped.
				if o.TolerationSeconds == nil || (n.TolerationSeconds != nil && *n.TolerationSeconds <= *o.TolerationSeconds) || o.Effect != corev1.TaintEffectNoExecute {
					found = true
					break
				}
			}
		}
		if !found {
			errs = append(errs, field.Forbidden(path, "existing toleration can not be modified except its tolerationSeconds"))
			break
		}
	}
	return errs
}

// validatePodStatusUpdate checks a status update: the spec is the old one
// already; the status must name a known phase and well-formed conditions.
func validatePodStatusUpdate(pod, old *corev1.Pod) field.ErrorList {
	var errs field.ErrorList
	statusPath := field.NewPath("status")
	if old.Spec.NodeName != "" && pod.Status.NominatedNodeName != "" {
		for _, msg := range validation.IsDNS1123Subdomain(pod.Status.NominatedNodeName) {
			errs = append(errs, field.Invalid(statusPath.Child("nominatedNodeName"), pod.Status.NominatedNodeName, msg))
		}
	}
	errs = append(errs, apivalidation.ValidateImmutableField(pod.Status.QOSClass, old.Status.QOSClass, statusPath.Child("qosClass"))...)
	if isTerminal(old.Status.Phase) && old.Status.Phase != pod.Status.Phase {
		errs = append(errs, field.Forbidden(statusPath.Child("phase"), fmt.Sprintf("cannot transition from terminal phase %q to %q", old.Status.Phase, pod.Status.Phase)))
	}
	for i, c := range pod.Status.Conditions {
		if c.Type == "" {
			errs = append(errs, field.Required(statusPath.Child("conditions").Index(i).Child("type"), ""))
		}
	}
	for i, ip := range pod.Status.PodIPs {
		if net.ParseIP(ip.IP) == nil {
			errs = append(errs, field.Invalid(statusPath.Child("podIPs").Index(i).Child("ip"), ip.IP, "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"))
		}
	}
	errs = append(errs, validateContainerStatusNames(pod.Status.ContainerStatuses, pod.Spec.Containers, statusPath.Child("containerStatuses"))...)
	errs = append(errs, validateContainerStatusNames(pod.Status.InitContainerStatuses, pod.Spec.InitContainers, statusPath.Child("initContainerStatuses"))...)
	return errs
}

func validateContainerStatusNames(statuses []corev1.ContainerStatus, containers []corev1.Container, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for _, c := range containers {
		names.Insert(c.Name)
	}
	for i, s := range statuses {
		if !names.Has(s.Name) {
			errs = append(errs, field.NotFound(path.Index(i).Child("name"), s.Name))
		}
	}
	return errs
}

func isTerminal(phase corev1.PodPhase) bool {
	return phase == corev1.PodSucceeded || phase == corev1.PodFailed
}

func contains[T comparable](list []T, v T) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
