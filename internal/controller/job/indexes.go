package job

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

const (
	// completionIndexEnv is the variable Indexed Jobs' containers get.
	completionIndexEnv = "JOB_COMPLETION_INDEX"
	// noIndex marks a pod without a valid completion index.
	noIndex = -1
	// maxGeneratedNameLength is the longest generateName prefix the API
	// server keeps (63 minus the 5 random characters).
	maxGeneratedNameLength = 58
)

func isIndexed(j *batchv1.Job) bool {
	return j.Spec.CompletionMode != nil && *j.Spec.CompletionMode == batchv1.IndexedCompletion
}

func hasBackoffLimitPerIndex(j *batchv1.Job) bool { return j.Spec.BackoffLimitPerIndex != nil }

func completions(j *batchv1.Job) int {
	if j.Spec.Completions == nil {
		return 0
	}
	return int(*j.Spec.Completions)
}

// span is an inclusive range of completion indexes.
type span struct{ first, last int }

// indexSet is a sorted list of disjoint, non-adjacent spans: the form of
// status.completedIndexes and status.failedIndexes ("1,3-5,7").
type indexSet []span

// parseIndexSet reads "1,3-5" keeping indexes below limit; malformed parts
// are skipped, as upstream does.
func parseIndexSet(s string, limit int) indexSet {
	if s == "" {
		return nil
	}
	var out indexSet
	for _, part := range strings.Split(s, ",") {
		bounds := strings.Split(part, "-")
		first, err := strconv.Atoi(bounds[0])
		if err != nil {
			continue
		}
		if first >= limit {
			break
		}
		last := first
		if len(bounds) > 1 {
			if last, err = strconv.Atoi(bounds[1]); err != nil {
				continue
			}
			last = min(last, limit-1)
		}
		if n := len(out); n > 0 && out[n-1].last == first-1 {
			out[n-1].last = last
			continue
		}
		out = append(out, span{first, last})
	}
	return out
}

// with returns the set plus the given indexes (in any order).
func (s indexSet) with(ixs ...int) indexSet {
	sorted := slices.Clone(ixs)
	slices.Sort(sorted)
	add := make(indexSet, 0, len(sorted))
	for _, ix := range sorted {
		add = append(add, span{ix, ix})
	}
	return s.union(add)
}

// union merges two sets.
func (s indexSet) union(o indexSet) indexSet {
	all := make(indexSet, 0, len(s)+len(o))
	all = append(all, s...)
	all = append(all, o...)
	slices.SortFunc(all, func(a, b span) int { return a.first - b.first })
	var out indexSet
	for _, sp := range all {
		if n := len(out); n > 0 && sp.first <= out[n-1].last+1 {
			out[n-1].last = max(out[n-1].last, sp.last)
			continue
		}
		out = append(out, sp)
	}
	return out
}

func (s indexSet) total() int {
	n := 0
	for _, sp := range s {
		n += sp.last - sp.first + 1
	}
	return n
}

func (s indexSet) has(ix int) bool {
	for _, sp := range s {
		if ix < sp.first {
			return false
		}
		if ix <= sp.last {
			return true
		}
	}
	return false
}

// String renders upstream's format: two adjacent indexes are "3,4", three
// or more "3-5".
func (s indexSet) String() string {
	var b strings.Builder
	for _, sp := range s {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(sp.first))
		switch {
		case sp.last == sp.first+1:
			b.WriteByte(',')
			b.WriteString(strconv.Itoa(sp.last))
		case sp.last > sp.first:
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(sp.last))
		}
	}
	return b.String()
}

// overlap counts the indexes s and o share.
func (s indexSet) overlap(o indexSet) int {
	n := 0
	for _, a := range s {
		for _, b := range o {
			if d := min(a.last, b.last) - max(a.first, b.first) + 1; d > 0 {
				n += d
			}
		}
	}
	return n
}

// completionIndex is the pod's index from its annotation, or noIndex.
func completionIndex(p *corev1.Pod) int {
	v, ok := p.Annotations[batchv1.JobCompletionIndexAnnotation]
	if !ok {
		return noIndex
	}
	i, err := strconv.Atoi(v)
	if err != nil || i < 0 {
		return noIndex
	}
	return i
}

// validIndex is true for an index inside the job's completions.
func validIndex(j *batchv1.Job, ix int) bool { return ix != noIndex && ix < completions(j) }

func annotationInt32(p *corev1.Pod, key string) int32 {
	v, ok := p.Annotations[key]
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > math.MaxInt32 {
		return 0
	}
	return int32(n)
}

// indexFailureCount is the failures counted against the pod's index before
// this pod (batch.kubernetes.io/job-index-failure-count).
func indexFailureCount(p *corev1.Pod) int32 {
	return annotationInt32(p, batchv1.JobIndexFailureCountAnnotation)
}

// indexAbsoluteFailureCount adds the failures the pod failure policy ignored.
func indexAbsoluteFailureCount(p *corev1.Pod) int32 {
	return indexFailureCount(p) + annotationInt32(p, batchv1.JobIndexIgnoredFailureCountAnnotation)
}

// indexesOf returns the indexes of pods.
func indexesOf(pods []*corev1.Pod) []int {
	var out []int
	for _, p := range pods {
		if ix := completionIndex(p); ix != noIndex {
			out = append(out, ix)
		}
	}
	return out
}

// firstPendingIndexes returns up to count indexes below completions that
// are neither succeeded, active, failed nor (with podReplacementPolicy
// Failed) held by a terminating pod: the lowest first.
func firstPendingIndexes(taken indexSet, count, completions int) []int {
	var out []int
	for ix := 0; ix < completions && len(out) < count; ix++ {
		if !taken.has(ix) {
			out = append(out, ix)
		}
	}
	return out
}

// podGenerateName is "<job>-<index>-", the job name cut so that the
// prefix fits the API server's limit.
func podGenerateName(job string, ix int) string {
	suffix := "-" + strconv.Itoa(ix) + "-"
	prefix := job + suffix
	if len(prefix) > maxGeneratedNameLength {
		prefix = prefix[:maxGeneratedNameLength-len(suffix)] + suffix
	}
	return prefix
}

// addIndexEnv gives every (init) container JOB_COMPLETION_INDEX from the
// pod's completion-index label, unless it already has the variable.
func addIndexEnv(spec *corev1.PodSpec) {
	add := func(c *corev1.Container) {
		for _, e := range c.Env {
			if e.Name == completionIndexEnv {
				return
			}
		}
		c.Env = append(c.Env, corev1.EnvVar{Name: completionIndexEnv, ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: fmt.Sprintf("metadata.labels['%s']", batchv1.JobCompletionIndexAnnotation)},
		}})
	}
	for i := range spec.InitContainers {
		add(&spec.InitContainers[i])
	}
	for i := range spec.Containers {
		add(&spec.Containers[i])
	}
}
