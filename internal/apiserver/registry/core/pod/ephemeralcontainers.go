package pod

import (
	"context"
	"fmt"
	"reflect"
	"unicode"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// allowedEphemeralFields are the container fields an ephemeral container
// may set (upstream's allowedEphemeralContainerFields): no ports, probes,
// lifecycle hooks or resources.
var allowedEphemeralFields = map[string]bool{
	"Name": true, "Image": true, "Command": true, "Args": true, "WorkingDir": true, "EnvFrom": true, "Env": true,
	"VolumeMounts": true, "VolumeDevices": true, "TerminationMessagePath": true, "TerminationMessagePolicy": true,
	"ImagePullPolicy": true, "SecurityContext": true, "Stdin": true, "StdinOnce": true, "TTY": true,
}

// UpdateEphemeralContainers is the pods/ephemeralcontainers update: the
// current pod with want's ephemeral containers (defaulted), and the
// errors when the change is not allowed: existing ephemeral containers
// may be neither removed nor changed, and new ones are checked as
// upstream's validateEphemeralContainers does.
func UpdateEphemeralContainers(want, cur *corev1.Pod) (*corev1.Pod, field.ErrorList) {
	next := cur.DeepCopy()
	next.Spec.EphemeralContainers = nil
	for _, ec := range want.Spec.EphemeralContainers {
		c := corev1.Container(ec.EphemeralContainerCommon)
		defaultContainer(&c, cur.Spec.HostNetwork)
		ec.EphemeralContainerCommon = corev1.EphemeralContainerCommon(c)
		next.Spec.EphemeralContainers = append(next.Spec.EphemeralContainers, *ec.DeepCopy())
	}
	if _, ok := cur.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		return nil, field.ErrorList{field.Forbidden(field.NewPath(""), "static pods do not support ephemeral containers")}
	}
	errs := validateEphemeralContainers(next)
	specPath := field.NewPath("spec", "ephemeralContainers")
	byName := map[string]*corev1.EphemeralContainer{}
	for i := range next.Spec.EphemeralContainers {
		byName[next.Spec.EphemeralContainers[i].Name] = &next.Spec.EphemeralContainers[i]
	}
	for _, old := range cur.Spec.EphemeralContainers {
		nc, ok := byName[old.Name]
		switch {
		case !ok:
			errs = append(errs, field.Forbidden(specPath, fmt.Sprintf("existing ephemeral containers %q may not be removed\n", old.Name)))
		case !apiequality.Semantic.DeepEqual(old, *nc):
			errs = append(errs, field.Forbidden(specPath, fmt.Sprintf("existing ephemeral containers %q may not be changed\n%v", old.Name, cmp.Diff(old, *nc))))
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return next, nil
}

func validateEphemeralContainers(pod *corev1.Pod) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("spec", "ephemeralContainers")
	volumes := sets.New[string]()
	for _, v := range pod.Spec.Volumes {
		volumes.Insert(v.Name)
	}
	others := sets.New[string]()
	for _, c := range append(append([]corev1.Container{}, pod.Spec.Containers...), pod.Spec.InitContainers...) {
		others.Insert(c.Name)
	}
	// The checks every container gets (name, image, policies, env, volume
	// mounts, duplicates among the ephemeral containers).
	cs := make([]corev1.Container, len(pod.Spec.EphemeralContainers))
	for i := range pod.Spec.EphemeralContainers {
		cs[i] = corev1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
	}
	errs = append(errs, validateContainers(cs, volumes, sets.New[string](), path, false)...)
	for i := range pod.Spec.EphemeralContainers {
		ec := &pod.Spec.EphemeralContainers[i]
		idx := path.Index(i)
		if others.Has(ec.Name) {
			errs = append(errs, field.Duplicate(idx.Child("name"), ec.Name))
		}
		if ec.TargetContainerName != "" && !others.Has(ec.TargetContainerName) {
			errs = append(errs, field.NotFound(idx.Child("targetContainerName"), ec.TargetContainerName))
		}
		errs = append(errs, allowList(ec.EphemeralContainerCommon, idx)...)
		for j, vm := range ec.VolumeMounts {
			if vm.SubPath != "" {
				errs = append(errs, field.Forbidden(idx.Child("volumeMounts").Index(j).Child("subPath"), "cannot be set for an Ephemeral Container"))
			}
			if vm.SubPathExpr != "" {
				errs = append(errs, field.Forbidden(idx.Child("volumeMounts").Index(j).Child("subPathExpr"), "cannot be set for an Ephemeral Container"))
			}
		}
	}
	return errs
}

// allowList forbids every set field of c outside allowedEphemeralFields.
func allowList(c corev1.EphemeralContainerCommon, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	t, v := reflect.TypeOf(c), reflect.ValueOf(c)
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if allowedEphemeralFields[f.Name] {
			continue
		}
		if !reflect.DeepEqual(v.Field(i).Interface(), reflect.Zero(f.Type).Interface()) {
			r, n := utf8.DecodeRuneInString(f.Name)
			errs = append(errs, field.Forbidden(path.Child(string(unicode.ToLower(r))+f.Name[n:]), "cannot be set for an Ephemeral Container"))
		}
	}
	return errs
}

type ephemeralUpdateKey struct{}

// WithEphemeralContainersUpdate marks ctx as a pods/ephemeralcontainers
// update, the one update that may change spec.ephemeralContainers.
func WithEphemeralContainersUpdate(ctx context.Context) context.Context {
	return context.WithValue(ctx, ephemeralUpdateKey{}, true)
}

// ephemeralContainersUnchanged refuses a change of ephemeral containers
// by any update but pods/ephemeralcontainers, as upstream.
func ephemeralContainersUnchanged(ctx context.Context, pod, old *corev1.Pod) field.ErrorList {
	if marked, _ := ctx.Value(ephemeralUpdateKey{}).(bool); marked {
		return nil
	}
	if apiequality.Semantic.DeepEqual(pod.Spec.EphemeralContainers, old.Spec.EphemeralContainers) {
		return nil
	}
	return field.ErrorList{field.Forbidden(field.NewPath("spec", "ephemeralContainers"),
		"ephemeral containers may only be added through the pods/ephemeralcontainers subresource\n"+cmp.Diff(old.Spec.EphemeralContainers, pod.Spec.EphemeralContainers))}
}
