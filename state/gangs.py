"""What a gang asks for: minMember, timeouts, GangGroups and topology constraints, parsed once.

A gang is named by its PodGroup key (`namespace/name`). Koordinator PodGroups
(scheduling.sigs.k8s.io/v1alpha1) carry their topology wishes in the annotation
`gang.scheduling.koordinator.sh/network-topology-spec`; Volcano PodGroups
(scheduling.volcano.sh/v1beta1) in `spec.networkTopology` and `spec.subGroupPolicy`. Both are read
into one `GangSpec` so placement never looks at raw annotations. Malformed input never raises out of
here: it becomes a `Problem` naming the object and field, and the gang falls back to the behaviour a
user would least be surprised by (no constraint, i.e. "as tight as possible").

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from events.objects import (
    GANG_GROUPS_ANNOTATION,
    NETWORK_TOPOLOGY_SPEC_ANNOTATION,
    LabelSelector,
    NetworkTopologySpec,
    PodGroup,
    VolcanoPodGroup,
)
from state.label_selectors import selector_problems, selects

MUST_GATHER = "MustGather"
PREFER_GATHER = "PreferGather"


# Reasons a problem can carry (the Warning Event's reason and the `reason` of
# toposched_invalid_objects_total); without one, the reporter names it after the object's kind.
INVALID_QUANTITY = "InvalidQuantity"
UNDECODABLE_OBJECT = "UndecodableObject"
RECORD_TOO_LARGE = "RecordTooLarge"
INTERNAL_ERROR = "InternalError"  # not bad input: an event of the object could not be folded (a bug)


class Problem(msgspec.Struct, frozen=True):
    """Bad input found while folding: which object, which field, what is wrong (and, optionally, the
    reason to report it under)."""

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


class GangSpec(msgspec.Struct, frozen=True):
    key: str
    dialect: str  # "koordinator" | "volcano"
    min_member: int
    schedule_timeout_seconds: float | None
    gang_group: tuple[str, ...]  # gang keys that must be placed together, this one included, sorted
    gather: tuple[GatherRule, ...] = ()
    tier_limit: TierLimit | None = None
    sub_groups: tuple[SubGroupRule, ...] = ()
    priority_class_name: str = ""


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
    if raw is None:
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


def koordinator_gang_spec(group: PodGroup, key: str) -> tuple[GangSpec, list[Problem]]:
    kind = "PodGroup"
    problems: list[Problem] = []
    annotations = group.metadata.annotations
    min_member = _min_member(group.spec.min_member, kind, key, problems)
    timeout = group.spec.schedule_timeout_seconds
    if timeout is not None and timeout <= 0:
        problems.append(Problem(kind, key, "spec.scheduleTimeoutSeconds", f"{timeout} is not positive; ignored"))
        timeout = None
    gang_group, group_problems = parse_gang_group(annotations.get(GANG_GROUPS_ANNOTATION), key, kind)
    problems += group_problems
    gather: tuple[GatherRule, ...] = ()
    raw = annotations.get(NETWORK_TOPOLOGY_SPEC_ANNOTATION)
    if raw is not None:
        gather, gather_problems = parse_gather_rules(raw, kind, key, min_member)
        problems += gather_problems
    spec = GangSpec(
        key=key,
        dialect="koordinator",
        min_member=min_member,
        schedule_timeout_seconds=float(timeout) if timeout is not None else None,
        gang_group=gang_group,
        gather=gather,
    )
    return spec, problems


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
    kind = "PodGroup"
    problems: list[Problem] = []
    min_member = _min_member(group.spec.min_member, kind, key, problems)
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
    )
    return spec, problems
