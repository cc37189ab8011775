"""Who a job's members are, in which order they sit, and how they group into pod shapes.

Shared vocabulary of `plan_gang`, sub-group partitions and lone pods: a member is *running* when
it is bound or assumed and not finished or terminating (it holds its place and anchors the job);
members are ordered by `gang.scheduling.koordinator.sh/network-topology-index` (then name), so
neighbours in that order are handed neighbouring nodes.

What counts towards a gang's minimum (`counted`), which pending pods must be placed together now
(`minimum_of`) and whether a gang may bind (`quorum_met`, the Permit rule) follow its match policy
(`state/gangs.py`): waiting-and-running counts every running member; once-satisfied counts them
until one is bound, and from then on the minimum is met for good (the rest are placed as they
come); only-waiting counts assumed members only, never bound ones. Volcano's task minimums are
counted the same way, task by task, on top of minMember. Placement, preemption, the queue's hints
and the scheduler's Permit all use these, so they never disagree on what a gang needs.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet

from events.objects import Affinity, PodSpec, Toleration
from placement.fit import Shape, shape_in, shape_of, topology_index, with_pod_rules
from placement.gather import Demand
from placement.pod_affinity import affinity_index, rules_for, self_exclusion
from placement.pod_spread import has_spreads, spread_rules, spread_tokens
from state.cluster import ClusterState, NodePool, PodInfo
from state.gangs import ONCE_SATISFIED, ONLY_WAITING, GangSpec, KaiSubGroups
from state.resources import Resources
from state.topology import Domain

ROOT_DOMAIN = ""
_NOBODY: frozenset[str] = frozenset()
SHAPES_KEY = "placement.members.shapes"
# In a reason, what marks a task below its minimum (Volcano's minTaskMember), which the API adapter tells
# apart from a gang below minMember.
TASK_SHORT = "of minTaskMember"


def pod_order(pod: PodInfo) -> tuple[int, int, str]:
    """Members sit in network-topology-index order; pods without an index come after, by name."""
    index = topology_index(pod.obj)
    return (0, index, pod.key) if index is not None else (1, 0, pod.key)


def is_running(pod: PodInfo) -> bool:
    """Bound or assumed, not finished, not on its way out: a member that already holds its place."""
    return bool(pod.placed_node) and not pod.removed and not pod.terminal and not pod.terminating


def is_bound(pod: PodInfo) -> bool:
    """Running and bound (not merely assumed)."""
    return bool(pod.node_name) and not pod.removed and not pod.terminal and not pod.terminating


def counted(spec: GangSpec, running: Sequence[PodInfo], members: Iterable[PodInfo] | None = None) -> int:
    """How many of the running members `running` count towards the minimum under the gang's match
    policy (`members`: the whole gang, to tell whether once-satisfied is satisfied; default `running`)."""
    policy = spec.match_policy
    if policy == ONLY_WAITING:
        return sum(1 for pod in running if not is_bound(pod))
    if policy == ONCE_SATISFIED and any(is_bound(pod) for pod in (running if members is None else members)):
        return max(spec.min_member, len(running), *(m for _, m in spec.task_minimums))
    return len(running)


def minimum_of(spec: GangSpec, running: Sequence[PodInfo], pending: Sequence[PodInfo]) -> tuple[list[str], str]:
    """The pending pods (a subset of `pending`, in its order) that must be placed together now for the
    gang to reach its minimum, with each task minimum first; or ([], why) when too few pods exist
    for a task minimum or, under only-waiting, for minMember."""
    satisfied = spec.match_policy == ONCE_SATISFIED and any(is_bound(pod) for pod in running)
    chosen: set[str] = set()
    tree = spec.kai_sub_groups
    if tree is not None and tree.groups:
        kai_chosen, short = kai_minimum(tree, running, pending)
        if short:
            return [], short
        chosen.update(kai_chosen)
    for task, minimum in spec.task_minimums:
        if satisfied:
            break
        mine = [pod for pod in running if pod.task == task]
        have = counted(spec, mine, running)
        waiting = [pod for pod in pending if pod.task == task]
        need = max(0, minimum - have)
        if len(waiting) < need:
            return [], (f"task {task!r}: {have + len(waiting)} {TASK_SHORT} {minimum} pods exist "
                        f"({have} counted, {len(waiting)} pending): {need - len(waiting)} missing")
        chosen.update(pod.key for pod in waiting[:need])
    base = max(0, spec.min_member - counted(spec, running))
    rest = [pod.key for pod in pending if pod.key not in chosen]
    extra = max(0, base - len(chosen))
    if spec.match_policy == ONLY_WAITING and len(rest) < extra:
        have = counted(spec, running)
        return [], (f"{have + len(pending)} of minMember {spec.min_member} pods wait to be placed together "
                    f"(only-waiting: running members do not count): {extra - len(rest)} missing")
    chosen.update(rest[:extra])
    return [pod.key for pod in pending if pod.key in chosen], ""


def leaf_counts(pods: Iterable[PodInfo], composite: bool = False) -> dict[str, int]:
    """Pods per leaf of a sub-group tree: a KAI sub-group (their task), or a hierarchy's PodGroup (their gang)."""
    counts: dict[str, int] = {}
    for pod in pods:
        leaf = pod.gang if composite else pod.task
        counts[leaf] = counts.get(leaf, 0) + 1
    return counts


def kai_minimum(tree: KaiSubGroups, running: Sequence[PodInfo], pending: Sequence[PodInfo], *,
                composite: bool = False) -> tuple[list[str], str]:
    """The fewest pending pods (in `pending`'s order) that make a KAI PodGroup's sub-group tree (`composite`: a
    CompositePodGroup hierarchy, whose leaves are its PodGroups) ready next to its running members: under each
    node its required children that need the fewest; or ([], why) when no choice can, naming the leaves short
    of pods."""
    have = leaf_counts(running, composite)
    waiting: dict[str, list[str]] = {}
    for pod in pending:
        waiting.setdefault(pod.gang if composite else pod.task, []).append(pod.key)

    def under(at: int) -> list[str]:
        group = tree.groups[at]
        if not group.children:
            return waiting.get(group.name, [])
        return [key for child in group.children for key in under(child)]

    def choose(at: int) -> list[str] | None:
        group = tree.groups[at]
        if not group.children:
            need = max(0, group.min_member - have.get(group.name, 0))
            mine = waiting.get(group.name, [])
            return mine[:need] if len(mine) >= need else None
        options = sorted((len(picked), number, picked) for number, child in enumerate(group.children)
                         if (picked := choose(child)) is not None)
        if len(options) < group.required_children:
            return None
        picked = [key for _, _, keys in options[:group.required_children] for key in keys]
        short = group.min_member - tree.pods(have, at) - len(picked)
        if short > 0:
            taken = set(picked)
            more = [key for key in under(at) if key not in taken]
            if len(more) < short:
                return None
            picked += more[:short]
        return picked

    picked = choose(0)
    if picked is not None:
        return picked, ""
    short_leaves = []
    for group in tree.groups[1:]:
        if not group.children:
            exist = have.get(group.name, 0) + len(waiting.get(group.name, []))
            if exist < group.min_member:
                short_leaves.append(f"{group.name!r} {exist} of {'minCount' if composite else 'minMember'} "
                                    f"{group.min_member}")
    detail = "; ".join(short_leaves[:3]) + (f" and {len(short_leaves) - 3} more" if len(short_leaves) > 3 else "")
    rule = "its hierarchy to be ready (minGroupCount / minCount)" if composite else (
        "its sub-groups to be ready (minSubGroup / minMember)")
    return [], f"too few pods exist for {rule}" + (f": {detail}" if detail else "")


def quorum_met(state: ClusterState, gang: str) -> bool:
    """Whether the gang may bind now (Permit): its counted running members reach minMember and every
    task minimum; a CompositePodGroup hierarchy's leaf, when the running members of all its leaves satisfy
    the root."""
    info = state.gangs.get(gang)
    if info is None or info.spec is None:
        return False
    spec = info.spec
    pods = state.pods
    if spec.composite is not None:  # a CompositePodGroup hierarchy binds once its root is satisfied
        placed = [pod for group in spec.gang_group if (member := state.gangs.get(group)) is not None
                  for key in member.members if (pod := pods.get(key)) is not None and is_running(pod)]
        return not spec.composite.invalid and spec.composite.ready(leaf_counts(placed, composite=True))
    running = [pod for key in info.members if (pod := pods.get(key)) is not None and is_running(pod)]
    if counted(spec, running) < spec.min_member:
        return False
    tree = spec.kai_sub_groups
    if tree is not None and tree.groups and not tree.ready(leaf_counts(running)):
        return False
    return all(counted(spec, [pod for pod in running if pod.task == task], running) >= minimum
               for task, minimum in spec.task_minimums)


def group_quorum_met(state: ClusterState, gangs: Sequence[str]) -> bool:
    """Whether every gang of a unit may bind (Permit): a CompositePodGroup hierarchy's root is asked once, not
    once per PodGroup of it (each would count every PodGroup's pods)."""
    first = state.gangs.get(gangs[0]) if gangs else None
    if first is not None and first.spec is not None and first.spec.composite is not None:
        return quorum_met(state, gangs[0])
    return all(quorum_met(state, gang) for gang in gangs)


def domain_label(domain: Domain) -> str:
    return ROOT_DOMAIN if domain.parent is None else domain.name


def where(domain: Domain) -> str:
    return "the whole cluster" if domain.parent is None else f"{domain.layer} {domain.name}"


_ShapeParts = tuple[Resources, dict[str, str], list[Toleration], Affinity | None, Shape]


class PodShapes:
    """Each pod's `shape_of` and `pod_order`, kept in `state.reader_caches` between planning calls: a
    gang that does not fit is grouped again at every attempt, pod by pod. An entry holds while the
    pod keeps its spec and annotations objects, requests, priority and KAI node pool, which are all the two read:
    the fold replaces these on any change, never mutates what they say (a status update, such as
    the scheduler's own PodScheduled condition, keeps the spec and the metadata's annotations)."""

    __slots__ = ("_anti_placed", "_changes_seen", "entries", "parts", "state")

    PARTS_LIMIT = 4096

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.entries: dict[str, tuple[PodSpec, dict[str, str], Resources, int, NodePool | None, Shape,
                                      tuple[int, int, str]]] = {}
        # What a shape is made of, by identity -> those objects and the shape: the fold shares the parts of
        # pods of one kind (requests, tolerations, an empty selector), so a gang of 3,000 or a burst of lone
        # pods computes its shape once
        self.parts: dict[tuple[int, int, int, int, int, NodePool | None], _ShapeParts] = {}
        self._changes_seen = -1  # where `state.pod_changes` stood when `_anti_placed` was read
        self._anti_placed = False  # whether a placed (or nominated) pod has required anti-affinity

    def shape(self, pod: PodInfo, ignore: frozenset[str] = _NOBODY) -> Shape:
        """`shape_of(pod)`, computed once for the pods that share the objects it is made of, narrowed by
        the inter-pod rules the pods placed now set for it (`placement.pod_affinity` and
        `placement.pod_spread`, derived afresh); the pods in `ignore` count as gone for both (a preemption's
        victims, as kube-scheduler's preemption removes them from the node and its spread counts)."""
        return self._narrowed(pod, self._own_shape(pod, self.state.node_pool_of(pod)), ignore)

    def _narrowed(self, pod: PodInfo, shape: Shape, ignore: frozenset[str]) -> Shape:
        # The usual pod (no terms of its own, no placed pod with anti-affinity) costs a few reads here.
        affinity = pod.obj.spec.affinity
        state = self.state
        end = state.pod_changes.end
        if end != self._changes_seen:
            self._changes_seen = end
            index = affinity_index(state)
            self._anti_placed = bool(index.anti) or index.nominations().anti
        spreads = has_spreads(pod.obj)
        if not self._anti_placed and not spreads and (affinity is None or (affinity.pod_affinity is None
                                                                           and affinity.pod_anti_affinity is None)):
            return shape
        rules, tokens = rules_for(state, pod, ignore), self_exclusion(state, pod)
        if spreads:
            rules = (*rules, *spread_rules(state, pod, shape, ignore))
            tokens = (*tokens, *spread_tokens(state, pod, shape, ignore))
        return with_pod_rules(shape, rules, tokens)

    def own_shape(self, pod: PodInfo) -> Shape:
        """The shape of the pod's own parts, without what the pods placed now ask of it."""
        return self._own_shape(pod, self.state.node_pool_of(pod))

    def _own_shape(self, pod: PodInfo, node_pool: NodePool | None) -> Shape:
        """The shape of the pod's own parts, in KAI node pool `node_pool` (`ClusterState.node_pool_of`). A pod
        with claims is shaped afresh each time: where its volumes can be reached changes with objects of other
        kinds (claims, PersistentVolumes, StorageClasses)."""
        spec = pod.obj.spec
        if spec.volumes:
            return shape_in(self.state, pod)
        requests, selector, tolerations, affinity = pod.requests, spec.node_selector, spec.tolerations, spec.affinity
        key = (id(requests), id(selector), id(tolerations), id(affinity), pod.priority, node_pool)
        hit = self.parts.get(key)
        if (hit is not None and hit[0] is requests and hit[1] is selector and hit[2] is tolerations
                and hit[3] is affinity):
            return hit[4]
        shape = shape_of(pod, node_pool=node_pool)
        if len(self.parts) >= self.PARTS_LIMIT:
            self.parts.clear()
        # Holding the objects keeps their ids from being reused while the entry stands.
        self.parts[key] = (requests, selector, tolerations, affinity, shape)
        return shape

    def of(self, pod: PodInfo, ignore: frozenset[str] = _NOBODY) -> tuple[Shape, tuple[int, int, str]]:
        """The pod's `shape` (pods in `ignore` counted as gone) and its `pod_order`."""
        obj = pod.obj
        spec, annotations = obj.spec, obj.metadata.annotations
        if spec.volumes:
            return self.shape(pod, ignore), pod_order(pod)
        entry = self.entries.get(pod.key)
        pool = self.state.node_pool_of(pod)
        if (entry is not None and entry[0] is spec and entry[1] is annotations and entry[2] is pod.requests
                and entry[3] == pod.priority and entry[4] == pool):
            return self._narrowed(pod, entry[5], ignore), entry[6]
        if len(self.entries) > 2 * len(self.state.pending) + 1024:
            # Only pending pods are planned: let go of the rest (and of the objects they keep alive).
            pending = self.state.pending
            self.entries = {key: entry for key, entry in self.entries.items() if key in pending}
        shape, order = self._own_shape(pod, pool), pod_order(pod)
        self.entries[pod.key] = (spec, annotations, pod.requests, pod.priority, pool, shape, order)
        return self._narrowed(pod, shape, ignore), order


def pod_shapes(state: ClusterState) -> PodShapes:
    """The state's `PodShapes` (made on first use)."""
    found = state.reader_caches.get(SHAPES_KEY)
    if not isinstance(found, PodShapes):
        found = PodShapes(state)
        state.reader_caches[SHAPES_KEY] = found
    return found


def demands_for(state: ClusterState, pods: Sequence[str], multiples: Mapping[str, dict[int, int]],
                ignore: AbstractSet[str] = _NOBODY) -> list[Demand]:
    """Group pods by (gang, shape): pods of one group share offerslots; order pods for adjacency. Pods in
    `ignore` count as gone for the inter-pod rules of the shapes (placement's `ignore_pods`)."""
    known = pod_shapes(state)
    gone = ignore if isinstance(ignore, frozenset) else frozenset(ignore)
    groups: dict[tuple[str, bytes], tuple[Shape, list[tuple[tuple[int, int, str], str]]]] = {}
    for key in pods:
        pod = state.pods[key]
        shape, order = known.of(pod, gone)
        group = groups.get((pod.gang, shape.key))
        if group is None:
            groups[(pod.gang, shape.key)] = (shape, [(order, key)])
        else:
            group[1].append((order, key))
    ordered: list[tuple[str, tuple[int, int, str], Demand]] = []
    for (gang, _), (shape, members) in groups.items():
        members.sort()  # by pod_order, whose last field is the key: no two members tie
        ordered.append((gang, members[0][0], Demand(shape, [key for _, key in members], gang, multiples.get(gang))))
    ordered.sort(key=_by_gang_then_first)
    return [demand for _, _, demand in ordered]


def _by_gang_then_first(item: tuple[str, tuple[int, int, str], Demand]) -> tuple[str, tuple[int, int, str]]:
    return item[0], item[1]


