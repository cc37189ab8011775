"""What a gang asks for: minMember, timeouts, GangGroups and topology constraints, parsed once.

A gang is named by its PodGroup key (`namespace/name`). Every dialect is read into one `GangSpec`,
so placement never looks at raw annotations:
- Koordinator PodGroups (scheduling.sigs.k8s.io/v1alpha1) and scheduler-plugins' current ones
  (scheduling.x-k8s.io/v1alpha1, the same fields): `minMember`, `scheduleTimeoutSeconds`, and
  Koordinator's annotations `gang.scheduling.koordinator.sh/network-topology-spec` (gather rules),
  `/groups` (GangGroup), `/match-policy` (what counts towards minMember), `/mode`, `/total-number`;
- Volcano PodGroups (scheduling.volcano.sh/v1beta1): `spec.networkTopology`, `spec.subGroupPolicy`,
  `spec.minTaskMember` (per task, the task being a pod's `volcano.sh/task-spec` annotation) and
  `volcano.sh/preemptable`;
- Koordinator's gangs made of pod annotations alone (`state/pod_gangs.py`), Kubernetes' Workload
  API (`state/workload_api.py`) and KAI Scheduler's PodGroups (`state/kai_gangs.py`) build the same
  `GangSpec` from the pieces here.
Malformed input never raises out of here: it becomes a `Problem` naming the object and field, and
the gang falls back to the behaviour a user would least be surprised by (no constraint, i.e. "as
tight as possible"). A field that is read but not implemented is a `Problem` too
(`reason=UNSUPPORTED_FIELD`), so the user hears of it once (a Warning Event) instead of being ignored.

Match policies (Koordinator's words, applied to every dialect; `placement/members.py` counts them):
`waiting-and-running` counts running and assumed members towards minMember (scheduler-plugins,
Volcano and Kubernetes behave so); `once-satisfied` (Koordinator's default) needs minMember placed
together once, and once any member is bound the rest are placed as they come; `only-waiting` needs
minMember pods placed together every time, running members not counted.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from events.objects import (
    GANG_GROUPS_ANNOTATION,
    GANG_MATCH_POLICY_ALIAS_ANNOTATION,
    GANG_MATCH_POLICY_ANNOTATION,
    GANG_MODE_ANNOTATION,
    GANG_TOTAL_NUMBER_ANNOTATION,
    NETWORK_TOPOLOGY_SPEC_ANNOTATION,
    VOLCANO_PREEMPTABLE_ANNOTATION,
    LabelSelector,
    NetworkTopologySpec,
    PodGroup,
    VolcanoPodGroup,
)
from state.label_selectors import selector_problems, selects
from state.resources import QuantityError, parse_quantity

MUST_GATHER = "MustGather"
PREFER_GATHER = "PreferGather"

ONCE_SATISFIED = "once-satisfied"
ONLY_WAITING = "only-waiting"
WAITING_AND_RUNNING = "waiting-and-running"
MATCH_POLICIES = (ONCE_SATISFIED, ONLY_WAITING, WAITING_AND_RUNNING)

# Problem kinds (what a problem is about); the Event goes on that object (`daemon/topology_status.py`).
POD_GROUP_PROBLEM = "PodGroup"  # Koordinator's and Volcano's PodGroups (told apart by the state)
SCHEDULER_PLUGINS_PROBLEM = "SchedulerPluginsPodGroup"
KUBE_POD_GROUP_PROBLEM = "KubernetesPodGroup"
WORKLOAD_PROBLEM = "Workload"
KAI_POD_GROUP_PROBLEM = "KaiPodGroup"  # KAI Scheduler's PodGroup (scheduling.run.ai/v2alpha2)
POD_GANG_PROBLEM = "Gang"  # a gang of pod annotations: reported on the pod whose annotations define it

# Dialects (GangSpec.dialect): where a gang's spec was read from.
KOORDINATOR = "koordinator"
SCHEDULER_PLUGINS = "scheduler-plugins"
KOORDINATOR_PODS = "koordinator-annotations"
VOLCANO = "volcano"
KUBERNETES = "kubernetes"
KAI = "kai"


# Reasons a problem can carry (the Warning Event's reason and the `reason` of
# toposched_invalid_objects_total); without one, the reporter names it after the object's kind.
INVALID_QUANTITY = "InvalidQuantity"
UNDECODABLE_OBJECT = "UndecodableObject"
RECORD_TOO_LARGE = "RecordTooLarge"
INTERNAL_ERROR = "InternalError"  # not bad input: an event of the object could not be folded (a bug)
UNSUPPORTED_FIELD = "UnsupportedField"  # well formed, read, but not implemented: said once, not ignored


class Problem(msgspec.Struct, frozen=True):
    """Bad input found while folding: which object, which field, what is wrong (and, optionally, the
    reason to report it under: UNSUPPORTED_FIELD for a well-formed field read but not implemented)."""

    kind: str
    key: str
    field: str
    message: str
    reason: str = ""

    def __str__(self) -> str:
        return f"{self.kind} {self.key}: {self.field}: {self.message}"


class GatherRule(msgspec.Struct, frozen=True):
    """One entry of Koordinator's `gatherStrategy`: keep the gang inside one domain of `layer`."""

    layer: str
    strategy: str = PREFER_GATHER
    pod_count_multiple: int = 0  # 0: none
    index: int = 0  # its position in the annotation's gatherStrategy list, for messages


class TierLimit(msgspec.Struct, frozen=True):
    """Volcano's networkTopology: `hard` never spans above the tier, `soft` only prefers not to."""

    mode: str = "hard"
    highest_tier: int | None = None
    highest_tier_name: str = ""


class SubGroupRule(msgspec.Struct, frozen=True):
    """Volcano subGroupPolicy entry: pods split into partitions that each stay in their own tier limit."""

    name: str
    size: int | None
    min_sub_groups: int
    selector: LabelSelector | None
    match_label_keys: tuple[str, ...]
    limit: TierLimit | None
    index: int = 0  # its position in spec.subGroupPolicy, for messages

    def takes(self, labels: Mapping[str, str]) -> bool:
        """Whether a pod with these labels belongs to this policy, as Volcano decides: its labelSelector
        selects the pod and the pod has a non-empty value for every matchLabelKey."""
        if self.selector is not None and not selects(self.selector, labels):
            return False
        return all(labels.get(key) for key in self.match_label_keys)


class KaiConstraint(msgspec.Struct, frozen=True):
    """KAI's topologyConstraint (`state/kai_gangs.py`): the KAI Topology by name, and the node label keys
    (or level aliases) of its required and preferred levels; each `*_field` is where the value was read
    (the spec's field or the PodGroup's annotation), for messages."""

    topology: str = ""
    topology_field: str = ""
    required: str = ""
    required_field: str = ""
    preferred: str = ""
    preferred_field: str = ""


class KaiSubGroupRule(msgspec.Struct, frozen=True):
    """One node of a KAI PodGroup's sub-group tree (`KaiSubGroups`): the PodGroup itself (`index` -1) or one of
    its spec.subGroups (`index` its position there, for messages)."""

    name: str
    index: int
    children: tuple[int, ...]  # positions in KaiSubGroups.groups
    min_member: int  # descendant pods it needs (a leaf: its own pods); 0: none
    min_sub_group: int | None  # direct children that must be ready; None: all of them
    constraint: KaiConstraint | None = None

    @property
    def required_children(self) -> int:
        return len(self.children) if self.min_sub_group is None else self.min_sub_group


class KaiSubGroups(msgspec.Struct, frozen=True):
    """A KAI PodGroup's sub-groups as KAI's scheduler reads them (`state/kai_gangs.py`): a tree whose first
    node is the PodGroup. Pods belong to leaves by their label `kai.scheduler/subgroup-name` (`PodInfo.task`).
    A leaf is ready when its minMember of pods are; any other node when its minSubGroup of direct children
    (all of them when it sets none) are and, when it sets minMember, its descendant pods reach it."""

    groups: tuple[KaiSubGroupRule, ...]
    invalid: str = ""  # why the tree cannot be used (KAI's webhook refuses such a PodGroup): the gang waits

    def leaf_names(self) -> frozenset[str]:
        return frozenset(group.name for group in self.groups[1:] if not group.children)

    def ready(self, counts: Mapping[str, int], at: int = 0) -> bool:
        """Whether node `at` (the PodGroup by default) is ready with `counts` pods per leaf name."""
        group = self.groups[at]
        if not group.children:
            return counts.get(group.name, 0) >= group.min_member
        ready = sum(1 for child in group.children if self.ready(counts, child))
        if ready < group.required_children:
            return False
        return not group.min_member or self.pods(counts, at) >= group.min_member

    def pods(self, counts: Mapping[str, int], at: int = 0) -> int:
        """The pods of node `at`'s leaves in `counts`."""
        group = self.groups[at]
        if not group.children:
            return counts.get(group.name, 0)
        return sum(self.pods(counts, child) for child in group.children)

    def least_pods(self, at: int = 0) -> int:
        """The fewest pods with which node `at` can be ready: its required children that need the fewest."""
        group = self.groups[at]
        if not group.children:
            return group.min_member
        needs = sorted(self.least_pods(child) for child in group.children)
        return max(sum(needs[:group.required_children]), group.min_member)


class GangSpec(msgspec.Struct, frozen=True):
    key: str
    dialect: str  # KOORDINATOR, SCHEDULER_PLUGINS, KOORDINATOR_PODS, VOLCANO, KUBERNETES or KAI
    min_member: int
    schedule_timeout_seconds: float | None
    gang_group: tuple[str, ...]  # gang keys that must be placed together, this one included, sorted
    gather: tuple[GatherRule, ...] = ()
    tier_limit: TierLimit | None = None
    sub_groups: tuple[SubGroupRule, ...] = ()
    priority_class_name: str = ""
    match_policy: str = WAITING_AND_RUNNING  # what counts towards min_member (see the module docstring)
    task_minimums: tuple[tuple[str, int], ...] = ()  # Volcano minTaskMember: (task, minimum), sorted
    topology_key: str = ""  # Kubernetes: every pod on nodes sharing one value of this node label
    preemptable: bool = True  # False: never a preemption victim (volcano.sh/preemptable: "false")
    # KAI: the PodGroup's spec.preemptibility as written ("" when it says nothing: then its priority decides,
    # `ClusterState.gang_preemptable`)
    kai_preemptibility: str = ""
    disrupt_whole: bool = False  # Kubernetes disruptionMode PodGroup: no member is preempted alone
    kai: KaiConstraint | None = None  # KAI: required / preferred levels named by node label key
    kai_sub_groups: KaiSubGroups | None = None  # KAI: spec.subGroups, each with its threshold and levels
    # Kubernetes: the PodGroup's spec.priority (resolved by admission; None: its class decides, if it names one)
    group_priority: int | None = None
    preempt_never: bool = False  # Kubernetes: the PodGroup's preemptionPolicy Never: its pods never preempt
    # KAI: seconds the gang waits pending before it may evict anyone (spec.preemptionDelay; 0: none), counted
    # from `kai_delay_from` (epoch seconds: its creation or last eviction; None: when toposched first saw it)
    kai_preemption_delay: float = 0.0
    kai_delay_from: float | None = None
    # KAI: spec.markUnschedulable. False: the gang's pending pods get no PodScheduled=False/Unschedulable
    # condition (nothing an autoscaler provisions for), only its PodGroup says why it waits
    marks_unschedulable: bool = True
    # scheduler-plugins: the PodGroup's spec.minResources (milli-units, sorted; quantities that do not parse left
    # out), which its Coscheduling checks against the whole cluster's free room before trying the gang
    min_resources: tuple[tuple[str, int], ...] = ()
    # KAI: the node pool the PodGroup belongs to (its label `kai.scheduler/node-pool`; "" for the default pool, the
    # nodes without that label); None for a gang of another dialect, which any node may take
    kai_node_pool: str | None = None
    # KAI: spec.schedulingBackoff is set and not -1: the gang is tried in its node pool once; once a condition
    # says that pool could not place it, it waits for a move to another pool (`placement.gang.backoff_wait`)
    kai_tries_once: bool = False
    # Kubernetes 1.37: the hierarchy of CompositePodGroups this PodGroup is a leaf of (`state/composites.py`), as a
    # tree whose first node is its root and whose leaves are its GangGroup's gangs (None: a PodGroup of its own)
    composite: KaiSubGroups | None = None
    # the name of the label tree a hierarchy is planned on when its keys are not all layers of the cluster's
    # topology (`state.composites.label_tree_name`), worked out once per hierarchy
    composite_tree_name: str = ""
    # its root's disruptionMode all: the whole hierarchy is disrupted together, never one of its PodGroups alone
    composite_disrupt_whole: bool = False


# --------------------------------------------------------------------------- the rules
#
# Every rule below is applied by the fold (the daemon) and by `toposched validate` alike, and every
# message says what is done about the problem. Rules that need the cluster's topology (is this a
# layer, a tier, a tierName?) live in `state/topology_wishes.py`, shared the same way.

_GATHER_SHAPE = '{"gatherStrategy":[{"layer":"BlockLayer","strategy":"MustGather"|"PreferGather"}]}'


def _min_member(value: int, kind: str, key: str, problems: list[Problem]) -> int:
    if value < 0:
        problems.append(Problem(kind, key, "spec.minMember", f"{value} is negative; treated as 1"))
        return 1
    if value == 0:
        problems.append(Problem(kind, key, "spec.minMember", "is missing or 0: a gang needs at least 1; treated as 1"))
        return 1
    return value


def parse_gather_rules(raw: str, kind: str, key: str, min_member: int) -> tuple[tuple[GatherRule, ...], list[Problem]]:
    """Koordinator's network-topology-spec annotation; each bad entry or field is dropped with a problem."""
    field = f"metadata.annotations[{NETWORK_TOPOLOGY_SPEC_ANNOTATION}]"
    try:
        document = msgspec.json.decode(raw.encode("utf-8", "surrogatepass"))
    except msgspec.DecodeError as error:
        return (), [Problem(kind, key, field, f"is not valid JSON ({error}); expected {_GATHER_SHAPE}; "
                            "no gather rule applies")]
    entries = document.get("gatherStrategy", []) if isinstance(document, dict) else None
    if not isinstance(entries, list):
        return (), [Problem(kind, key, field, f"must be an object with a gatherStrategy list, like {_GATHER_SHAPE}; "
                            "no gather rule applies")]
    rules: list[GatherRule] = []
    problems: list[Problem] = []
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        where = f"{field}.gatherStrategy[{index}]"
        if not isinstance(entry, dict):
            problems.append(Problem(kind, key, where, "must be an object with layer and strategy; rule ignored"))
            continue
        layer = entry.get("layer")
        usable = True
        if not isinstance(layer, str) or not layer:
            problems.append(Problem(kind, key, f"{where}.layer", "is missing, empty or not a string; rule ignored"))
            usable = False
        strategy = entry.get("strategy", PREFER_GATHER)
        if strategy not in (MUST_GATHER, PREFER_GATHER):
            problems.append(Problem(kind, key, f"{where}.strategy",
                                    f"{strategy!r} is not {MUST_GATHER} or {PREFER_GATHER}; rule ignored"))
            usable = False
        multiple = 0
        if "podCountMultiple" in entry:
            value = entry["podCountMultiple"]
            if isinstance(value, bool) or not isinstance(value, int):
                problems.append(Problem(kind, key, f"{where}.podCountMultiple",
                                        f"{value!r} is not an integer; ignored (no pod-count multiple)"))
            elif value <= 0:
                problems.append(Problem(kind, key, f"{where}.podCountMultiple",
                                        f"{value} is not positive; ignored (no pod-count multiple)"))
            else:
                multiple = value
                if usable and min_member % value:
                    problems.append(Problem(
                        kind, key, f"{where}.podCountMultiple",
                        f"minMember {min_member} is not a multiple of {value}: every {layer} domain takes a multiple "
                        f"of {value} pods except one, which takes the rest"))
        if not usable or not isinstance(layer, str) or not isinstance(strategy, str):
            continue
        if layer in seen:
            problems.append(Problem(kind, key, f"{where}.layer", f"{layer!r} appears twice; this rule is ignored"))
            continue
        seen.add(layer)
        rules.append(GatherRule(layer, strategy, multiple, index))
    return tuple(rules), problems


def parse_gang_group(raw: str | None, own_key: str, kind: str) -> tuple[tuple[str, ...], list[Problem]]:
    """Koordinator's groups annotation: the gangs placed together with this one (always included)."""
    if raw is None or not raw.strip():  # Koordinator reads "" as no GangGroup, as its docs write it
        return (own_key,), []
    field = f"metadata.annotations[{GANG_GROUPS_ANNOTATION}]"
    alone = "the gang is scheduled on its own"
    try:
        document = msgspec.json.decode(raw.encode("utf-8", "surrogatepass"))
    except msgspec.DecodeError as error:
        return (own_key,), [Problem(kind, own_key, field, f'is not valid JSON ({error}); expected a list of '
                                    f'"namespace/name"; {alone}')]
    if not isinstance(document, list):
        return (own_key,), [Problem(kind, own_key, field, f'must be a JSON list of "namespace/name"; {alone}')]
    namespace = own_key.partition("/")[0] if "/" in own_key else "default"
    members = {own_key}
    problems: list[Problem] = []
    for index, entry in enumerate(document):
        where = f"{field}[{index}]"
        if not isinstance(entry, str) or not entry:
            problems.append(Problem(kind, own_key, where, f"{entry!r} is not a non-empty string; ignored"))
            continue
        parts = entry.split("/")
        if len(parts) > 2 or not all(parts):
            problems.append(Problem(kind, own_key, where, f"{entry!r} is not \"namespace/name\" or \"name\"; ignored"))
            continue
        members.add(entry if len(parts) == 2 else f"{namespace}/{entry}")
    return tuple(sorted(members)), problems


def match_policy_of(annotations: Mapping[str, str], kind: str, key: str, default: str,
                    problems: list[Problem]) -> str:
    """Koordinator's match-policy annotation (or its pod-group.scheduling.sigs.k8s.io alias)."""
    name = GANG_MATCH_POLICY_ANNOTATION
    raw = annotations.get(name)
    if not raw:
        name = GANG_MATCH_POLICY_ALIAS_ANNOTATION
        raw = annotations.get(name)
    if not raw:
        return default
    if raw not in MATCH_POLICIES:
        problems.append(Problem(kind, key, f"metadata.annotations[{name}]",
                                f"{raw!r} is not {', '.join(MATCH_POLICIES)}; using {default}"))
        return default
    return raw


def check_gang_mode(annotations: Mapping[str, str], kind: str, key: str, problems: list[Problem]) -> None:
    """Koordinator's mode annotation: Strict is what toposched does; NonStrict is read, not implemented."""
    raw = annotations.get(GANG_MODE_ANNOTATION)
    field = f"metadata.annotations[{GANG_MODE_ANNOTATION}]"
    if raw is None or raw == "Strict":
        return
    if raw == "NonStrict":
        problems.append(Problem(kind, key, field, "NonStrict is read but not implemented: toposched places a "
                                "gang's minimum in one plan and holds no resources for part of it meanwhile "
                                "(as Strict)", reason=UNSUPPORTED_FIELD))
    else:
        problems.append(Problem(kind, key, field, f"{raw!r} is not Strict or NonStrict; Strict"))


def check_total_number(annotations: Mapping[str, str], min_member: int, kind: str, key: str,
                       problems: list[Problem]) -> None:
    """Koordinator's total-number: the expected member count. toposched's one plan covers every pending
    member anyway, so only its form is checked."""
    raw = annotations.get(GANG_TOTAL_NUMBER_ANNOTATION)
    if raw is None:
        return
    field = f"metadata.annotations[{GANG_TOTAL_NUMBER_ANNOTATION}]"
    value = go_int(raw)
    if value is None:
        problems.append(Problem(kind, key, field, f"{raw!r} is not an integer; ignored"))
    elif 0 < value < min_member or value < 0:
        problems.append(Problem(kind, key, field, f"{value} is below the minimum {min_member}; "
                                "taken as the minimum (as Koordinator does)"))


def go_int(raw: str) -> int | None:
    """A 32-bit integer as Go's strconv.ParseInt(s, 10, 32) reads it (None when it would fail)."""
    text = raw[1:] if raw and raw[0] in "+-" else raw
    if not text or not text.isascii() or not text.isdigit():
        return None
    value = int(raw)
    return value if -(2**31) <= value < 2**31 else None


_GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_GO_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def preemptable_of(annotations: Mapping[str, str], labels: Mapping[str, str], kind: str, key: str,
                   problems: list[Problem]) -> bool:
    """Volcano's `volcano.sh/preemptable`, the annotation first, then the label: "false" (or a value
    Go's ParseBool refuses, which Volcano reads as false) means never a preemption victim."""
    for where, values in (("annotations", annotations), ("labels", labels)):
        raw = values.get(VOLCANO_PREEMPTABLE_ANNOTATION)
        if raw is None:
            continue
        if raw in _GO_TRUE:
            return True
        if raw not in _GO_FALSE:
            problems.append(Problem(kind, key, f"metadata.{where}[{VOLCANO_PREEMPTABLE_ANNOTATION}]",
                                    f"{raw!r} is not true or false; not preemptable (as Volcano reads it)"))
        return False
    return True


def _unused_min_resources(min_resources: Mapping[str, str], kind: str, key: str, problems: list[Problem]) -> None:
    if min_resources:
        problems.append(Problem(kind, key, "spec.minResources", "is read but not used: fit is computed from the "
                                "pods' own requests", reason=UNSUPPORTED_FIELD))


def koordinator_annotation_rules(annotations: Mapping[str, str], kind: str, key: str, min_member: int,
                                 default_policy: str, problems: list[Problem]
                                 ) -> tuple[tuple[str, ...], tuple[GatherRule, ...], str]:
    """Koordinator's gang annotations, read alike on a PodGroup and on a pod that defines its gang: the
    gangs placed together with it (groups), its gather rules (network-topology-spec), its match policy
    (`default_policy` when unset), and the mode and total-number checked. Problems are added to
    `problems`."""
    if not annotations:  # most PodGroups: what each annotation below gives when it is absent
        return (key,), (), default_policy
    gang_group, group_problems = parse_gang_group(annotations.get(GANG_GROUPS_ANNOTATION), key, kind)
    problems += group_problems
    gather: tuple[GatherRule, ...] = ()
    raw = annotations.get(NETWORK_TOPOLOGY_SPEC_ANNOTATION)
    if raw is not None:
        gather, gather_problems = parse_gather_rules(raw, kind, key, min_member)
        problems += gather_problems
    policy = match_policy_of(annotations, kind, key, default_policy, problems)
    check_gang_mode(annotations, kind, key, problems)
    check_total_number(annotations, min_member, kind, key, problems)
    return gang_group, gather, policy


def koordinator_gang_spec(group: PodGroup, key: str, *, kind: str = POD_GROUP_PROBLEM,
                          dialect: str = KOORDINATOR) -> tuple[GangSpec, list[Problem]]:
    """A scheduling.sigs.k8s.io PodGroup, or (kind SCHEDULER_PLUGINS_PROBLEM, dialect SCHEDULER_PLUGINS)
    a scheduling.x-k8s.io one: the same fields; Koordinator's match policy defaults to once-satisfied,
    scheduler-plugins counts running members (waiting-and-running)."""
    problems: list[Problem] = []
    annotations = group.metadata.annotations
    min_member = _min_member(group.spec.min_member, kind, key, problems)
    timeout = group.spec.schedule_timeout_seconds
    if timeout == 0 and dialect == SCHEDULER_PLUGINS:
        timeout = None  # its Coscheduling's Permit takes 0 as unset (its default wait): the MPI operator writes it
    elif timeout is not None and timeout <= 0:
        problems.append(Problem(kind, key, "spec.scheduleTimeoutSeconds", f"{timeout} is not positive; ignored"))
        timeout = None
    min_resources: tuple[tuple[str, int], ...] = ()
    if dialect == SCHEDULER_PLUGINS:
        min_resources = _scheduler_plugins_min_resources(group.spec.min_resources, kind, key, problems)
    else:
        _unused_min_resources(group.spec.min_resources, kind, key, problems)
    gang_group, gather, policy = koordinator_annotation_rules(
        annotations, kind, key, min_member, ONCE_SATISFIED if dialect == KOORDINATOR else WAITING_AND_RUNNING,
        problems)
    spec = GangSpec(
        key=key,
        dialect=dialect,
        min_member=min_member,
        schedule_timeout_seconds=float(timeout) if timeout is not None else None,
        gang_group=gang_group,
        gather=gather,
        match_policy=policy,
        min_resources=min_resources,
    )
    return spec, problems


def _scheduler_plugins_min_resources(min_resources: Mapping[str, str], kind: str, key: str,
                                     problems: list[Problem]) -> tuple[tuple[str, int], ...]:
    """A scheduler-plugins PodGroup's spec.minResources, read for its Coscheduling's cluster check
    (`placement/gang.py`); a quantity that does not parse is reported and left out."""
    read: list[tuple[str, int]] = []
    for resource, text in sorted(min_resources.items()):
        try:
            read.append((resource, parse_quantity(text)))
        except QuantityError as error:
            problems.append(Problem(kind, key, f"spec.minResources[{resource}]", f"{error}; left out of the check "
                                    "that the cluster has room for the gang", reason=INVALID_QUANTITY))
    return tuple(read)


def _tier_limit(raw: NetworkTopologySpec, key: str, field: str, problems: list[Problem]) -> TierLimit:
    mode = raw.mode or "hard"
    if mode not in ("hard", "soft"):
        problems.append(Problem("PodGroup", key, f"{field}.mode", f"{mode!r} is not hard or soft; using hard"))
        mode = "hard"
    tier, tier_name = raw.highest_tier_allowed, raw.highest_tier_name
    if tier is not None and tier_name:
        problems.append(Problem("PodGroup", key, field,
                                "highestTierAllowed and highestTierName are both set; using highestTierAllowed"))
        tier_name = ""
    if tier is not None and tier < 1:
        problems.append(Problem("PodGroup", key, f"{field}.highestTierAllowed",
                                f"{tier} is below 1; ignored (no tier limit)"))
        tier = None
    return TierLimit(mode=mode, highest_tier=tier, highest_tier_name=tier_name)


def volcano_gang_spec(group: VolcanoPodGroup, key: str) -> tuple[GangSpec, list[Problem]]:
    kind = POD_GROUP_PROBLEM
    problems: list[Problem] = []
    min_member = _min_member(group.spec.min_member, kind, key, problems)
    for resource, text in sorted(group.spec.min_resources.items()):  # read by the enqueue (volcano_enqueue.py)
        try:
            parse_quantity(text)
        except QuantityError as error:
            problems.append(Problem(kind, key, f"spec.minResources[{resource}]", f"{error}; left out when toposched "
                                    "enqueues a Volcano Job's PodGroup", reason=INVALID_QUANTITY))
    tasks: list[tuple[str, int]] = []
    for task, minimum in sorted(group.spec.min_task_member.items()):
        if minimum < 0:
            problems.append(Problem(kind, key, f"spec.minTaskMember[{task}]", f"{minimum} is negative; ignored"))
        elif minimum > 0:
            tasks.append((task, minimum))
    if sum(minimum for _, minimum in tasks) > min_member:
        problems.append(Problem(kind, key, "spec.minTaskMember",
                                f"the task minimums add up to {sum(m for _, m in tasks)}, more than minMember "
                                f"{min_member}: the gang needs them all"))
    preemptable = preemptable_of(group.metadata.annotations, group.metadata.labels, kind, key, problems)
    limit = None
    if group.spec.network_topology is not None:
        limit = _tier_limit(group.spec.network_topology, key, "spec.networkTopology", problems)
    sub_groups: list[SubGroupRule] = []
    names: set[str] = set()
    for index, policy in enumerate(group.spec.sub_group_policy):
        field = f"spec.subGroupPolicy[{index}]"
        name = policy.name
        if not name:
            name = f"subgroup-{index}"
            problems.append(Problem(kind, key, f"{field}.name", f"is empty; called {name!r} in messages"))
        elif name in names:
            problems.append(Problem(kind, key, f"{field}.name", f"{name!r} appears twice"))
        names.add(name)
        size = policy.sub_group_size
        if size is not None and size < 1:
            problems.append(Problem(kind, key, f"{field}.subGroupSize",
                                    f"{size} is below 1; ignored (each group is one partition)"))
            size = None
        elif size is not None and size > min_member:
            problems.append(Problem(kind, key, f"{field}.subGroupSize",
                                    f"{size} is larger than the gang's minMember {min_member}: no pod of a partition "
                                    "is placed before the partition is full"))
        minimum = policy.min_sub_groups or 0
        if minimum < 0:
            problems.append(Problem(kind, key, f"{field}.minSubGroups", f"{minimum} is negative; using 0"))
            minimum = 0
        elif minimum and size is not None and minimum * size > min_member:
            problems.append(Problem(kind, key, f"{field}.minSubGroups",
                                    f"{minimum} sub-groups of {size} pods exceed the gang's minMember {min_member}"))
        if policy.label_selector is not None:  # (with no selector and no matchLabelKeys, every pod belongs)
            found = selector_problems(policy.label_selector)
            if found:
                problems += [Problem(kind, key, f"{field}.labelSelector.{inner}", f"{message}; policy ignored")
                             for inner, message in found]
                continue
        sub_limit = None
        if policy.network_topology is not None:
            sub_limit = _tier_limit(policy.network_topology, key, f"{field}.networkTopology", problems)
        sub_groups.append(SubGroupRule(
            name=name,
            size=size,
            min_sub_groups=minimum,
            selector=policy.label_selector,
            match_label_keys=tuple(policy.match_label_keys),
            limit=sub_limit,
            index=index,
        ))
    spec = GangSpec(
        key=key,
        dialect="volcano",
        min_member=min_member,
        schedule_timeout_seconds=None,
        gang_group=(key,),
        tier_limit=limit,
        sub_groups=tuple(sub_groups),
        priority_class_name=group.spec.priority_class_name,
        task_minimums=tuple(tasks),
        preemptable=preemptable,
    )
    return spec, problems
