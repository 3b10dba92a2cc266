package integration

import "testing"

// TestAPI runs the scenarios that need no cluster of their own against
// one shared cluster, in parallel. Each works in its own namespace (and
// names its cluster-scoped objects after it), and checks that rejected
// writes changed nothing in that namespace's keys.
func TestAPI(t *testing.T) {
	c := startCluster(t)
	tests := []struct {
		name string
		fn   func(*testing.T, *cluster)
	}{
		{"CRUD", testCRUD},
		{"GenerateNameUIDTimestamp", testGenerateNameUIDTimestamp},
		{"DryRun", testDryRun},
		{"Finalizers", testFinalizers},
		{"Binding", testBinding},
		{"GracefulPodDeletion", testGracefulPodDeletion},
		{"Selectors", testSelectors},
		{"StaleUpdateConflict", testStaleUpdateConflict},
		{"Paging", testPaging},
		{"ServiceAllocation", testServiceAllocation},
		{"DeploymentGenerationStatusScale", testDeploymentGenerationStatusScale},
		{"StrategicMergePatch", testStrategicMergePatch},
		{"NodeStatus", testNodeStatus},
		{"NamespaceStatusFinalize", testNamespaceStatusFinalize},
		{"WatchOrder", testWatchOrder},
		{"WatchInitialEvents", testWatchInitialEvents},
		{"EventsBothGroups", testEventsBothGroups},
		{"HPABothVersions", testHPABothVersions},
		{"BadInput", testBadInput},
		{"Table", testTable},
		{"HealthVersionMetrics", testHealthVersionMetrics},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, c)
		})
	}
}
