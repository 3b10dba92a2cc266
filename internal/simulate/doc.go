// Package simulate runs simulated nodes: clients of the API server that
// behave, as seen through the API, like kubelets without containers.
//
// A Simulator owns a fixed set of nodes. For each one it
//
//   - registers the Node the way a kubelet does (labels, capacity and
//     allocatable, addresses, nodeInfo, the four kubelet conditions with
//     Ready=True, a pod CIDR), and creates its Lease in kube-node-lease;
//   - removes the node.kubernetes.io/not-ready:NoSchedule taint that
//     admission adds to every new Node, once the node reports Ready. This is
//     the node lifecycle controller's job in a real cluster; until Skiff has
//     one the simulator does it (Options.KeepNotReadyTaint turns it off);
//   - renews the Lease every LeaseRenewInterval (with upstream's +4 % jitter,
//     the first renewal of each node at a random point of the interval so
//     that nodes are spread evenly in time), and writes a node status
//     heartbeat every StatusUpdateFrequency;
//   - moves pods bound to it to Running (conditions, pod IP from the node's
//     CIDR, host IP, start time, running and ready container statuses), and
//     finishes the deletion of pods that have a deletionTimestamp by deleting
//     them with grace period 0 and a UID precondition, as a kubelet confirms
//     a termination. Pods with restartPolicy Never or OnFailure and the
//     RunSecondsAnnotation move to Succeeded after that many seconds.
//
// Not simulated: probes and readiness gates (containers are ready as soon as
// they run), resource usage and eviction, images, volumes, restarts. A
// paused node (PauseNode) stops its Lease, its status and its pods, the way a
// node that died would.
//
// Work is done by a few workers over two client-go work queues (node tasks
// and pod keys), and pods are seen through one shared informer of all bound
// pods, filtered by node name: there is no goroutine per node or per pod.
//
// Addresses are only data, no traffic flows: node i (counting from 0 over
// all nodes of the simulator) gets the pod CIDR 10.(42+i/256).(i%256).0/24
// and the InternalIP 172.16.0.0 + i + 1 (inside 172.16.0.0/12). The first
// 256 nodes therefore use Skiff's pod network 10.42.0.0/16; later ones go
// beyond it, up to MaxNodes. Pod IPs are .2 to .254 of the node's CIDR, so
// at most 253 pods of one node can be Running at once.
package simulate
