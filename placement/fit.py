"""Pod fit on a node: may a pod of this shape go on this node, and how many of them fit there.

A *shape* is everything about a pod that decides where it may go: its resource requests (every
resource, extended ones included, plus one `pods` slot), its priority (which nominations it must
respect), its tolerations, nodeSelector and required node affinity, and the KAI node pool it belongs
to (`ClusterState.node_pool_of`). Pods of one gang nearly always share one shape, so placement asks these
questions once per shape per node, never per pod.

Two questions, kept apart because they change at different speeds:
- `admits(shape, node)`: the static filters (spec.unschedulable unless the pod tolerates the
  node.kubernetes.io/unschedulable taint, NoSchedule/NoExecute taints not tolerated, the KAI node pool,
  nodeSelector, required node affinity, and where its claims' volumes can be reached: state/volumes.py).
  Returns "" or the reason, in kube-scheduler's words (a node pool's in words of its own: a KAI scheduler
  does not see another pool's nodes at all).
- `Capacity.slots(shape, node)`: how many pods of the shape fit in what the node offers that priority:
  allocatable - used (bound + assumed) - nominations of priority >= p held by other gangs + the
  requests of the pods we were asked to treat as gone (`ignore_pods`).

Pure: no I/O, no clock; never mutates the state it reads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from collections.abc import Set as AbstractSet

import msgspec

from events.objects import (
    KAI_DEFAULT_NODE_POOL,
    NETWORK_TOPOLOGY_INDEX_ANNOTATION,
    NodeSelectorTerm,
    Pod,
    Taint,
    Toleration,
)
from placement.pod_affinity import PodRule
from state.cluster import ClusterState, NodeInfo, NodePool, PodInfo
from state.node_selectors import term_matches
from state.resources import HOST_PORT_PREFIX, MILLI, STATIC_VOLUME_PROTOCOL, Resources
from state.volumes import (
    ATTACH_PREFIX,
    ATTACHED_PREFIX,
    HOSTNAME_LABEL,
    ZONE_CONFLICT,
    AttachNeed,
    VolumeReach,
    csi_volumes,
    zone_conflict,
)

NO_SCHEDULE = "NoSchedule"
NO_EXECUTE = "NoExecute"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
UNLIMITED = 1 << 30


Requests = tuple[tuple[str, int], ...]  # (resource, positive milli-units), sorted by resource


class Shape(msgspec.Struct, frozen=True):
    """What decides where a pod may go. `key` is equal for two pods exactly when their shapes are."""

    key: bytes
    requests: Requests
    priority: int
    node_selector: tuple[tuple[str, str], ...]
    tolerations: tuple[Toleration, ...]
    terms: tuple[NodeSelectorTerm, ...] | None  # required node affinity; None when absent
    volumes: tuple[VolumeReach, ...] = ()  # where its claims' volumes can be reached (state/volumes.py)
    # Its containers' host ports (`state.resources.host_port_resource` names), kept out of `requests`:
    # a node has room for one holder of each, and no domain aggregate counts them.
    host_ports: tuple[str, ...] = ()
    # What the pods placed now ask of its nodes through required inter-pod (anti-)affinity
    # (`placement/pod_affinity.py`): derived from the state, so kept apart from the pod's own parts.
    pod_rules: tuple[PodRule, ...] = ()
    # What its CSI volumes ask of the nodes' attach limits (NodeVolumeLimits, state/volumes.py), kept out of
    # `requests`: a volume counts once per node however many pods use it there, and a node without a limit
    # for a driver takes any number.
    attach: tuple[AttachNeed, ...] = ()
    # The KAI node pool whose nodes alone may take it, as (the pool label's key, the pool; "": the nodes without
    # the label); None: any node
    node_pool: NodePool | None = None

    @property
    def unconstrained(self) -> bool:
        """No selector, no affinity, no node pool, no volume that narrows its nodes: only taints and
        spec.unschedulable can turn a node away."""
        return (not self.node_selector and self.terms is None and not self.volumes and not self.pod_rules
                and self.node_pool is None)


_shape_encoder = msgspec.msgpack.Encoder(order="deterministic")
# The per-node token (`Shape.host_ports`) of pods waiting for a volume made in advance (`shape_of`).
STATIC_VOLUME_TOKEN = f"{HOST_PORT_PREFIX}{STATIC_VOLUME_PROTOCOL}/"


def shape_of(pod: PodInfo, volumes: tuple[VolumeReach, ...] = (), attach: tuple[AttachNeed, ...] = (),
             node_pool: NodePool | None = None) -> Shape:
    """The pod's shape; `volumes` and `attach`: what its claims ask now (`ClusterState.volume_needs(pod)`);
    `node_pool`: its KAI node pool (`ClusterState.node_pool_of(pod)`)."""
    spec = pod.obj.spec
    requests = tuple(sorted((name, amount) for name, amount in pod.requests.items()
                            if amount > 0 and not name.startswith(HOST_PORT_PREFIX)))
    ports: tuple[str, ...] = ()
    if len(requests) != len(pod.requests):  # something left out: a zero amount, or host ports
        ports = tuple(sorted(name for name in pod.requests if name.startswith(HOST_PORT_PREFIX)))
    selector = tuple(sorted(spec.node_selector.items()))
    tolerations = tuple(spec.tolerations)
    terms: tuple[NodeSelectorTerm, ...] | None = None
    affinity = spec.affinity
    if affinity is not None and affinity.node_affinity is not None:
        required = affinity.node_affinity.required_during_scheduling_ignored_during_execution
        if required is not None:
            terms = tuple(required.node_selector_terms)
    if any(reach.static for reach in volumes):
        # One pod per node of those a plan places that wait for a volume made in advance: each node's count
        # of such volumes (`static_room`) is for the pods placed before the plan, not among its own pods.
        ports = tuple(sorted({*ports, STATIC_VOLUME_TOKEN}))
    # The volumes join the key only when there are some, so the shapes of pods without claims keep their keys.
    parts: tuple[object, ...] = (requests, pod.priority, selector, tolerations, terms,
                                 *((volumes_key(volumes),) if volumes else ()), *((ports,) if ports else ()),
                                 *((("attach", attach),) if attach else ()),
                                 *((("pool", node_pool),) if node_pool is not None else ()))
    try:
        key = _shape_encoder.encode(parts)
    except OverflowError:  # a request past 2^64 milli-units (Kubernetes allows 2^63-1 units): spell the amounts out
        spelled = tuple((name, str(amount)) for name, amount in requests)
        key = _shape_encoder.encode((spelled, *parts[1:]))
    return Shape(key=key, requests=requests, priority=pod.priority, node_selector=selector,
                 tolerations=tolerations, terms=terms, volumes=volumes, host_ports=ports, attach=attach,
                 node_pool=node_pool)


def volumes_key(volumes: tuple[VolumeReach, ...]) -> tuple[object, ...]:
    """What a shape's key holds of its volumes' reach: a static reach by its digest."""
    return tuple(("static", reach.digest) if reach.static else reach for reach in volumes)


def shape_in(state: ClusterState, pod: PodInfo) -> Shape:
    """`shape_of(pod)` with what its claims ask on `state` now, and its node pool there."""
    needs = state.volume_needs(pod)
    return shape_of(pod, needs.reach, needs.attach, state.node_pool_of(pod))


def with_pod_rules(shape: Shape, rules: tuple[PodRule, ...], tokens: tuple[str, ...] = ()) -> Shape:
    """`shape` narrowed by inter-pod rules (`placement.pod_affinity.rules_for`) and holding the per-node
    tokens of its self-excluding terms (`self_exclusion`, kept as host ports are); itself when there are none."""
    if not rules and not tokens:
        return shape
    ports = tuple(sorted({*shape.host_ports, *tokens})) if tokens else shape.host_ports
    # Shape.key is one msgpack value; another appended keeps keys equal exactly when both parts are.
    key = shape.key + _shape_encoder.encode((rules, tokens))
    return msgspec.structs.replace(shape, key=key, pod_rules=rules, host_ports=ports)


def without_rules(shape: Shape, reasons: AbstractSet[str]) -> Shape:
    """`shape` without its inter-pod rules that turn nodes away for one of `reasons` (kube-scheduler's
    words): what it asks of a node once the pods that set those rules are gone. Only `admits` reads
    the result; its key is the narrowed shape's."""
    kept = tuple(rule for rule in shape.pod_rules if rule.reason not in reasons)
    if len(kept) == len(shape.pod_rules):
        return shape
    return msgspec.structs.replace(shape, pod_rules=kept)


# --------------------------------------------------------------------------- static filters


def tolerates(tolerations: Iterable[Toleration], taint: Taint) -> bool:
    for toleration in tolerations:
        if toleration.effect and toleration.effect != taint.effect:
            continue
        if toleration.operator == "Exists":
            if not toleration.key or toleration.key == taint.key:
                return True
        elif toleration.key == taint.key and toleration.value == taint.value:
            return True
    return False


def untolerated_taint(shape: Shape, taints: Iterable[Taint]) -> Taint | None:
    """The first NoSchedule / NoExecute taint the shape does not tolerate."""
    for taint in taints:
        if taint.effect in (NO_SCHEDULE, NO_EXECUTE) and not tolerates(shape.tolerations, taint):
            return taint
    return None


def prefer_no_schedule_count(shape: Shape, taints: Iterable[Taint]) -> int:
    """How many PreferNoSchedule taints the shape does not tolerate (a score: fewer is better)."""
    return sum(1 for taint in taints if taint.effect == PREFER_NO_SCHEDULE and not tolerates(shape.tolerations, taint))


# A cordoned node admits the pods that tolerate this taint (kube-scheduler's NodeUnschedulable filter: a
# pod tolerating it tolerates spec.unschedulable, as DaemonSet pods and node diagnostics do).
UNSCHEDULABLE_TAINT = Taint(key="node.kubernetes.io/unschedulable", effect=NO_SCHEDULE)


def in_node_pool(shape: Shape, node: NodeInfo) -> bool:
    """`node` is in the shape's KAI node pool (or the shape has none)."""
    if shape.node_pool is None:
        return True
    label, pool = shape.node_pool
    return node.labels.get(label) == pool if pool else label not in node.labels


def node_pool_refusal(node_pool: NodePool) -> str:
    """Why a node outside KAI node pool `node_pool` (its pool "": the default pool) takes none of its pods."""
    return f"node(s) were outside KAI node pool {node_pool[1] or KAI_DEFAULT_NODE_POOL}"


def node_affinity_matches(shape: Shape, node: NodeInfo) -> bool:
    """The shape's nodeSelector and required node affinity hold on `node` (kube-scheduler's
    GetRequiredNodeAffinity), and the node is in its KAI node pool: a KAI scheduler sees no other node."""
    labels = node.labels
    if shape.node_pool is not None and not in_node_pool(shape, node):
        return False
    if any(labels.get(key) != value for key, value in shape.node_selector):
        return False
    return shape.terms is None or any(term_matches(term, node.name, labels) for term in shape.terms)


def static_room(reach: VolumeReach, node: NodeInfo) -> int:
    """How many more claims of a static reach (state/volumes.py `static_reach`) the volumes made in advance
    that reach `node` can take: those pinned to it and those whose node terms it matches."""
    count = reach.by_name.get(node.name, 0) if reach.by_name else 0
    if reach.by_hostname:
        host = node.labels.get(HOSTNAME_LABEL)
        if host is not None:
            count += reach.by_hostname.get(host, 0)
    for terms in reach.elsewhere:
        if terms is None or any(term_matches(term, node.name, node.labels) for term in terms):
            count += 1
    return count


def admits(shape: Shape, node: NodeInfo) -> str:
    """"" when a pod of `shape` may go on `node` (capacity aside), else the reason it may not."""
    if shape.node_pool is not None and not in_node_pool(shape, node):  # first: its scheduler would not see the node
        return node_pool_refusal(shape.node_pool)
    if node.unschedulable and not tolerates(shape.tolerations, UNSCHEDULABLE_TAINT):
        return "node(s) were unschedulable"
    if node.taints:
        taint = untolerated_taint(shape, node.taints)
        if taint is not None:
            shown = f"{taint.key}={taint.value}" if taint.value else taint.key
            return f"node(s) had untolerated taint {{{shown}: {taint.effect}}}"
    if shape.unconstrained:
        return ""
    labels = node.labels
    if not node_affinity_matches(shape, node):
        return "node(s) didn't match Pod's node affinity/selector"
    for reach in shape.volumes:
        if reach.static:
            if static_room(reach, node) < 1:
                return reach.reason
            continue
        if reach.terms is not None and not any(term_matches(term, node.name, labels) for term in reach.terms):
            return reach.reason
        if reach.zones and zone_conflict(reach.zones, labels):
            return ZONE_CONFLICT
    for rule in shape.pod_rules:
        if rule.refuses(labels):
            return rule.reason
    return ""


# --------------------------------------------------------------------------- capacity


class Capacity:
    """What each node offers the pods being planned.

    Built once per planning call: it remembers the requests of `ignore_pods` per node (those pods
    count as gone) and which nominations are the planner's own (its gangs', or the lone pod's
    own: they never block it). It holds no copy of the state.
    """

    __slots__ = ("excluded_gangs", "ignore", "ignored_on", "own", "state")

    def __init__(self, state: ClusterState, excluded_gangs: AbstractSet[str] = frozenset(),
                 ignore_pods: AbstractSet[str] = frozenset(), own_pods: AbstractSet[str] = frozenset()) -> None:
        self.state = state
        self.excluded_gangs = excluded_gangs
        self.ignore = ignore_pods
        self.own = own_pods
        self.ignored_on: dict[str, Resources] = {}
        for key in ignore_pods:
            pod = state.pods.get(key)
            if pod is not None and pod.counted_on:
                freed = self.ignored_on.setdefault(pod.counted_on, {})
                for name, amount in pod.requests.items():
                    freed[name] = freed.get(name, 0) + amount

    def held_by_others(self, node: NodeInfo, priority: int) -> Resources:
        """Nominated capacity on `node` of priority >= `priority` held by other gangs' pods."""
        load: Resources = {}
        for pod in node.nominated.values():
            if (pod.priority >= priority and not pod.counted_on and pod.key not in self.ignore
                    and (not pod.gang or pod.gang not in self.excluded_gangs) and pod.key not in self.own):
                for name, amount in pod.requests.items():
                    load[name] = load.get(name, 0) + amount
        return load

    def attach_room(self, node: NodeInfo, priority: int) -> tuple[Mapping[str, int], AbstractSet[str]]:
        """The node's CSI attach room and attached volumes (`ClusterState.attach_room`) as a pod of `priority`
        sees them: the pods treated as gone left out, and the volumes of the nominations of priority >= it held
        by others counted in, as kube-scheduler filters with the nominated pods added."""
        room, attached = self.state.attach_room(node.name, self.ignore)
        if not node.nominated:
            return room, attached
        held = [pod for pod in node.nominated.values()
                if pod.obj.spec.volumes and pod.priority >= priority and not pod.counted_on
                and pod.key not in self.ignore and (not pod.gang or pod.gang not in self.excluded_gangs)
                and pod.key not in self.own]
        if not held:
            return room, attached
        room, attached = dict(room), set(attached)
        for pod in held:
            for unique, (driver, _) in csi_volumes(self.state.volumes, pod.obj).items():
                if unique not in attached:
                    attached.add(unique)
                    if driver in room:
                        room[driver] -= 1
        return room, attached

    def free(self, node: NodeInfo, priority: int) -> Resources:
        """The node's free resources as a pod of `priority` sees them."""
        free = dict(node.allocatable)
        for name, amount in node.used.items():
            free[name] = free.get(name, 0) - amount
        if node.nominated:
            for name, amount in self.held_by_others(node, priority).items():
                free[name] = free.get(name, 0) - amount
        freed = self.ignored_on.get(node.name)
        if freed is not None:
            for name, amount in freed.items():
                free[name] = free.get(name, 0) + amount
        if node.name in self.state.volumes.attach_limits:
            room, attached = self.attach_room(node, priority)
            for driver, left in room.items():
                free[ATTACH_PREFIX + driver] = left
            for unique in attached:
                free[ATTACHED_PREFIX + unique] = 1
        return free

    def slots(self, shape: Shape, node: NodeInfo) -> int:
        """How many pods of `shape` fit on `node` now (capacity only; see `admits`)."""
        allocatable, used = node.allocatable, node.used
        held = self.held_by_others(node, shape.priority) if node.nominated else None
        freed = self.ignored_on.get(node.name) if self.ignored_on else None
        best = UNLIMITED
        for name, amount in shape.requests:
            have = allocatable.get(name, 0) - used.get(name, 0)
            if held is not None:
                have -= held.get(name, 0)
            if freed is not None:
                have += freed.get(name, 0)
            if have < amount:
                return 0
            count = have // amount
            if count < best:
                best = count
        if shape.attach:
            room, attached = self.attach_room(node, shape.priority)
            count = attach_fit(shape.attach, room.get, attached.__contains__)[0]
            if count < best:
                best = count
                if not best:
                    return 0
        if shape.host_ports:
            return 0 if port_taken(shape, node, held, freed) else 1
        return best

    def short_of(self, shape: Shape, node: NodeInfo) -> str:
        """The first requested resource (or host port) the node cannot give one more pod of `shape` ("" if none)."""
        allocatable, used = node.allocatable, node.used
        held = self.held_by_others(node, shape.priority) if node.nominated else None
        freed = self.ignored_on.get(node.name) if self.ignored_on else None
        for name, amount in shape.requests:
            have = allocatable.get(name, 0) - used.get(name, 0)
            if held is not None:
                have -= held.get(name, 0)
            if freed is not None:
                have += freed.get(name, 0)
            if have < amount:
                return name
        if shape.attach:
            room, attached = self.attach_room(node, shape.priority)
            short = attach_fit(shape.attach, room.get, attached.__contains__)[1]
            if short:
                return short
        return port_taken(shape, node, held, freed) if shape.host_ports else ""


def attach_fit(needs: tuple[AttachNeed, ...], room: Callable[[str], int | None], attached: Callable[[str], bool]
               ) -> tuple[int, str]:
    """How many pods of these attach needs a node takes, and the free vector entry of the first driver it cannot
    take one more for ("" when none): `room(driver)` is how many more volumes of it the node may use (None:
    no limit), `attached(name)` whether a pod there uses that volume already. The first pod brings its own
    volumes and the shared ones not used there yet; the next ones only their own."""
    best = UNLIMITED
    for need in needs:
        have = room(need.driver)
        if have is None:
            continue
        first = need.own
        for unique in need.shared:
            if not attached(unique):
                first += 1
        if not first:
            continue  # nothing new for the driver there: kube-scheduler checks only the drivers of new volumes
        if have < first:
            return 0, ATTACH_PREFIX + need.driver
        if need.own:
            count = 1 + (have - first) // need.own
            if count < best:
                best = count
    return best, ""


def attach_fit_in(free: Mapping[str, int], needs: tuple[AttachNeed, ...]) -> tuple[int, str]:
    """`attach_fit` on a free vector (`Capacity.free`, less tentative commits)."""
    return attach_fit(needs, lambda driver: free.get(ATTACH_PREFIX + driver),
                      lambda unique: free.get(ATTACHED_PREFIX + unique, 0) > 0)


def port_taken(shape: Shape, node: NodeInfo, held: Resources | None = None, freed: Resources | None = None) -> str:
    """The first host port of `shape` that a pod on `node` holds, or a nomination there (`held`), unless
    the pods treated as gone there (`freed`) held it; "" when none is."""
    used = node.used
    for name in shape.host_ports:
        have = -used.get(name, 0)
        if held is not None:
            have -= held.get(name, 0)
        if freed is not None:
            have += freed.get(name, 0)
        if have < 0:
            return name
    return ""


def slots_in(free: Mapping[str, int], requests: Requests) -> int:
    """How many copies of `requests` (positive amounts, as `shape_of` makes them) fit in `free`:
    the one "how many fit" rule of placement, preemption and the loop's queueing hints."""
    best = UNLIMITED
    for name, amount in requests:
        have = free.get(name, 0)
        if have < amount:
            return 0
        count = have // amount
        if count < best:
            best = count
    return best


def shape_slots_in(free: Mapping[str, int], shape: Shape) -> int:
    """`slots_in(free, shape.requests)`, and at most one pod where a free vector (a node's allocatable -
    used - ..., as `Capacity.free` gives it, less tentative commits) leaves the shape's host ports free
    (none where a pod already holds one)."""
    count = slots_in(free, shape.requests)
    if shape.attach and count:
        count = min(count, attach_fit_in(free, shape.attach)[0])
    if shape.host_ports and count:
        return 0 if port_short_in(free, shape) else 1
    return count


def port_short_in(free: Mapping[str, int], shape: Shape) -> str:
    """The first host port of `shape` held in a node's free vector (below zero: a holder there), else ""."""
    for name in shape.host_ports:
        if free.get(name, 0) < 0:
            return name
    return ""


def slots_left(allocatable: Mapping[str, int], used: Mapping[str, int], requests: Requests) -> int:
    """`slots_in` what is left of `allocatable` once `used` is taken, without building that vector
    (the queueing hints ask it of every domain of a level at every parked unit's release)."""
    best = UNLIMITED
    for name, amount in requests:
        have = allocatable.get(name, 0) - used.get(name, 0)
        if have < amount:
            return 0
        count = have // amount
        if count < best:
            best = count
    return best


def take(free: Resources, shape: Shape, count: int) -> None:
    """Consume `count` pods of `shape` from an explicit free vector (their host ports too)."""
    for name, amount in shape.requests:
        free[name] = free.get(name, 0) - amount * count
    for name in shape.host_ports:
        free[name] = free.get(name, 0) - MILLI * count
    if shape.attach and count:
        for need in shape.attach:
            key = ATTACH_PREFIX + need.driver
            have = free.get(key)
            if have is None:
                continue  # the node sets no limit for the driver
            new = sum(1 for unique in need.shared if free.get(ATTACHED_PREFIX + unique, 0) <= 0)
            free[key] = have - new - need.own * count
            for unique in need.shared:
                free[ATTACHED_PREFIX + unique] = 1


def topology_index(pod: Pod) -> int | None:
    """The pod's `gang.scheduling.koordinator.sh/network-topology-index`, or None when absent or not an integer."""
    raw = pod.metadata.annotations.get(NETWORK_TOPOLOGY_INDEX_ANNOTATION)
    if raw is None:
        return None
    try:
        return int(raw.strip())
    except ValueError:
        return None
