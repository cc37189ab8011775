"""`toposched validate FILE...`: check topology, gang, quota and Pod manifests offline.

Reads multi-document YAML files and applies the very rules the daemon applies to these objects
(`state/topology_validation.py`, `state/hypernodes.py`, `state/gangs.py`, `state/topology_wishes.py`;
the same functions, so the same problems and messages), across all files together: a HyperNode
member may name a HyperNode from another file, and PodGroup layer / tier names are checked against
the topology the files describe (a ClusterNetworkTopology, HyperNodes, a KAI or Kueue Topology, or
Nodes carrying topograph labels); a KAI PodGroup's topologyConstraint is checked against it too. Node
documents, when given, are context: label contradictions and nodes claimed by two HyperNodes are
reported too. Quota objects (both ElasticQuota kinds, Volcano and KAI Queues) are folded with the PodGroups
and the Pods of the files as the daemon folds them (`state/quota.py`, the same rules and messages):
min above max, a parent label naming no quota or looping, negative or malformed quantities, a pod
(of this scheduler) naming a quota the files do not define, a (Volcano or KAI) PodGroup naming a missing
queue, a KAI Queue's negative quota or limit; each
message says the rule that then applies. Pods are read as the API server would store them (its
defaulting: requests from limits, host ports of a pod on the host network, ...; a quantity it cannot
decode is a problem; so are pod (anti-)affinity terms and topology spread constraints it refuses, in
its words: `manifests.validation.validate_placement_rules`), and a pod of this scheduler asking for a
rule toposched does not place by
(a pod affinity term's namespaceSelector, a DoNotSchedule spread no API server admits, an init
container's host port, resource claims:
`state/pod_constraints.py`, the daemon's own words) is reported. PersistentVolumes, claims and
StorageClasses are put through the API server's storage rules (`manifests.storage`, as devcluster
admits them: a local volume without node affinity, a volume with no source or two, a claim without
access modes or a storage request, ...), and the Workload API's kinds (scheduling.k8s.io PodGroups of
every version, Workloads of every version: 1.36's and 1.37's by those rules only) through
kube-apiserver's validation of them (`manifests.validation.validate`, as devcluster admits them: a gang
policy without a positive minCount, a 1.37 disruptionMode naming neither `single` nor `all`, two
topology constraints, ...). A Volcano Job (`batch.volcano.sh`) whose `spec.schedulerName` is not toposched's,
and a Kubeflow training job's replica (`kubeflow.org/v1` PyTorchJob, TFJob, MPIJob, XGBoostJob, PaddleJob,
JAXJob) whose pod template names another scheduler, are reported: toposched neither enqueues such a job's
Volcano PodGroup nor places those pods. (A template naming none takes training-operator's
`--gang-scheduler-name`, which a manifest does not tell.) Other kinds are skipped.

Prints one line per problem, `FILE#DOC: Kind name: field: message` (DOC counts documents from 1),
and exits 1; prints a short OK line and exits 0 when everything is valid; exits 2, with one line,
when a file cannot be read at all (missing, not UTF-8 text, not YAML, nested too deeply). Reads files
only; never talks to a cluster.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import yaml

from daemon.cli.exits import EXIT_FINDING, EXIT_OK, EXIT_USAGE, CommandError, exit_codes_epilog, reporting
from daemon.config import pool_label_problem, yaml_problem
from events.ingest import KindInfo, KubeObject, decode_object, key_of, kind_of
from events.model import ObjectUndecodable, object_key
from events.objects import (
    DEFAULT_SCHEDULER_NAME,
    KAI_NODE_POOL_LABEL,
    ClusterNetworkTopology,
    CompositePodGroup,
    HyperNode,
    KaiPodGroup,
    KaiTopology,
    KubeflowJob,
    KubePodGroup,
    KueueTopology,
    Node,
    Pod,
    PodGroup,
    VolcanoJob,
    VolcanoPodGroup,
    Workload,
)
from manifests import storage
from manifests.admission import merge_label_keys
from manifests.defaulting import UndecodableQuantity, default_pod
from manifests.validation import validate as validate_object
from manifests.validation import validate_placement_rules
from state.cluster import ClusterState
from state.gangs import Problem
from state.hypernodes import HYPERNODE_KIND
from state.pod_constraints import unconsidered
from state.resources import QuantityError, Resources, parse_quantity
from state.topology import TopologyTree
from state.topology_validation import (
    CNT_KIND,
    DEFAULT_CNT_NAME,
    KAI_TOPOLOGY_KIND,
    KUEUE_TOPOLOGY_KIND,
    NODE_KIND,
    validate_network_topology,
)
from state.topology_wishes import POD_GROUP_KIND, validate_gang_object, validate_pod_group, validate_volcano_pod_group
from state.volcano_enqueue import DEFAULT_VOLCANO_SCHEDULER

_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: depth-capped
_GANG_OBJECTS = {"SchedulerPluginsPodGroup", "KubernetesPodGroup", "CompositePodGroup", "KaiPodGroup", "Workload"}
# served by kube-apiserver, which validates them
_BUILT_IN_GANG_KINDS = {"KubernetesPodGroup", "CompositePodGroup", "Workload"}
# The Workload versions of 1.36 and 1.37 (podGroupTemplates), which the daemon does not read (it reads 1.35's
# v1alpha1): put through kube-apiserver's rules only, and counted as Workloads.
_API_SERVER_ONLY = {("scheduling.k8s.io/v1beta1", "Workload"), ("scheduling.k8s.io/v1alpha3", "Workload"),
                    ("scheduling.k8s.io/v1alpha2", "Workload")}
_QUOTA_OBJECTS = {"ElasticQuota", "CapacityElasticQuota", "Queue", "KaiQueue"}
_QUEUES = {"Queue", "KaiQueue"}
_CHECKED = {"HyperNode", "ClusterNetworkTopology", KUEUE_TOPOLOGY_KIND, KAI_TOPOLOGY_KIND, "PodGroup",
            "VolcanoPodGroup", *_GANG_OBJECTS,
            *_QUOTA_OBJECTS}
POD_KIND = "Pod"


def _name_of(document: dict[str, Any]) -> str:
    """A pod document's key as the API would store it (namespace `default` when it names none)."""
    meta = document.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
    return object_key(str(meta.get("namespace") or "default"), str(meta.get("name") or "<unnamed>"))


@dataclass(frozen=True)
class Finding:
    source: str  # FILE#DOC
    problem: Problem

    def __str__(self) -> str:
        return f"{self.source}: {self.problem}"


@dataclass
class _Documents:
    hypernodes: list[tuple[str, HyperNode]]
    cnts: list[tuple[str, ClusterNetworkTopology]]
    kueue_topologies: list[tuple[str, KueueTopology]]
    kai_topologies: list[tuple[str, KaiTopology]]
    pod_groups: list[tuple[str, PodGroup]]
    volcano_pod_groups: list[tuple[str, VolcanoPodGroup]]
    nodes: list[tuple[str, Node]]
    findings: list[Finding]
    # (source, our kind name, object)
    gang_objects: list[tuple[str, str, PodGroup | KubePodGroup | CompositePodGroup | KaiPodGroup | Workload]]
    folded: list[tuple[str, KindInfo, KubeObject]] = field(default_factory=list)  # what the quota rules fold
    skipped: int = 0
    volcano_jobs: int = 0  # Volcano Jobs checked (their schedulerName)
    training_jobs: int = 0  # Kubeflow training jobs checked (their replicas' schedulerNames)
    storage: int = 0  # PersistentVolumes, claims and StorageClasses checked
    api_server_only: int = 0  # 1.36 / 1.37 Workloads checked


def _job_problems(info: KindInfo, document: dict[str, Any], api_version: str) -> list[Problem]:
    """A Volcano Job, or a Kubeflow training job's replica, whose pods will not be toposched's: toposched
    neither enqueues such a job's Volcano PodGroup nor places those pods; with no Volcano scheduler in the
    cluster the job waits for ever with no pods (state/volcano_enqueue.py)."""
    decoded = decode_object(info, document, api_version)
    if isinstance(decoded, ObjectUndecodable):
        field, _, message = decoded.problem.partition(": ")
        return [Problem(info.kind, decoded.key, field if message else "", message or decoded.problem)]
    assert isinstance(decoded, VolcanoJob | KubeflowJob)
    # (field, the scheduler its pods get, how the manifest says it)
    named: list[tuple[str, str, str]]
    if isinstance(decoded, VolcanoJob):
        written = decoded.spec.scheduler_name
        said = repr(written) if written else f"empty, which Volcano's webhook makes {DEFAULT_VOLCANO_SCHEDULER!r}"
        named = [("spec.schedulerName", written or DEFAULT_VOLCANO_SCHEDULER, said)]
        whose = "this job's PodGroup nor places its pods"
    else:  # a template naming none takes training-operator's --gang-scheduler-name, toposched's or not: unknown
        named = [(f"spec.{field}.{replica}.template.spec.schedulerName", written, repr(written))
                 for field, replica, written in decoded.replica_schedulers() if written]
        whose = "this job's PodGroup (unless another replica names toposched) nor places these pods"
    return [Problem(info.kind, key_of(decoded.metadata), path,
                    f"is {said}, not {DEFAULT_SCHEDULER_NAME!r}: toposched neither enqueues {whose} "
                    "(fine if that scheduler runs in the cluster)")
            for path, scheduler, said in named if scheduler != DEFAULT_SCHEDULER_NAME]


def _documents_of(path: str) -> list[Any]:
    """The YAML documents of one file; a file that cannot be read as YAML is a `CommandError` (usage) naming it."""
    try:
        with open(path, encoding="utf-8") as handle:
            return list(yaml.load_all(handle, Loader=_LOADER))  # safe: plain data only
    except OSError as error:
        raise CommandError(f"cannot read {path}: {error.strerror}", EXIT_USAGE) from error
    except UnicodeDecodeError as error:
        raise CommandError(f"{path} is not UTF-8 text (byte {error.start}); is it a binary?", EXIT_USAGE) from error
    except yaml.YAMLError as error:
        raise CommandError(f"{path} is not valid YAML: {yaml_problem(error)}", EXIT_USAGE) from error
    except RecursionError as error:
        raise CommandError(f"{path} is nested too deeply to hold Kubernetes objects", EXIT_USAGE) from error


def _read(paths: Sequence[str]) -> _Documents:
    docs = _Documents([], [], [], [], [], [], [], [], [])
    for path in paths:
        loaded = _documents_of(path)
        for number, document in enumerate(loaded, start=1):
            source = f"{path}#{number}"
            if document is None:
                continue
            if not isinstance(document, dict):
                docs.findings.append(Finding(source, Problem("Document", str(number), "",
                                                             "is not a Kubernetes object (a mapping)")))
                continue
            api_version, kind = str(document.get("apiVersion", "")), str(document.get("kind", ""))
            if (api_version, kind) in storage.KINDS:  # as the API server refuses them; nothing to fold
                docs.storage += 1
                docs.findings += [Finding(source, p) for p in _storage_problems(api_version, kind, document)]
                continue
            if (api_version, kind) in _API_SERVER_ONLY:
                docs.api_server_only += 1
                docs.findings += [Finding(source, Problem(kind, _name_of(document), field,
                                                          f"{message} (the API server refuses it)"))
                                  for _, field, message in validate_object(api_version, kind, document)]
                continue
            info = kind_of(api_version, kind)
            if info is not None and info.type in (VolcanoJob, KubeflowJob):
                if info.type is VolcanoJob:
                    docs.volcano_jobs += 1
                else:
                    docs.training_jobs += 1
                docs.findings += [Finding(source, p) for p in _job_problems(info, document, api_version)]
                continue
            if info is None or (info.name not in _CHECKED and info.name not in (NODE_KIND, POD_KIND)):
                docs.skipped += 1
                continue
            if info.name == POD_KIND:  # as the API server stores it: requests from limits, host ports, ...
                try:
                    document = merge_label_keys(default_pod(document))
                except UndecodableQuantity as error:
                    docs.findings.append(Finding(source, Problem(
                        POD_KIND, _name_of(document), error.field, f"{error.message} (the API server refuses it)")))
                    continue
                spec = document.get("spec")
                docs.findings += [Finding(source, Problem(POD_KIND, _name_of(document), field,
                                                          f"{message} (the API server refuses it)"))
                                  for _, field, message in validate_placement_rules(spec if isinstance(spec, dict)
                                                                                    else {})]
            if info.name in _BUILT_IN_GANG_KINDS:  # kube-apiserver's own validation of the Workload API's kinds
                docs.findings += [Finding(source, Problem(info.name, _name_of(document), field,
                                                          f"{message} (the API server refuses it)"))
                                  for _, field, message in validate_object(api_version, kind, document)]
            decoded = decode_object(info, document, api_version)
            if isinstance(decoded, ObjectUndecodable):
                field, _, message = decoded.problem.partition(": ")
                docs.findings.append(Finding(source, Problem(
                    info.kind, decoded.key, field if message else "", message or decoded.problem)))
                continue
            if not decoded.metadata.name:
                docs.findings.append(Finding(source, Problem(info.kind, "<unnamed>", "metadata.name", "is missing")))
                continue
            if info.namespaced or info.name in _QUOTA_OBJECTS:
                docs.folded.append((source, info, _in_namespace(decoded) if info.namespaced else decoded))
            if info.name in _GANG_OBJECTS and isinstance(decoded, PodGroup | KubePodGroup | CompositePodGroup
                                                         | KaiPodGroup | Workload):
                docs.gang_objects.append((source, info.name, decoded))
            elif isinstance(decoded, HyperNode):
                docs.hypernodes.append((source, decoded))
            elif isinstance(decoded, ClusterNetworkTopology):
                docs.cnts.append((source, decoded))
            elif isinstance(decoded, KueueTopology):
                docs.kueue_topologies.append((source, decoded))
            elif isinstance(decoded, KaiTopology):
                docs.kai_topologies.append((source, decoded))
            elif isinstance(decoded, PodGroup):
                docs.pod_groups.append((source, decoded))
            elif isinstance(decoded, VolcanoPodGroup):
                docs.volcano_pod_groups.append((source, decoded))
            elif isinstance(decoded, Node):
                docs.nodes.append((source, decoded))
    return docs


def _storage_problems(api_version: str, kind: str, document: dict[str, Any]) -> list[Problem]:
    """What kube-apiserver refuses of a PersistentVolume, claim or StorageClass on create
    (`manifests.storage`: its decoding, defaulting and validation, in its words)."""
    if (api_version, kind) == storage.CLAIM:
        name = _name_of(document)
    else:  # cluster-scoped
        meta = document.get("metadata")
        name = str((meta if isinstance(meta, dict) else {}).get("name") or "<unnamed>")
    try:
        stored = storage.decode_and_default(api_version, kind, document)
    except storage.UndecodableStorage as error:
        return [Problem(kind, name, "", f"{error} (the API server refuses it)")]
    return [Problem(kind, name, field, f"{message} (the API server refuses it)")
            for _, field, message in storage.problems(api_version, kind, stored)]


def _in_namespace(obj: KubeObject) -> KubeObject:
    """A namespaced object as applied: without a namespace it goes to `default`."""
    if obj.metadata.namespace:
        return obj
    return msgspec.structs.replace(obj, metadata=msgspec.structs.replace(obj.metadata, namespace="default"))


def _quota_findings(docs: _Documents, kai_node_pool_label: str) -> list[Finding]:
    """The daemon's quota rules: the quota objects, PodGroups and Pods of the files folded as the
    daemon folds them, and the problems its quota book records (what it posts as Warning Events)."""
    if not any(info.name in _QUOTA_OBJECTS or info.name in ("VolcanoPodGroup", "KaiPodGroup")
               for _, info, _ in docs.folded):
        return []
    state = ClusterState(kai_node_pool_label=kai_node_pool_label)
    where: dict[tuple[str, str], str] = {}
    for source, info, obj in sorted(docs.folded, key=lambda item: _FOLD_ORDER.get(item[1].name, 1)):
        state.apply(info.upsert(obj))
        where[(info.name, key_of(obj.metadata))] = source
    return [Finding(where.get((p.kind, p.key), "?"), p) for p in state.quotas.all_problems()]


# Quotas before PodGroups before Pods, as a relist folds them (a pod is placed in its quota at once).
_FOLD_ORDER = {"ElasticQuota": 0, "CapacityElasticQuota": 0, "Queue": 0, "KaiQueue": 0, "Pod": 2}


def _allocatable(node: Node) -> Resources:
    resources: Resources = {}
    for name, text in node.status.allocatable.items():
        try:
            resources[name] = parse_quantity(text)
        except QuantityError:
            continue
    return resources


def validate_documents(paths: Sequence[str], *, kai_node_pool_label: str = KAI_NODE_POOL_LABEL
                       ) -> tuple[list[Finding], dict[str, int]]:
    """Every problem in the files, in file and document order; and how many objects of each kind were checked.
    `kai_node_pool_label`: the node label naming KAI node pools, as the daemon's config sets it."""
    docs = _read(paths)
    findings = list(docs.findings)
    where: dict[tuple[str, str], str] = {}
    for source, cnt in docs.cnts:
        where[(CNT_KIND, cnt.metadata.name)] = source
        findings += [Finding(source, p) for p in validate_network_topology(cnt)]
    seen_hn: dict[str, str] = {}
    for source, hn in docs.hypernodes:
        name = hn.metadata.name
        if name in seen_hn:
            findings.append(Finding(source, Problem(HYPERNODE_KIND, name, "metadata.name",
                                                    f"is also defined at {seen_hn[name]}; the later one is used")))
        seen_hn[name] = source
        where[(HYPERNODE_KIND, name)] = source
    # The cluster the files describe, folded as the daemon folds it: HyperNode problems, node-level
    # findings (label contradictions, nodes claimed twice), and the layer / tier names PodGroups may use.
    tree = TopologyTree()
    for source, node in docs.nodes:
        where[(NODE_KIND, node.metadata.name)] = source
        tree.node_upserted(node.metadata.name, node.metadata.labels, _allocatable(node))
    for _, cnt in docs.cnts:
        tree.network_topology_upserted(cnt)
    for hn in {hn.metadata.name: hn for _, hn in docs.hypernodes}.values():  # the later definition wins
        tree.hypernode_upserted(hn)
    for source, topology in docs.kueue_topologies:
        where[(KUEUE_TOPOLOGY_KIND, topology.metadata.name)] = source
        tree.kueue_topology_upserted(topology)
    for source, kai_topology in docs.kai_topologies:
        where[(KAI_TOPOLOGY_KIND, kai_topology.metadata.name)] = source
        tree.kai_topology_upserted(kai_topology)
    described = bool(docs.nodes or docs.hypernodes or docs.kueue_topologies or docs.kai_topologies
                     or any(c.metadata.name == DEFAULT_CNT_NAME for _, c in docs.cnts))
    reported = {f.problem for f in findings}
    for problem in tree.problems:
        if (problem.kind in (NODE_KIND, HYPERNODE_KIND, KUEUE_TOPOLOGY_KIND, KAI_TOPOLOGY_KIND)
                and problem not in reported):
            findings.append(Finding(where.get((problem.kind, problem.key), "?"), problem))
    context = tree if described else None  # with no topology in the files, layer and tier names go unchecked
    for source, group in docs.pod_groups:
        findings += [Finding(source, p) for p in validate_pod_group(group, context)]
    for source, vgroup in docs.volcano_pod_groups:
        findings += [Finding(source, p) for p in validate_volcano_pod_group(vgroup, context)]
    for source, kind_name, obj in docs.gang_objects:
        findings += [Finding(source, p) for p in validate_gang_object(kind_name, obj, context,
                                                                      kai_node_pool_label=kai_node_pool_label)]
    findings += _quota_findings(docs, kai_node_pool_label)
    ours = [(source, obj) for source, info, obj in docs.folded
            if info.name == POD_KIND and isinstance(obj, Pod) and obj.spec.scheduler_name == DEFAULT_SCHEDULER_NAME]
    for source, pod in ours:
        findings += [Finding(source, p) for p in unconsidered(pod, key_of(pod.metadata))]
    order = {source: index for index, source in enumerate(_all_sources(docs))}
    findings.sort(key=lambda f: order.get(f.source, len(order)))
    counts = {HYPERNODE_KIND: len(docs.hypernodes), CNT_KIND: len(docs.cnts),
              "Topology": len(docs.kueue_topologies) + len(docs.kai_topologies),
              POD_GROUP_KIND: len(docs.pod_groups) + len(docs.volcano_pod_groups)
              + sum(1 for _, name, _ in docs.gang_objects if name not in ("Workload", "CompositePodGroup")),
              "CompositePodGroup": sum(1 for _, name, _ in docs.gang_objects if name == "CompositePodGroup"),
              "Workload": sum(1 for _, name, _ in docs.gang_objects if name == "Workload") + docs.api_server_only,
              "ElasticQuota": sum(1 for _, info, _ in docs.folded if info.name in _QUOTA_OBJECTS - _QUEUES),
              "Queue": sum(1 for _, info, _ in docs.folded if info.name in _QUEUES), POD_KIND: len(ours),
              "storage object": docs.storage, "Volcano Job": docs.volcano_jobs,
              "Kubeflow training job": docs.training_jobs}
    return findings, counts


def _all_sources(docs: _Documents) -> list[str]:
    sources = [s for s, _ in docs.hypernodes] + [s for s, _ in docs.cnts] + [s for s, _ in docs.pod_groups]
    sources += [s for s, _ in docs.kueue_topologies] + [s for s, _ in docs.kai_topologies]
    sources += [s for s, _ in docs.volcano_pod_groups] + [s for s, _ in docs.nodes] + [f.source for f in docs.findings]
    sources += [s for s, _, _ in docs.gang_objects] + [s for s, _, _ in docs.folded]

    def position(source: str) -> tuple[str, int]:
        path, _, number = source.rpartition("#")
        return path, int(number) if number.isdigit() else 0

    return sorted(set(sources), key=position)


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="toposched validate",
        description="Validate HyperNode, ClusterNetworkTopology, Kueue and KAI Topology and PodGroup manifests "
                    "(multi-document YAML).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=exit_codes_epilog(
            ok="every object is valid", finding="problems found (one line each on standard output)",
            usage="a bad flag, or a file that cannot be read as YAML (missing, a binary, not YAML, too deep)"))
    parser.add_argument("files", nargs="+", metavar="FILE")
    parser.add_argument("--kai-node-pool-label", default=KAI_NODE_POOL_LABEL, metavar="KEY",
                        help="the node label naming KAI node pools, as the daemon's kai_node_pool_label "
                             "(default %(default)s; \"\" for no pools)")
    return parser


@reporting("validate")
def main(argv: Sequence[str]) -> int:
    args = parser().parse_args(list(argv))
    bad_label = pool_label_problem(args.kai_node_pool_label)
    if bad_label is not None:
        raise CommandError(f"--kai-node-pool-label: {bad_label}", EXIT_USAGE)
    findings, counts = validate_documents(args.files, kai_node_pool_label=args.kai_node_pool_label)
    checked = sum(counts.values())
    if findings:
        for finding in findings:
            sys.stdout.write(f"{finding}\n")
        sys.stdout.write(f"{len(findings)} problem{'s' * (len(findings) != 1)} in {checked} object"
                         f"{'s' * (checked != 1)}\n")
        return EXIT_FINDING
    kinds = ", ".join(f"{count} {kind}" for kind, count in counts.items() if count)
    sys.stdout.write(f"OK: {checked} object{'s' * (checked != 1)} valid{f' ({kinds})' if kinds else ''}\n")
    return EXIT_OK
