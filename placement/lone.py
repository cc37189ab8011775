"""`plan_pod`: where a pod without a gang goes.

A lone pod takes the node that keeps the network's domains least fragmented: among the nodes it
fits on, the one whose domains are already the busiest, weighing lower layers more (a tier-weighted
bin-pack: the node itself counts 2^(L+1), its lowest domain 2^L, ... the layer under the root 2;
busyness is the share of the pod's primary resource in use). So small pods fill gaps in busy
NVLink domains and blocks instead of breaking into the empty ones that the next gang needs. Each
untolerated PreferNoSchedule taint costs more than any busyness can win. Ties go to the node name.

A pod nominated to a node (room preemption freed for it) goes there when it fits. A pod that
names a gang is planned with its gang (`plan_gang`).

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet

from placement.fit import Capacity, prefer_no_schedule_count, shape_of
from placement.gang import plan_gang
from placement.gather import Solver, primary_resource
from placement.members import domain_label, where
from placement.plan import CAPACITY, INVALID, POD_FIT, Assignment, GangPlan, Unschedulable
from state.cluster import ClusterState
from state.resources import fits
from state.topology import Domain

TAINT_PENALTY = 1 << 20


def plan_pod(state: ClusterState, pod: str, *,
             ignore_pods: AbstractSet[str] = frozenset()) -> GangPlan | Unschedulable:
    info = state.pods.get(pod)
    if info is None:
        return Unschedulable(gangs=(), constraint=INVALID, reason=f"pod {pod}: not found")
    if info.gang:
        return plan_gang(state, info.gang, ignore_pods=ignore_pods)
    shape = shape_of(info)
    solver = Solver(state, Capacity(state, frozenset(), ignore_pods, frozenset({pod})))
    tree = state.topology
    primary = primary_resource(dict(shape.requests))
    node_weight = float(1 << (len(tree.levels) + 1))
    busy: dict[int, float] = {}
    path_scores: dict[int, float] = {}

    def busyness(domain: Domain) -> float:
        found = busy.get(domain.id)
        if found is None:
            total = domain.allocatable.get(primary, 0)
            found = min(max(domain.used.get(primary, 0) / total, 0.0), 1.0) if total > 0 else 0.0
            busy[domain.id] = found
        return found

    def path_score(domain: Domain) -> float:
        """Weighted busyness of the domain and its ancestors below the root."""
        if domain.parent is None:
            return 0.0
        found = path_scores.get(domain.id)
        if found is None:
            found = path_score(domain.parent) + busyness(domain) * (1 << domain.level)
            path_scores[domain.id] = found
        return found

    nominated = info.nominated_on
    if nominated and solver.node_slots(shape, nominated) > 0:
        home = tree.domain_of(nominated) or tree.root
        return GangPlan(gangs=(), assignments=(Assignment(pod=pod, node=nominated),), domain=domain_label(home),
                        level=home.layer, explanation=f"pod {pod}: node {nominated}, nominated for it, has room")
    best_node = ""
    best_score = 0.0
    nodes = state.nodes
    for domain in tree.domains:
        if not domain.direct_nodes:
            continue
        base = path_score(domain)
        for name in domain.direct_nodes:
            if solver.node_slots(shape, name) <= 0:
                continue
            node = nodes[name]
            total = node.allocatable.get(primary, 0)
            score = base + (min(node.used.get(primary, 0) / total, 1.0) * node_weight if total > 0 else 0.0)
            if node.taints:
                score -= TAINT_PENALTY * prefer_no_schedule_count(shape, node.taints)
            if not best_node or score > best_score or (score == best_score and name < best_node):
                best_node, best_score = name, score
    if best_node:
        home = tree.domain_of(best_node) or tree.root
        share = busyness(home) if home.parent is not None else 0.0
        return GangPlan(
            gangs=(), assignments=(Assignment(pod=pod, node=best_node),), domain=domain_label(home),
            level=home.layer,
            explanation=(f"pod {pod}: node {best_node} in {where(home)}: busiest domains with room "
                         f"(tier-weighted bin-pack; {share:.0%} of {primary} in use there)"))
    counts = solver.rejections(shape, state.nodes)
    detail = ", ".join(f"{count} {why}" for why, count in sorted(counts.items(), key=lambda i: (-i[1], i[0])))
    requests = dict(shape.requests)
    never = not any(not solver.reason(shape, name) and fits(requests, state.nodes[name].allocatable)
                    for name in state.nodes)
    return Unschedulable(
        gangs=(), constraint=POD_FIT if never else CAPACITY, needed=1, fit=0,
        reason=f"pod {pod}: 0/{len(state.nodes)} nodes are available" + (f": {detail}" if detail else ""))
