"""devcluster: a small Kubernetes API server, faithful to the real HTTP API, for the demo, local runs
and every integration test (no kube-apiserver can be installed here). Real clients trust it:
kubernetes-asyncio and kubectl with its defaults (discovery, OpenAPI v3 with server-side strict
field validation, tables for `kubectl get`, apply / delete / watch).

It imports nothing from our other packages: it is a standalone API server.

Python API
----------
    from devcluster import DevCluster, BackgroundDevCluster

    async with DevCluster(port=0, history=10_000, kubelet=True, kubelet_delay=0.05, kubelet_resize_delay=0.05,
                          pod_gc=True, volumes=True, disruption=True, node_lifecycle=True, volcano_jobs=True,
                          training_operator="volcano",
                          bookmark_interval=1.0,
                          autocreate_namespaces=True, fault_seed=0) as cluster:
        cluster.url                                  # "http://127.0.0.1:<port>"
        cluster.write_kubeconfig(path)               # -> Path; cluster.kubeconfig() -> dict
        cluster.load_objects([obj, ...])             # create in order; bound pods start Running
        cluster.store                                # direct reads/writes, no HTTP (see Store)
        cluster.faults                               # FaultInjector (see below)
        cluster.audit                                # AuditLog: every write request, its answer, its User-Agent
        cluster.kubelet                              # FakeKubelet | None (bound pods start Running unless
                                                     # rejected: OS, OutOf<resource>, NodeAffinity,
                                                     # NodePorts, then TaintToleration; in-place resizes
                                                     # allocated, or PodResizePending Infeasible / Deferred,
                                                     # and actuated kubelet_resize_delay later)
        cluster.pod_gc                               # PodGarbageCollector | None (a deleted node's pods go)
        cluster.volumes                              # VolumeController | None (PV controller + provisioners)
        cluster.ephemeral_volumes                    # EphemeralVolumeController | None (pods' ephemeral claims)
        cluster.protection                           # StorageProtectionController | None (pvc/pv-protection)
        cluster.pod_group_protection                 # PodGroupProtectionController (podgroup-protection)
        cluster.disruption                           # DisruptionController | None (PodDisruptionBudget status)
        cluster.node_lifecycle                       # NodeLifecycleController | None (condition taints)
        cluster.taint_eviction                       # TaintEvictionController | None (NoExecute evictions)
        cluster.volcano_jobs                         # VolcanoJobController | None (vcjobs' PodGroups and pods)
        cluster.training_operator                    # TrainingOperatorController | None (kubeflow.org/v1 jobs)

    with BackgroundDevCluster(**same_options) as bg:  # served from a daemon thread
        bg.url; bg.write_kubeconfig(path)
        bg.call(lambda cluster: cluster.store.list("pods"))   # runs on the cluster's loop

`Store` (objects are plain dicts, returned as read-only shared snapshots; resources are named by
`"pods"`, `"hypernodes.topology.volcano.sh"`, `"v1/Pod"` or a `ResourceDef`; failures raise `ApiError`
with the HTTP code and reason a real server would answer):
    create(obj, namespace="", *, keep_status=True) -> dict   (keep_status=False: HTTP create semantics)
    create_in(resource, obj, namespace, *, keep_status, dry_run=False) -> dict
    get(resource, name, namespace="") -> dict            (404 ApiError if absent)
    find(resource, name, namespace="") -> dict | None
    list(resource, namespace="", predicate=None) -> list[dict]
    update(obj, namespace="", *, subresource="") -> dict (409 on a stale metadata.resourceVersion)
    update_in(resource, name, namespace, obj, *, subresource="", dry_run=False) -> dict
    patch(resource, name, patch, namespace="", *, patch_type="merge"|"json"|"strategic", subresource="",
          check=None, dry_run=False) -> dict
    delete(resource, name, namespace="", *, grace_period_seconds=None, preconditions=None, dry_run=False) -> dict
    bind(namespace, name, node, *, uid=None) -> dict     (409 on a uid mismatch, if being deleted, already bound
                                                         or still gated, in that order; sets PodScheduled=True,
                                                         clears nominatedNodeName as 1.35 does)
    evict(namespace, name, *, grace_period_seconds=None, preconditions=None) -> dict
                                                         (under the PodDisruptionBudgets, see below; uid and
                                                         resourceVersion preconditions 409; the pod marked
                                                         DisruptionTarget, then deleted)
    load_objects(objs) -> list[dict]; count(resource) -> int
    resource_version -> int; oldest_resumable -> int
    watch(resource, namespace="", predicate=None, resource_version="") -> (Watcher, backlog)
    close_watches(resource=None) -> int; subscribe(listener) -> unsubscribe

`FaultInjector` (off until asked; rules match a Kubernetes verb and/or a URL path substring):
    fail_next(count, status=500, *, verb=None, path=None, retry_after=1) -> FaultRule
    fail_fraction(fraction, status=500, *, verb=None, path=None, retry_after=1) -> FaultRule
    add_latency(seconds, *, verb=None, path=None) -> FaultRule
    add(FaultSpec(status=, count= | fraction=, verb=, path=, retry_after=, latency=)) -> FaultRule (validated)
    parse_fault("status=429,verb=create,path=/binding,fraction=1") -> FaultSpec (raises FaultSpecError)
    rules; remove_id(id); drop_watches() -> int; remove(rule); clear(); injected (count of injected errors)

`AuditLog`: since(seq=0) -> [AuditRecord(seq, time, method, path, status, user_agent)], one per POST,
PUT, PATCH or DELETE under /api and /apis in the order answered (injected faults included); bounded.

Control from outside the process, on the same loopback port (devcluster/admin.py; JSON):
    GET|POST|DELETE /devcluster/faults, DELETE /devcluster/faults/<id>,
    POST /devcluster/faults/drop-watches, GET /devcluster/audit?since=<seq>

Patches: JSON, merge, strategic (built-in kinds only, as the OpenAPI documents advertise: kubectl then
sends custom resources a merge patch), and server-side apply (`application/apply-patch+yaml`,
`fieldManager`, `force`; field ownership and conflicts as structured-merge-diff computes them, in
apply.py; through a version that views another's objects, ownership is kept in the storage version's
field paths and apiVersion, where a real server records the request's). `/openapi/v2` answers an empty
document, enough for kubectl to validate a `kind: List` item by item on the server.

Served: namespaces, nodes, pods (+ status, binding, eviction, resize: in-place resize of containers' cpu and
memory as 1.34 validates it, devcluster/resize.py; the fake kubelet allocates and actuates it), events
(core v1; events.k8s.io/v1 is a view of the same objects), persistentvolumeclaims and persistentvolumes
(+ status), storage.k8s.io/v1 storageclasses (see Volumes below) and csinodes (validated as kube-apiserver
does; nothing writes them but a client: devcluster's kubelet registers no CSI driver), coordination.k8s.io/v1 leases,
scheduling.k8s.io/v1 priorityclasses, the Workload API as a cluster with the GenericWorkload gate serves it
(Workload and PodGroup at scheduling.k8s.io v1beta1 and v1alpha3 as 1.37 serves them and at v1alpha2 as
1.36 did, and the Workload at 1.35's v1alpha1 too; each kind one set of objects stored at v1beta1 and
converted per version, resourceVersions and watches shared; validated as kube-apiserver does, a gang's
minCount mutable at v1beta1 / v1alpha3 only, a 1.37 Workload's templates neither added nor removed;
priorityClassName resolved by the Priority admission plugin as for pods; protected from deletion while
pods run in it, see protection.py below; pods' spec.workloadRef and spec.schedulingGroup),
scheduling.sigs.k8s.io/v1alpha1,
scheduling.x-k8s.io/v1alpha1 and scheduling.volcano.sh/v1beta1 PodGroups, scheduling.koordinator.sh
ClusterNetworkTopology, topology.volcano.sh HyperNode, scheduling.sigs.k8s.io and scheduling.x-k8s.io
ElasticQuotas and scheduling.volcano.sh Queues (each + status), and Volcano's batch.volcano.sh/v1alpha1 Job
(vcjob, + status): admitted with Volcano's webhook defaults and its ValidatingAdmissionPolicy's refusals (422
Invalid, the policy's message; volcano_job_admission.py), and driven by Volcano's job controller
(volcano_job_controller.py, DevCluster(volcano_jobs=False): none): status, a PodGroup `<job>-<uid>` with
minMember, minTaskMember, queue, minResources as calcPGMinResources computes them, and the pods
`<job>-<task>-<index>` only once that PodGroup's status.phase is set and not Pending (the scheduler's
enqueue), recreated when they go; a deleted job's PodGroup and pods deleted (volcano_job.py says what is
written, the controller's docstring what is not emulated), and Kubeflow training-operator's kubeflow.org/v1
PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob and MPIJob (+ status), driven as training-operator v1.8/v1.9
with `--gang-scheduler-name=<DevCluster(training_operator=...)>` drives them (training_operator_controller.py;
False: none): a Created condition, then with "volcano" (the default) a Volcano PodGroup named as the job
(minMember, queue, priorityClassName, minResources as CalcPGMinResources computes them), and the pods
`<job>-<replica type>-<index>` with the training.kubeflow.org labels, scheduling.k8s.io/group-name and
volcano.sh/task-spec, schedulerName volcano unless the template names one, only once that PodGroup's status.phase
is set and not Pending; with another name N (scheduler-plugins, toposched, ...) a scheduling.x-k8s.io/v1alpha1
PodGroup (minMember, minResources, scheduleTimeoutSeconds) and the pods at once, labelled
scheduling.x-k8s.io/pod-group, schedulerName N unless the template names one; with "" no PodGroup and the pods
at once. The pods are recreated when they go (an MPIJob gets its PodGroup only); a deleted job's PodGroup and
pods deleted (training_operator.py says what is written). Stored only, so that the
manifests under ops/ apply (`kubectl apply [--dry-run=client] -k ops/`): v1 ConfigMap, Secret
(stringData written into data), ServiceAccount, Service (+ status), apps/v1 Deployment, StatefulSet,
DaemonSet (+ status), rbac.authorization.k8s.io/v1 Role,
ClusterRole, RoleBinding, ClusterRoleBinding, apiextensions.k8s.io/v1 CustomResourceDefinition
(+ status): real scope, discovery (short names, categories), OpenAPI v3, strict validation and
`kubectl get` tables, but no controller acts on them (a Deployment makes no pods, RBAC is not
enforced, a Service gets no cluster IP, no scale subresource) and a created CRD serves nothing new (the
custom resources above are built in). policy/v1 PodDisruptionBudgets (+ status) are served with the
same care, and a disruption controller keeps their status (Evictions, below). A
list's items are written as kube-apiserver writes them:
without apiVersion and kind for the kinds built into a real cluster (kubernetes/kubernetes#3030), with
them for those that are custom resources there. Every write goes through the API server pipeline of the
`manifests` package, shared with the scenario loader of `toposched simulate`: decoding (quantities in
canonical form, JSON numbers accepted), defaulting (requests from limits, schedulerName, ...), the
Priority, DefaultTolerationSeconds (and DefaultStorageClass, StorageObjectInUseProtection and
PodGroupProtection, below) admission plugins (unknown
PriorityClass: 403) and validation (labels, annotations, resources: 422 naming each field); the system
PriorityClasses exist from the start. Pod scheduling gates (`spec.schedulingGates`, GA in 1.30) as
kube-apiserver treats them: a pod created with gates gets PodScheduled=False, reason SchedulingGated
(`kubectl get` shows SchedulingGated); gate names are unique qualified names, `spec.nodeName` cannot come with gates at
create, an update may only remove gates (each 422), and a Binding of a gated pod is 409. Known
differences from a real cluster: no authentication, no other admission plugins (no ServiceAccount token
volumes, no LimitRange or ResourceQuota), managedFields kept only on objects a server-side apply touched
(see apply.py), a namespace deleted at once with its contents (no Terminating phase), limit/continue
pages from the current state (not a snapshot), and unknown fields under `fieldValidation=Strict` are 422
Invalid (the brief's choice; a real server says 400 for kinds compiled into it).

Volumes (manifests/storage.py, devcluster/volumes.py, ephemeral.py): the storage kinds are admitted as kube-apiserver
admits them (canonical quantities, defaults, the DefaultStorageClass plugin: a claim without a class gets the
newest default class, `storageClassName: ""` stays; 422 for a changed claim spec other than its volumeName
once or a Bound claim's request, a changed class provisioner / parameters / reclaimPolicy /
volumeBindingMode, a changed volume nodeAffinity once set). A PV controller with an external provisioner
for every class (but `kubernetes.io/no-provisioner`) binds and provisions: a pre-bound volume first, an
Immediate claim to the smallest matching Available volume or to a volume provisioned at once (`pvc-<uid>`,
nodeAffinity from allowedTopologies), a WaitForFirstConsumer claim once `volume.kubernetes.io/selected-node`
is set (nodeAffinity: the class's allowedTopologies keys, else the node's zone, else its hostname; a node
that does not exist: annotation removed, Warning ProvisioningFailed), with the annotations and phases the
PV controller writes; a deleted claim's volume is Released (deleted under the Delete policy). The ephemeral
volume controller creates `<pod>-<volume>` claims owned by their pods, deleted with them. Storage objects
in use are protected (protection.py): claims and volumes are created with the `kubernetes.io/pvc-protection`
/ `pv-protection` finalizer (StorageObjectInUseProtection admission), and a deleted claim stays, marked,
while a scheduled pod names it, a deleted volume while it is Bound. So are the Workload API's PodGroups
(protection.py too): created or loaded with the `scheduling.k8s.io/podgroup-protection` finalizer
(PodGroupProtection admission, at every version), a deleted one stays, marked, while a pod of its
namespace naming it in `spec.schedulingGroup.podGroupName` is not Succeeded or Failed.

Evictions and budgets (devcluster/disruption.py, disruption_controller.py): the eviction subresource
enforces policy/v1 PodDisruptionBudgets as kube-apiserver's eviction handler does, the budget's status
computed at the eviction as the disruption controller would (but expectedPods from the pods the budget
selects, not from their controllers' scale; a pod awaited in the stored `status.disruptedPods` is not
healthy). A Pending, terminal or terminating pod goes regardless; a refusal is 429 TooManyRequests with a
DisruptionBudget cause ("The disruption budget NAME needs D healthy pods and has C currently") and no
Retry-After; a pod two budgets select gets the handler's failure Status (code 500) with HTTP 201, as
the real server answers it; the uid / resourceVersion preconditions of its deleteOptions are 409. An
eviction that spends a disruption writes the handler's bookkeeping into the budget's status
(disruptionsAllowed one less, the pod in `disruptedPods` with the time); every eviction that goes first
gives the pod the condition DisruptionTarget=True, reason EvictionByEvictionAPI, message "Eviction API:
evicting", then deletes it (a DisruptionTarget condition the pod had, a scheduler's, is rewritten so,
keeping its transition time, as the real server rewrites it). The disruption
controller (DevCluster(disruption=False): none) writes each budget's status when the budget or a pod it
selects changes: currentHealthy, desiredHealthy, expectedPods, disruptionsAllowed, observedGeneration,
the DisruptionAllowed condition (SufficientPods / InsufficientPods / SyncFailed) and `disruptedPods` (an
entry leaves once its pod is being deleted or gone, or two minutes after the eviction); only when it
changes.

Command line: `toposched devcluster [--port N] [--kubeconfig PATH] [--load SCENARIO] [--fault RULE ...]
[--fault-seed N]` (see cli.py).
"""

from devcluster.audit import AuditLog, AuditRecord
from devcluster.cluster import BackgroundDevCluster, DevCluster, kubeconfig
from devcluster.disruption_controller import DisruptionController
from devcluster.ephemeral import EphemeralVolumeController
from devcluster.errors import ApiError
from devcluster.faults import FaultInjector, FaultRule, FaultSpec, FaultSpecError, parse_fault
from devcluster.kubelet import FakeKubelet
from devcluster.node_lifecycle import NodeLifecycleController, TaintEvictionController
from devcluster.podgc import PodGarbageCollector
from devcluster.resources import RESOURCES, ResourceDef
from devcluster.store import Store
from devcluster.training_operator_controller import TrainingOperatorController
from devcluster.volcano_job_controller import VolcanoJobController
from devcluster.volumes import VolumeController

__all__ = [
    "RESOURCES",
    "ApiError",
    "AuditLog",
    "AuditRecord",
    "BackgroundDevCluster",
    "DevCluster",
    "DisruptionController",
    "EphemeralVolumeController",
    "FakeKubelet",
    "FaultInjector",
    "FaultRule",
    "FaultSpec",
    "FaultSpecError",
    "NodeLifecycleController",
    "PodGarbageCollector",
    "ResourceDef",
    "Store",
    "TaintEvictionController",
    "TrainingOperatorController",
    "VolcanoJobController",
    "VolumeController",
    "kubeconfig",
    "parse_fault",
]
