package quota

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// ResourceNames are the names in l, sorted.
func ResourceNames(l corev1.ResourceList) []corev1.ResourceName {
	out := make([]corev1.ResourceName, 0, len(l))
	for k := range l {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Add is a + b.
func Add(a, b corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for k, v := range a {
		out[k] = v.DeepCopy()
	}
	for k, v := range b {
		sum := v.DeepCopy()
		if cur, ok := out[k]; ok {
			sum = cur.DeepCopy()
			sum.Add(v)
		}
		out[k] = sum
	}
	return out
}

// SubtractNonNegative is a - b, no entry below zero.
func SubtractNonNegative(a, b corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for k, v := range a {
		d := v.DeepCopy()
		if s, ok := b[k]; ok {
			d.Sub(s)
		}
		if d.Sign() < 0 {
			d = *resource.NewQuantity(0, v.Format)
		}
		out[k] = d
	}
	return out
}

// Mask keeps the entries of l named in names.
func Mask(l corev1.ResourceList, names []corev1.ResourceName) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, n := range names {
		if v, ok := l[n]; ok {
			out[n] = v.DeepCopy()
		}
	}
	return out
}

// RemoveZeros drops the zero entries.
func RemoveZeros(l corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for k, v := range l {
		if !v.IsZero() {
			out[k] = v
		}
	}
	return out
}

// Negative are the names of l's negative entries.
func Negative(l corev1.ResourceList) []corev1.ResourceName {
	var out []corev1.ResourceName
	for _, k := range ResourceNames(l) {
		if v := l[k]; v.Sign() < 0 {
			out = append(out, k)
		}
	}
	return out
}

// LessThanOrEqual says every entry of a named in b is at most b's;
// exceeded names the others.
func LessThanOrEqual(a, b corev1.ResourceList) (bool, []corev1.ResourceName) {
	var exceeded []corev1.ResourceName
	for _, k := range ResourceNames(a) {
		if limit, ok := b[k]; ok {
			v := a[k]
			if v.Cmp(limit) > 0 {
				exceeded = append(exceeded, k)
			}
		}
	}
	return len(exceeded) == 0, exceeded
}

// Equals says a and b hold the same names with equal quantities.
func Equals(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || v.Cmp(w) != 0 {
			return false
		}
	}
	return true
}

// String is upstream's form of a list in quota messages:
// "name=value" sorted by name, comma-separated.
func String(l corev1.ResourceList) string {
	parts := make([]string, 0, len(l))
	for _, k := range ResourceNames(l) {
		v := l[k]
		parts = append(parts, string(k)+"="+v.String())
	}
	return strings.Join(parts, ",")
}

// NamesString is a sorted, comma-separated list of names.
func NamesString(names []corev1.ResourceName) string {
	s := make([]string, len(names))
	for i, n := range names {
		s[i] = string(n)
	}
	sort.Strings(s)
	return strings.Join(s, ",")
}
