// Package flowcontrol keeps the API server responsive under overload: a
// flood from one client must never starve node heartbeats, leader election
// or the system's own components.
//
// Two limiters share one seam, Limiter.Do(ctx, request, fn):
//
//   - MaxInFlight is upstream's older filter (--max-requests-inflight,
//     --max-mutating-requests-inflight): two semaphores, 429 with
//     Retry-After when full, system:masters exempt.
//   - APF is API Priority and Fairness, configured by
//     flowcontrol.apiserver.k8s.io/v1 FlowSchemas and
//     PriorityLevelConfigurations. A request is classified by the
//     matching FlowSchema of lowest matchingPrecedence into a priority
//     level and a flow (the schema and its distinguisher: user or
//     namespace). Each limited level owns a share of the server's seats
//     (nominalConcurrencyShares over their sum); a request occupies one
//     seat, a list of many objects up to 10. When a level's seats are
//     taken, requests wait in queues: a flow is dealt a hand of queues by
//     shuffle sharding and joins the shortest; a full queue or a wait
//     over MaxQueueWait is 429. Free seats go to the queue whose flows
//     hold the fewest seats (fair queuing by seats in use, round robin on
//     ties). Exempt levels run at once.
//
// Not acted upon (accepted, stored, validated): lendablePercent and
// borrowingLimitPercent (levels do not lend or borrow seats), and the
// FlowSchema and PriorityLevelConfiguration status conditions (not
// written).
//
// Long-running requests (watches, exec, logs, proxies) are not limited,
// as upstream.
package flowcontrol
