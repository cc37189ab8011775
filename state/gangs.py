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

import msgspec

from events.objects import (
    GANG_GROUPS_ANNOTATION,
    NETWORK_TOPOLOGY_SPEC_ANNOTATION,
    PodGroup,
    VolcanoPodGroup,
)

MUST_GATHER = "MustGather"
PREFER_GATHER = "PreferGather"


class Problem(msgspec.Struct, frozen=True):
    """Bad input found while folding: which object, which field, what is wrong."""

    kind: str
    key: str
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.kind} {self.key}: {self.field}: {self.message}"


class GatherRule(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True):
    """One entry of Koordinator's `gatherStrategy`: keep the gang inside one domain of `layer`."""

    layer: str
    strategy: str = PREFER_GATHER
    pod_count_multiple: int = 0


class NetworkTopologySpecAnnotation(msgspec.Struct, frozen=True, rename="camel"):
    gather_strategy: list[GatherRule] = []


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
    match_labels: dict[str, str]
    match_label_keys: tuple[str, ...]
    limit: TierLimit | None


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


def parse_gather_rules(raw: str, kind: str, key: str) -> tuple[tuple[GatherRule, ...], list[Problem]]:
    """Parse the network-topology-spec annotation; bad entries are dropped with a problem each."""
    field = f"metadata.annotations[{NETWORK_TOPOLOGY_SPEC_ANNOTATION}]"
    try:
        spec = msgspec.json.decode(raw.encode(), type=NetworkTopologySpecAnnotation)
    except msgspec.DecodeError as error:
        return (), [Problem(kind, key, field, f"is not valid JSON of the form "
                            f'{{"gatherStrategy":[{{"layer":...,"strategy":"MustGather"|"PreferGather"}}]}}: {error}')]
    rules: list[GatherRule] = []
    problems: list[Problem] = []
    for index, rule in enumerate(spec.gather_strategy):
        where = f"{field}.gatherStrategy[{index}]"
        if not rule.layer:
            problems.append(Problem(kind, key, f"{where}.layer", "is empty"))
        elif rule.strategy not in (MUST_GATHER, PREFER_GATHER):
            problems.append(Problem(kind, key, f"{where}.strategy",
                                    f"{rule.strategy!r} is not MustGather or PreferGather"))
        elif rule.pod_count_multiple < 0:
            problems.append(Problem(kind, key, f"{where}.podCountMultiple",
                                    f"{rule.pod_count_multiple} is negative"))
        else:
            rules.append(rule)
    return tuple(rules), problems


def parse_gang_group(raw: str | None, own_key: str, namespace: str, kind: str) -> tuple[tuple[str, ...], list[Problem]]:
    if raw is None:
        return (own_key,), []
    field = f"metadata.annotations[{GANG_GROUPS_ANNOTATION}]"
    try:
        names = msgspec.json.decode(raw.encode(), type=list[str])
    except msgspec.DecodeError as error:
        return (own_key,), [Problem(kind, own_key, field, f'is not a JSON list of "namespace/name": {error}')]
    members = {own_key}
    for name in names:
        members.add(name if "/" in name else f"{namespace}/{name}")
    return tuple(sorted(members)), []


def koordinator_gang_spec(group: PodGroup, key: str) -> tuple[GangSpec, list[Problem]]:
    kind = "PodGroup"
    problems: list[Problem] = []
    annotations = group.metadata.annotations
    min_member = group.spec.min_member
    if min_member < 0:
        problems.append(Problem(kind, key, "spec.minMember", f"{min_member} is negative; treated as 1"))
        min_member = 1
    timeout = group.spec.schedule_timeout_seconds
    if timeout is not None and timeout <= 0:
        problems.append(Problem(kind, key, "spec.scheduleTimeoutSeconds", f"{timeout} is not positive; ignored"))
        timeout = None
    gang_group, group_problems = parse_gang_group(
        annotations.get(GANG_GROUPS_ANNOTATION), key, group.metadata.namespace, kind
    )
    problems += group_problems
    gather: tuple[GatherRule, ...] = ()
    raw = annotations.get(NETWORK_TOPOLOGY_SPEC_ANNOTATION)
    if raw is not None:
        gather, gather_problems = parse_gather_rules(raw, kind, key)
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


def _tier_limit(raw_mode: str, tier: int | None, tier_name: str, key: str, field: str,
                problems: list[Problem]) -> TierLimit | None:
    mode = raw_mode or "hard"
    if mode not in ("hard", "soft"):
        problems.append(Problem("PodGroup", key, f"{field}.mode", f"{mode!r} is not hard or soft; using hard"))
        mode = "hard"
    if tier is not None and tier_name:
        problems.append(Problem("PodGroup", key, field,
                                "highestTierAllowed and highestTierName cannot both be set; using highestTierAllowed"))
        tier_name = ""
    if tier is not None and tier < 1:
        problems.append(Problem("PodGroup", key, f"{field}.highestTierAllowed", f"{tier} is below 1; ignored"))
        tier = None
    if tier is None and not tier_name:
        return TierLimit(mode=mode)
    return TierLimit(mode=mode, highest_tier=tier, highest_tier_name=tier_name)


def volcano_gang_spec(group: VolcanoPodGroup, key: str) -> tuple[GangSpec, list[Problem]]:
    problems: list[Problem] = []
    min_member = group.spec.min_member
    if min_member < 0:
        problems.append(Problem("PodGroup", key, "spec.minMember", f"{min_member} is negative; treated as 1"))
        min_member = 1
    limit = None
    topology = group.spec.network_topology
    if topology is not None:
        limit = _tier_limit(topology.mode, topology.highest_tier_allowed, topology.highest_tier_name, key,
                            "spec.networkTopology", problems)
    sub_groups: list[SubGroupRule] = []
    for index, policy in enumerate(group.spec.sub_group_policy):
        field = f"spec.subGroupPolicy[{index}]"
        size = policy.sub_group_size
        if size is not None and size < 1:
            problems.append(Problem("PodGroup", key, f"{field}.subGroupSize", f"{size} is below 1; ignored"))
            size = None
        minimum = policy.min_sub_groups or 0
        if minimum < 0:
            problems.append(Problem("PodGroup", key, f"{field}.minSubGroups", f"{minimum} is negative; using 0"))
            minimum = 0
        sub_limit = None
        if policy.network_topology is not None:
            nt = policy.network_topology
            sub_limit = _tier_limit(nt.mode, nt.highest_tier_allowed, nt.highest_tier_name, key,
                                    f"{field}.networkTopology", problems)
        match_labels = dict(policy.label_selector.match_labels) if policy.label_selector else {}
        sub_groups.append(SubGroupRule(
            name=policy.name or f"subgroup-{index}",
            size=size,
            min_sub_groups=minimum,
            match_labels=match_labels,
            match_label_keys=tuple(policy.match_label_keys),
            limit=sub_limit,
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
