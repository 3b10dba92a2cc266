package framework

// DefaultNormalizeScore scales scores so that the highest becomes
// maxPriority (scores all zero stay zero, or become maxPriority when
// reversed); with reverse, high raw scores become low, as upstream's
// helper does for "fewer is better" plugins.
func DefaultNormalizeScore(maxPriority int64, reverse bool, scores NodeScoreList) {
	var highest int64
	for _, s := range scores {
		highest = max(highest, s.Score)
	}
	if highest == 0 {
		if reverse {
			for i := range scores {
				scores[i].Score = maxPriority
			}
		}
		return
	}
	for i := range scores {
		s := scores[i].Score * maxPriority / highest
		if reverse {
			s = maxPriority - s
		}
		scores[i].Score = s
	}
}
