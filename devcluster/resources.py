"""The table of resources devcluster serves.

One `ResourceDef` per resource drives everything that differs between kinds: URL routing, scope,
subresources, discovery, the OpenAPI documents and the names in error messages. The server, the store
and the documents are generic over this table; adding a kind means adding a row (and a schema in
`schemas.py`), never a branch in the request path.

Two sorts of rows. The kinds toposched works with (pods, nodes, leases, the topology and gang custom
resources, the storage kinds PersistentVolumeClaim, PersistentVolume, storage.k8s.io/v1 StorageClass and CSINode,
policy/v1 PodDisruptionBudget, ...) have behaviour elsewhere (binding, eviction, grace periods, the fake
kubelet, the volume controllers of `volumes.py` and `ephemeral.py`, the storage admission and validation
of `storage.py`, the budgets' status written by the disruption controller of `disruption_controller.py`
and read by the eviction subresource). The stored-only kinds (ConfigMap, Secret, ServiceAccount,
Service, apps/v1 Deployment, StatefulSet and DaemonSet, RBAC, apiextensions.k8s.io/v1
CustomResourceDefinition) are served so that the manifests we ship (ops/) apply with kubectl: plain
objects with the real scope, names, status subresource and discovery entries, and nothing acts on them
(no controller creates a Deployment's pods, no RBAC is enforced, no Service gets a cluster IP). Creating a
CustomResourceDefinition object makes devcluster serve nothing new: the custom resources it serves are
the rows of this table.

The Workload API kinds of scheduling.k8s.io (Workload at v1beta1, v1alpha3, v1alpha2 and v1alpha1; PodGroup
at v1beta1, v1alpha3 and v1alpha2; each kind one set of objects stored at v1beta1) are built in (not
custom): a real cluster serves them from kube-apiserver once the feature gate is on, with strategic merge
patches and server-side validation (`manifests.validation`).

A row with `stored_as` serves the objects of another row, converted (`conversion.py`): events.k8s.io/v1
Events are core Events, and the PodGroup and Workload rows but v1beta1 are versions of the v1beta1 one
(same group and plural, hence the same `key`: the store's index is the storage row's).

Pure data: no I/O, no imports of our other packages.
"""

from __future__ import annotations

import msgspec


class ResourceDef(msgspec.Struct, frozen=True):
    """A served resource: `group/version` `kind`, its plural URL name and what it supports."""

    group: str
    version: str
    kind: str
    plural: str
    singular: str
    namespaced: bool
    subresources: tuple[str, ...] = ()
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    custom: bool = False  # a CustomResourceDefinition in a real cluster
    # The key of the resource whose objects this one views (see conversion.py): another resource (events.k8s.io
    # Event over core Event) or another version of the same one (its key then the same as the storage row's).
    stored_as: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_version_path(self) -> str:
        """The URL prefix without leading slash: `api/v1` or `apis/<group>/<version>`."""
        return f"apis/{self.group}/{self.version}" if self.group else f"api/{self.version}"

    @property
    def key(self) -> str:
        """`plural.group` (`pods` for the core group): the name the store indexes by."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources


_CORE = ""
RESOURCES: tuple[ResourceDef, ...] = (
    ResourceDef(_CORE, "v1", "Namespace", "namespaces", "namespace", False, ("status",), ("ns",)),
    ResourceDef(_CORE, "v1", "Node", "nodes", "node", False, ("status",), ("no",)),
    ResourceDef(
        _CORE, "v1", "Pod", "pods", "pod", True, ("status", "binding", "eviction", "resize"), ("po",), ("all",)
    ),
    ResourceDef(_CORE, "v1", "Event", "events", "event", True, (), ("ev",)),
    # Storage, acted on by devcluster/volumes.py (PV controller, provisioner) and devcluster/ephemeral.py.
    ResourceDef(_CORE, "v1", "PersistentVolumeClaim", "persistentvolumeclaims", "persistentvolumeclaim", True,
                ("status",), ("pvc",)),
    ResourceDef(_CORE, "v1", "PersistentVolume", "persistentvolumes", "persistentvolume", False, ("status",), ("pv",)),
    # Stored-only kinds (see the module docstring): served so that real manifests apply, never acted on.
    ResourceDef(_CORE, "v1", "ConfigMap", "configmaps", "configmap", True, (), ("cm",)),
    ResourceDef(_CORE, "v1", "Secret", "secrets", "secret", True),
    ResourceDef(_CORE, "v1", "ServiceAccount", "serviceaccounts", "serviceaccount", True, (), ("sa",)),
    ResourceDef(_CORE, "v1", "Service", "services", "service", True, ("status",), ("svc",), ("all",)),
    ResourceDef("events.k8s.io", "v1", "Event", "events", "event", True, (), ("ev",), stored_as="events"),
    ResourceDef("coordination.k8s.io", "v1", "Lease", "leases", "lease", True),
    ResourceDef("storage.k8s.io", "v1", "StorageClass", "storageclasses", "storageclass", False, (), ("sc",)),
    # Written by each node's kubelet as CSI drivers register there; kube-scheduler's NodeVolumeLimits reads it.
    ResourceDef("storage.k8s.io", "v1", "CSINode", "csinodes", "csinode", False),
    ResourceDef("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", "priorityclass", False, (), ("pc",)),
    # Kubernetes' own gang API, served as a cluster with the GenericWorkload feature gate serves it: the 1.35
    # Workload (pods join through spec.workloadRef) and the runtime PodGroup (spec.schedulingGroup) at the
    # versions of 1.36 (v1alpha2) and 1.37 (v1beta1, v1alpha3): one resource, its objects stored at v1beta1
    # as 1.37 stores them (every v1alpha2 and v1alpha3 field has a v1beta1 form, so nothing is lost) and
    # converted for the other versions (conversion.py). The rows go in kube-apiserver's version priority
    # (v1, v1beta1, v1alpha3, v1alpha2, v1alpha1): discovery lists them so, and kubectl resolves
    # `podgroups.scheduling.k8s.io` to the first version serving it.
    ResourceDef("scheduling.k8s.io", "v1beta1", "PodGroup", "podgroups", "podgroup", True, ("status",)),
    ResourceDef("scheduling.k8s.io", "v1alpha3", "PodGroup", "podgroups", "podgroup", True, ("status",),
                stored_as="podgroups.scheduling.k8s.io"),
    ResourceDef("scheduling.k8s.io", "v1alpha2", "PodGroup", "podgroups", "podgroup", True, ("status",),
                stored_as="podgroups.scheduling.k8s.io"),
    # 1.37's alpha CompositePodGroup (feature gate CompositePodGroup): the non-leaf groups of a hierarchy of
    # PodGroups, served at v1alpha3 only.
    ResourceDef("scheduling.k8s.io", "v1alpha3", "CompositePodGroup", "compositepodgroups", "compositepodgroup",
                True, ("status",)),
    # The Workload likewise: 1.37's v1beta1 (storage) and v1alpha3, 1.36's v1alpha2, and 1.35's v1alpha1 (which
    # no 1.36+ cluster serves, kept for the clusters and manifests that still write it), one set of objects.
    ResourceDef("scheduling.k8s.io", "v1beta1", "Workload", "workloads", "workload", True),
    ResourceDef("scheduling.k8s.io", "v1alpha3", "Workload", "workloads", "workload", True,
                stored_as="workloads.scheduling.k8s.io"),
    ResourceDef("scheduling.k8s.io", "v1alpha2", "Workload", "workloads", "workload", True,
                stored_as="workloads.scheduling.k8s.io"),
    ResourceDef("scheduling.k8s.io", "v1alpha1", "Workload", "workloads", "workload", True,
                stored_as="workloads.scheduling.k8s.io"),
    ResourceDef("apps", "v1", "Deployment", "deployments", "deployment", True, ("status",), ("deploy",), ("all",)),
    ResourceDef("apps", "v1", "StatefulSet", "statefulsets", "statefulset", True, ("status",), ("sts",), ("all",)),
    ResourceDef("apps", "v1", "DaemonSet", "daemonsets", "daemonset", True, ("status",), ("ds",), ("all",)),
    # Not stored-only: its status is written by devcluster/disruption_controller.py and by evictions.
    ResourceDef("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", "poddisruptionbudget", True,
                ("status",), ("pdb",)),
    ResourceDef("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", "clusterrole", False),
    ResourceDef("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings",
                "clusterrolebinding", False),
    ResourceDef("rbac.authorization.k8s.io", "v1", "Role", "roles", "role", True),
    ResourceDef("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", "rolebinding", True),
    ResourceDef("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions",
                "customresourcedefinition", False, ("status",), ("crd", "crds"), ("api-extensions",)),
    ResourceDef(
        "scheduling.sigs.k8s.io", "v1alpha1", "PodGroup", "podgroups", "podgroup", True, ("status",), ("pg", "pgs"),
        custom=True,
    ),
    ResourceDef(
        "scheduling.x-k8s.io", "v1alpha1", "PodGroup", "podgroups", "podgroup", True, ("status",), ("pg", "pgs"),
        custom=True,
    ),
    ResourceDef(
        "scheduling.volcano.sh", "v1beta1", "PodGroup", "podgroups", "podgroup", True, ("status",),
        ("podgroup-v1beta1",), custom=True,
    ),
    # Volcano's job (vcjob): admitted as Volcano's mutating webhook and ValidatingAdmissionPolicy admit it
    # (volcano_job_admission.py); its PodGroup, pods and status written by devcluster/volcano_job_controller.py.
    ResourceDef(
        "batch.volcano.sh", "v1alpha1", "Job", "jobs", "job", True, ("status",), ("vcjob", "vj"), custom=True,
    ),
    # Kubeflow training-operator's v1 jobs: their PodGroups, pods and Created condition written by
    # devcluster/training_operator_controller.py.
    *(ResourceDef("kubeflow.org", "v1", kind, plural, plural.removesuffix("s"), True, ("status",), custom=True)
      for kind, plural in (("PyTorchJob", "pytorchjobs"), ("TFJob", "tfjobs"), ("XGBoostJob", "xgboostjobs"),
                           ("PaddleJob", "paddlejobs"), ("JAXJob", "jaxjobs"), ("MPIJob", "mpijobs"))),
    ResourceDef(
        "scheduling.koordinator.sh", "v1alpha1", "ClusterNetworkTopology", "clusternetworktopologies",
        "clusternetworktopology", False, ("status",), ("cnt",), custom=True,
    ),
    ResourceDef(
        "topology.volcano.sh", "v1alpha1", "HyperNode", "hypernodes", "hypernode", False, ("status",), ("hn",),
        custom=True,
    ),
    # Kueue's Topology (Topology Aware Scheduling): served at v1beta2 only, as a cluster with Kueue v0.15+
    # serves it as its storage version; it has no status.
    ResourceDef("kueue.x-k8s.io", "v1beta2", "Topology", "topologies", "topology", False, custom=True),
    # KAI Scheduler's Topology (cluster-scoped, no status) and PodGroup (namespaced; its status is KAI's to
    # write), as its Helm chart's CRDs serve them.
    ResourceDef("kai.scheduler", "v1alpha1", "Topology", "topologies", "topology", False, custom=True),
    ResourceDef(
        "scheduling.run.ai", "v2alpha2", "PodGroup", "podgroups", "podgroup", True, ("status",), ("pg",), custom=True,
    ),
    # KAI's Queue (cluster-scoped; its status is KAI's queue controller's to write).
    ResourceDef("scheduling.run.ai", "v2", "Queue", "queues", "queue", False, ("status",), custom=True),
    ResourceDef(
        "scheduling.sigs.k8s.io", "v1alpha1", "ElasticQuota", "elasticquotas", "elasticquota", True, ("status",),
        ("eq", "eqs"), custom=True,
    ),
    ResourceDef(
        "scheduling.x-k8s.io", "v1alpha1", "ElasticQuota", "elasticquotas", "elasticquota", True, ("status",),
        (), custom=True,
    ),
    ResourceDef(
        "scheduling.volcano.sh", "v1beta1", "Queue", "queues", "queue", False, ("status",), ("q", "queue-v1beta1"),
        custom=True,
    ),
)

# Subresources that read and write the object itself (get, update, patch): a part of it, the rest kept.
SAME_KIND_SUBRESOURCES = ("status", "resize")

# Subresources that are served as their own kind (POST bodies of another kind).
SUBRESOURCE_KINDS: dict[str, tuple[str, str, str]] = {
    "binding": ("", "v1", "Binding"),
    "eviction": ("policy", "v1", "Eviction"),
}

_BY_PATH: dict[tuple[str, str, str], ResourceDef] = {(r.group, r.version, r.plural): r for r in RESOURCES}
_BY_KIND: dict[tuple[str, str], ResourceDef] = {(r.api_version, r.kind): r for r in RESOURCES}


def by_path(group: str, version: str, plural: str) -> ResourceDef | None:
    """The resource served at `/api[s]/<group>/<version>/<plural>`, if any."""
    return _BY_PATH.get((group, version, plural))


def by_kind(api_version: str, kind: str) -> ResourceDef | None:
    """The resource of objects with this apiVersion and kind, if served."""
    return _BY_KIND.get((api_version, kind))


def group_versions() -> list[tuple[str, str]]:
    """Every (group, version) served, core group first, in a stable order."""
    seen: list[tuple[str, str]] = []
    for resource in RESOURCES:
        pair = (resource.group, resource.version)
        if pair not in seen:
            seen.append(pair)
    return seen


def in_group_version(group: str, version: str) -> list[ResourceDef]:
    return [r for r in RESOURCES if r.group == group and r.version == version]
