// Package tainttoleration filters out nodes with NoSchedule or NoExecute
// taints the pod does not tolerate, and prefers nodes with fewer
// untolerated PreferNoSchedule taints.
package tainttoleration

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

// Name is the plugin's name.
const Name = "TaintToleration"

const preScoreKey framework.StateKey = "PreScore" + Name

// TaintToleration is the plugin.
type TaintToleration struct{}

var (
	_ framework.FilterPlugin    = (*TaintToleration)(nil)
	_ framework.PreScorePlugin  = (*TaintToleration)(nil)
	_ framework.ScorePlugin     = (*TaintToleration)(nil)
	_ framework.ScoreExtensions = (*TaintToleration)(nil)
)

// New builds the plugin.
func New(context.Context, any, framework.Handle) (framework.Plugin, error) {
	return &TaintToleration{}, nil
}

// Name implements framework.Plugin.
func (*TaintToleration) Name() string { return Name }

// Tolerates reports whether toleration t tolerates taint.
func Tolerates(t *v1.Toleration, taint *v1.Taint) bool {
	if t.Effect != "" && t.Effect != taint.Effect {
		return false
	}
	if t.Key != "" && t.Key != taint.Key {
		return false
	}
	switch t.Operator {
	case v1.TolerationOpExists:
		return true
	case v1.TolerationOpEqual, "":
		return t.Value == taint.Value
	}
	return false
}

// TolerationsTolerateTaint reports whether any toleration tolerates taint.
func TolerationsTolerateTaint(tolerations []v1.Toleration, taint *v1.Taint) bool {
	for i := range tolerations {
		if Tolerates(&tolerations[i], taint) {
			return true
		}
	}
	return false
}

// FindUntolerated returns the first taint with an effect accepted by
// inclusion that no toleration tolerates.
func FindUntolerated(taints []v1.Taint, tolerations []v1.Toleration, inclusion func(*v1.Taint) bool) (v1.Taint, bool) {
	for i := range taints {
		if inclusion != nil && !inclusion(&taints[i]) {
			continue
		}
		if !TolerationsTolerateTaint(tolerations, &taints[i]) {
			return taints[i], true
		}
	}
	return v1.Taint{}, false
}

// Filter implements framework.FilterPlugin.
func (*TaintToleration) Filter(_ context.Context, _ *framework.CycleState, pod *v1.Pod, ni *framework.NodeInfo) *framework.Status {
	taint, found := FindUntolerated(ni.Node().Spec.Taints, pod.Spec.Tolerations, func(t *v1.Taint) bool {
		return t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute
	})
	if !found {
		return nil
	}
	return framework.NewStatus(framework.UnschedulableAndUnresolvable,
		fmt.Sprintf("node(s) had untolerated taint {%s: %s}", taint.Key, taint.Value))
}

type preScoreState struct{ tolerations []v1.Toleration }

func (s *preScoreState) Clone() framework.StateData { return s }

// PreScore keeps the tolerations that matter for PreferNoSchedule.
func (*TaintToleration) PreScore(_ context.Context, state *framework.CycleState, pod *v1.Pod, _ []*framework.NodeInfo) *framework.Status {
	var tols []v1.Toleration
	for _, t := range pod.Spec.Tolerations {
		if t.Effect == "" || t.Effect == v1.TaintEffectPreferNoSchedule {
			tols = append(tols, t)
		}
	}
	state.Write(preScoreKey, &preScoreState{tolerations: tols})
	return nil
}

// Score counts the node's untolerated PreferNoSchedule taints.
func (*TaintToleration) Score(_ context.Context, state *framework.CycleState, _ *v1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	s, err := framework.ReadAs[*preScoreState](state, preScoreKey)
	if err != nil {
		return 0, framework.AsStatus(err)
	}
	var n int64
	for i := range ni.Node().Spec.Taints {
		t := &ni.Node().Spec.Taints[i]
		if t.Effect == v1.TaintEffectPreferNoSchedule && !TolerationsTolerateTaint(s.tolerations, t) {
			n++
		}
	}
	return n, nil
}

// ScoreExtensions implements framework.ScorePlugin.
func (p *TaintToleration) ScoreExtensions() framework.ScoreExtensions { return p }

// NormalizeScore makes fewer untolerated taints score higher.
func (*TaintToleration) NormalizeScore(_ context.Context, _ *framework.CycleState, _ *v1.Pod, scores framework.NodeScoreList) *framework.Status {
	framework.DefaultNormalizeScore(framework.MaxNodeScore, true, scores)
	return nil
}
