"""Required pod affinity and anti-affinity: pods go where kube-scheduler's InterPodAffinity filter lets
them, lone or as a gang, and a plan that would break a term is not made."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from events.builders import bound, group_event, node, node_event, pod, pod_event, pod_group
from events.model import NominationCleared
from events.objects import Affinity, Pod
from placement import plan_gang, plan_pod
from placement.plan import POD_AFFINITY
from placement.pod_affinity import AFFINITY, ANTI_AFFINITY, EXISTING_ANTI_AFFINITY
from state.cluster import ClusterState
from state.pod_constraints import MAX_REQUIRED_TERMS
from tests.unit.placement.builders import apply_plan, block_of, fabric, nodes_of, nominate, planned, refused

HOST = "kubernetes.io/hostname"
BLOCK = "network.topology.nvidia.com/block"
NVLINK = "network.topology.nvidia.com/accelerator"


def term(key: str = HOST, **selector: Any) -> dict[str, Any]:
    return {"labelSelector": selector, "topologyKey": key}


def with_affinity(obj: Pod, *, together: Sequence[dict[str, Any]] = (), apart: Sequence[dict[str, Any]] = ()) -> Pod:
    raw: dict[str, Any] = {}
    if together:
        raw["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": list(together)}
    if apart:
        raw["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": list(apart)}
    affinity = msgspec.convert(raw, Affinity)
    return msgspec.structs.replace(obj, spec=msgspec.structs.replace(obj.spec, affinity=affinity))


def add(state: ClusterState, obj: Pod, node: str = "") -> str:
    state.apply(pod_event(bound(obj, node) if node else obj))
    return f"{obj.metadata.namespace}/{obj.metadata.name}"


def only_node(state: ClusterState, key: str) -> str:
    return planned(plan_pod(state, key)).assignments[0].node


# --------------------------------------------------------------------------- lone pods


def test_a_pod_keeps_off_the_host_of_a_pod_its_anti_affinity_selects_though_that_host_is_the_busiest() -> None:
    state = fabric(blocks=1, nvlinks=1, nodes=2)
    add(state, pod("web-0", gpus=1, labels={"app": "web"}), "n-s0b0a0-0")
    plain = add(state, pod("plain", gpus=1))
    assert only_node(state, plain) == "n-s0b0a0-0"  # lone pods go to the busiest node that fits
    apart = add(state, with_affinity(pod("web-1", gpus=1, labels={"app": "web"}),
                                     apart=[term(matchLabels={"app": "web"})]))
    assert only_node(state, apart) == "n-s0b0a0-1"


def test_a_pod_an_existing_pods_anti_affinity_selects_keeps_off_its_block_and_says_why_when_nowhere_is_left() -> None:
    state = fabric(blocks=2, nvlinks=1, nodes=1)
    add(state, with_affinity(pod("db", gpus=1, labels={"app": "db"}), apart=[term(BLOCK, matchLabels={"app": "web"})]),
        "n-s0b0a0-0")
    web = add(state, pod("web", gpus=1, labels={"app": "web"}))
    assert block_of(only_node(state, web)) == "s0b1"
    add(state, pod("filler", gpus=8), "n-s0b1a0-0")
    failure = refused(plan_pod(state, web))
    assert EXISTING_ANTI_AFFINITY in failure.reason


def test_a_pod_with_affinity_joins_the_block_of_the_pods_it_selects_and_waits_when_they_run_nowhere() -> None:
    state = fabric(blocks=2, nvlinks=1, nodes=2)
    add(state, pod("busy", gpus=6), "n-s0b0a0-0")  # block s0b0 is the busier one
    cache = add(state, with_affinity(pod("reader", gpus=1), together=[term(BLOCK, matchLabels={"app": "cache"})]))
    failure = refused(plan_pod(state, cache))
    assert AFFINITY in failure.reason  # no cache pod runs, and it is not one itself
    add(state, pod("cache-0", gpus=1, labels={"app": "cache"}), "n-s0b1a0-1")
    assert block_of(only_node(state, cache)) == "s0b1"


def test_the_first_pod_of_a_series_with_affinity_to_itself_goes_anywhere_with_the_key() -> None:
    state = fabric(blocks=2, nvlinks=1, nodes=1)
    first = add(state, with_affinity(pod("cache-0", gpus=1, labels={"app": "cache"}),
                                     together=[term(BLOCK, matchLabels={"app": "cache"})]))
    node = only_node(state, first)
    add(state, bound(state.pods[first].obj, node))
    second = add(state, with_affinity(pod("cache-1", gpus=1, labels={"app": "cache"}),
                                      together=[term(BLOCK, matchLabels={"app": "cache"})]))
    assert block_of(only_node(state, second)) == block_of(node)


def test_a_term_looks_in_its_own_namespace_unless_it_names_others() -> None:
    state = fabric(blocks=1, nvlinks=1, nodes=2)
    add(state, pod("web-0", namespace="shop", gpus=1, labels={"app": "web"}), "n-s0b0a0-0")
    mine = add(state, with_affinity(pod("mine", gpus=1), apart=[term(matchLabels={"app": "web"})]))
    assert only_node(state, mine) == "n-s0b0a0-0"  # the web pod is in another namespace
    theirs = add(state, with_affinity(pod("theirs", gpus=1), apart=[
        {**term(matchLabels={"app": "web"}), "namespaces": ["shop"]}]))
    assert only_node(state, theirs) == "n-s0b0a0-1"
    everywhere = add(state, with_affinity(pod("everywhere", gpus=1), apart=[
        {**term(matchLabels={"app": "web"}), "namespaceSelector": {}}]))
    assert only_node(state, everywhere) == "n-s0b0a0-1"


def test_match_label_keys_narrow_a_term_to_the_pods_sharing_the_pods_value() -> None:
    state = fabric(blocks=1, nvlinks=1, nodes=2)
    add(state, pod("old", gpus=1, labels={"app": "web", "pod-template-hash": "v1"}), "n-s0b0a0-0")
    rolled = {**term(matchLabels={"app": "web"}), "matchLabelKeys": ["pod-template-hash"]}
    new = add(state, with_affinity(pod("new", gpus=1, labels={"app": "web", "pod-template-hash": "v2"}),
                                   apart=[rolled]))
    assert only_node(state, new) == "n-s0b0a0-0"  # the old revision's pod is not selected
    same = add(state, with_affinity(pod("same", gpus=1, labels={"app": "web", "pod-template-hash": "v1"}),
                                    apart=[rolled]))
    assert only_node(state, same) == "n-s0b0a0-1"


def test_a_nil_selector_selects_no_pod() -> None:
    state = fabric(blocks=1, nvlinks=1, nodes=2)
    add(state, pod("web-0", gpus=1, labels={"app": "web"}), "n-s0b0a0-0")
    loose = add(state, with_affinity(pod("loose", gpus=1), apart=[{"topologyKey": HOST}]))
    assert only_node(state, loose) == "n-s0b0a0-0"


# --------------------------------------------------------------------------- nominated pods


def test_a_pod_keeps_off_the_node_nominated_for_a_higher_priority_pod_its_anti_affinity_selects() -> None:
    # kube-scheduler filters a pod with the nominated pods of priority >= its own added to their nodes: a
    # pod placed beside a preemptor waiting for its victims to leave would turn the preemptor away later.
    state = fabric(blocks=1, nvlinks=1, nodes=2)
    add(state, pod("busy", gpus=2), "n-s0b0a0-0")  # the busier node, where lone pods go first
    preemptor = add(state, pod("db", gpus=1, labels={"app": "db"}, priority=100))
    nominate(state, preemptor, "n-s0b0a0-0")
    low = add(state, with_affinity(pod("web", gpus=1, priority=10), apart=[term(matchLabels={"app": "db"})]))
    assert only_node(state, low) == "n-s0b0a0-1"
    # one of higher priority than the preemptor does not see its nomination, as in kube-scheduler
    high = add(state, with_affinity(pod("urgent", gpus=1, priority=1000), apart=[term(matchLabels={"app": "db"})]))
    assert only_node(state, high) == "n-s0b0a0-0"


def test_a_nominated_pods_anti_affinity_keeps_lower_priority_pods_it_selects_off_its_block() -> None:
    state = fabric(blocks=2, nvlinks=1, nodes=1)
    add(state, pod("busy", gpus=2), "n-s0b0a0-0")
    preemptor = add(state, with_affinity(pod("db", gpus=1, labels={"app": "db"}, priority=100),
                                         apart=[term(BLOCK, matchLabels={"app": "web"})]))
    nominate(state, preemptor, "n-s0b0a0-0")
    web = add(state, pod("web", gpus=1, labels={"app": "web"}, priority=10))
    assert block_of(only_node(state, web)) == "s0b1"
    add(state, pod("filler", gpus=8), "n-s0b1a0-0")
    assert EXISTING_ANTI_AFFINITY in refused(plan_pod(state, web)).reason
    # once the preemptor gives its nomination up, the block is open again
    state.apply(NominationCleared(pod=preemptor, reason="gave up"))
    assert block_of(only_node(state, web)) == "s0b0"


def test_a_gang_is_not_kept_off_the_nodes_nominated_for_its_own_pods() -> None:
    state = fabric(blocks=1, nvlinks=1, nodes=2)
    keys = gang_pods(state, "vip", 2, gpus=8, apart=[term(matchLabels={"job": "vip"})])
    for key in keys:
        state.pods[key].priority = 100
    nominate(state, keys[0], "n-s0b0a0-0")
    nominate(state, keys[1], "n-s0b0a0-1")
    plan = planned(plan_gang(state, "default/vip"))
    assert sorted(nodes_of(plan).values()) == ["n-s0b0a0-0", "n-s0b0a0-1"]


def test_a_series_that_has_begun_only_as_a_nomination_is_joined_where_it_is_nominated() -> None:
    # No cache pod runs, so the first of the series could go anywhere; but one is nominated in block s0b1,
    # and kube-scheduler's run with it added lets the pod only into that block.
    state = fabric(blocks=2, nvlinks=1, nodes=1)
    add(state, pod("busy", gpus=2), "n-s0b0a0-0")
    series = [term(BLOCK, matchLabels={"app": "cache"})]
    preemptor = add(state, with_affinity(pod("cache-0", gpus=1, labels={"app": "cache"}, priority=100),
                                         together=series))
    nominate(state, preemptor, "n-s0b1a0-0")
    follower = add(state, with_affinity(pod("cache-1", gpus=1, labels={"app": "cache"}, priority=10),
                                        together=series))
    assert block_of(only_node(state, follower)) == "s0b1"
    # a placed member of the series decides, as before: the nomination does not satisfy the affinity alone
    add(state, pod("cache-2", gpus=1, labels={"app": "cache"}), "n-s0b0a0-0")
    assert block_of(only_node(state, follower)) == "s0b0"


# --------------------------------------------------------------------------- gangs


def gang_pods(state: ClusterState, name: str, size: int, *, gpus: int, together: Sequence[dict[str, Any]] = (),
              apart: Sequence[dict[str, Any]] = (), labels: dict[str, str] | None = None) -> list[str]:
    state.apply(group_event(pod_group(name, min_member=size)))
    return [add(state, with_affinity(pod(f"{name}-{i}", gpus=gpus, gang=name, labels=labels or {"job": name}),
                                     together=together, apart=apart))
            for i in range(size)]


def test_a_gang_whose_pods_exclude_one_another_per_host_gets_one_node_each() -> None:
    state = fabric(blocks=1, nvlinks=1, nodes=4)
    keys = gang_pods(state, "spread", 4, gpus=1, apart=[term(matchLabels={"job": "spread"})])
    placed = nodes_of(planned(plan_gang(state, "default/spread")))
    assert sorted(placed) == sorted(keys) and len(set(placed.values())) == 4


def test_a_gang_whose_pods_exclude_one_another_per_host_waits_when_too_few_nodes_exist() -> None:
    state = fabric(blocks=1, nvlinks=1, nodes=2)
    gang_pods(state, "spread", 3, gpus=1, apart=[term(matchLabels={"job": "spread"})])
    failure = refused(plan_gang(state, "default/spread"))
    assert (failure.fit, failure.needed) == (2, 3)  # one node each: 2 nodes hold 2 of the 3


def test_a_gang_with_affinity_to_itself_per_block_is_gathered_in_one_block() -> None:
    state = fabric(blocks=2, nvlinks=2, nodes=2)
    keys = gang_pods(state, "near", 4, gpus=8, together=[term(BLOCK, matchLabels={"job": "near"})])
    placed = nodes_of(planned(plan_gang(state, "default/near")))
    assert len({block_of(node) for node in placed.values()}) == 1 and len(placed) == len(keys)
    state2 = fabric(blocks=2, nvlinks=2, nodes=2)
    gang_pods(state2, "near", 5, gpus=8, together=[term(BLOCK, matchLabels={"job": "near"})])
    failure = refused(plan_gang(state2, "default/near"))  # no block holds 5 nodes' worth
    assert "required podAffinity (topologyKey network.topology.nvidia.com/block)" in failure.reason


def test_jobset_exclusive_placement_puts_each_job_in_a_block_of_its_own() -> None:
    # JobSet's alpha.jobset.sigs.k8s.io/exclusive-topology: each pod gets podAffinity to its own job and
    # podAntiAffinity to every other job, both over the topology key.
    state = fabric(blocks=3, nvlinks=1, nodes=2)

    def job(name: str) -> list[str]:
        label = "jobset.sigs.k8s.io/job-key"
        return gang_pods(state, name, 2, gpus=1, labels={label: name},
                         together=[term(BLOCK, matchExpressions=[{"key": label, "operator": "In", "values": [name]}])],
                         apart=[term(BLOCK, matchExpressions=[{"key": label, "operator": "Exists"},
                                                              {"key": label, "operator": "NotIn", "values": [name]}])])

    blocks = []
    for name in ("job-a", "job-b", "job-c"):
        job(name)
        plan = planned(plan_gang(state, f"default/{name}"))
        apply_plan(state, plan)
        used = {block_of(node) for node in nodes_of(plan).values()}
        assert len(used) == 1  # 2 GPUs: one node would hold the job, any block would hold all three
        blocks.append(used.pop())
    assert len(set(blocks)) == 3
    job("job-d")
    failure = refused(plan_gang(state, "default/job-d"))
    assert ANTI_AFFINITY in failure.reason or EXISTING_ANTI_AFFINITY in failure.reason


def test_a_plan_that_would_put_two_pods_of_a_gang_in_one_domain_their_anti_affinity_forbids_is_not_made() -> None:
    # One pod per NVLink domain among the gang's own pods (a key other than the host): the planner packs a
    # gang tightly and cannot spread it per domain, so the check of the whole plan refuses it, with the
    # reason, rather than binding pods the term keeps apart.
    state = fabric(blocks=1, nvlinks=2, nodes=2)
    gang_pods(state, "apart", 2, gpus=8, apart=[term(NVLINK, matchLabels={"job": "apart"})])
    failure = refused(plan_gang(state, "default/apart"))
    assert failure.constraint == POD_AFFINITY
    assert failure.reason.startswith(
        "gang default/apart: pod default/apart-0: required podAntiAffinity (topologyKey "
        "network.topology.nvidia.com/accelerator): the plan would put it in network.topology.nvidia.com/accelerator="
        "s0b0a0 with another of its pods that the term selects")


def test_a_pod_with_thousands_of_terms_is_placed_by_the_first_64_and_told_about_the_rest() -> None:
    # The API server bounds only the object's size: 5,000 terms each cost every placement near the pod.
    state = fabric(blocks=1, nvlinks=1, nodes=2)
    add(state, pod("web-0", gpus=1, labels={"app": "web"}), "n-s0b0a0-0")
    add(state, pod("db-0", gpus=1, labels={"app": "db"}), "n-s0b0a0-1")
    many = [term(matchLabels={"app": "web"})] * MAX_REQUIRED_TERMS + [term(matchLabels={"app": "db"})] * 4936
    key = add(state, with_affinity(pod("many", gpus=1), apart=many))
    problems = state.problems_of("Pod", key)
    assert [(p.field, p.message) for p in problems] == [(
        "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution",
        "5000 required terms: toposched places by the first 64 only (the rest are not considered)")]
    assert only_node(state, key) == "n-s0b0a0-1"  # kept off web-0's host; db-0's terms came too late


def test_a_gang_with_affinity_to_itself_per_gpu_clique_is_gathered_in_one_nvlink_clique() -> None:
    # Multi-Node NVLink (GB200): the GPU Operator labels each node with its NVLink clique, and a chart
    # keeps a job's pods in one with required podAffinity over that label.
    # Topograph leaves its accelerator label unset where the clique label is (its AcceleratorLayer reads either).
    state = ClusterState()
    for index in range(8):
        state.apply(node_event(node(f"gb-{index}", block="b0", labels={"nvidia.com/gpu.clique": f"a.{index // 4}"})))
    state.apply(pod_event(bound(pod("busy", gpus=8), "gb-0")))  # clique a.0 is busier: packing prefers it
    keys = gang_pods(state, "nvl", 4, gpus=4, together=[term("nvidia.com/gpu.clique", matchLabels={"job": "nvl"})])
    placed = nodes_of(planned(plan_gang(state, "default/nvl")))
    assert sorted(placed) == sorted(keys)
    assert {state.nodes[n].labels["nvidia.com/gpu.clique"] for n in placed.values()} == {"a.0"}
    many = gang_pods(state, "wide", 10, gpus=4, together=[term("nvidia.com/gpu.clique", matchLabels={"job": "wide"})])
    failure = refused(plan_gang(state, "default/wide"))  # 20 GPUs' worth: no clique holds it
    assert "required podAffinity (topologyKey nvidia.com/gpu.clique)" in failure.reason and many


def test_two_pods_of_a_gang_that_each_need_the_other_and_not_themselves_are_not_placed() -> None:
    # kube-scheduler places one at a time: the first finds no pod its terms select, and does not select
    # itself, so neither can go first.
    state = fabric(blocks=1, nvlinks=1, nodes=2)
    state.apply(group_event(pod_group("pair", min_member=2)))
    add(state, with_affinity(pod("pair-0", gpus=1, gang="pair", labels={"role": "a"}),
                             together=[term(matchLabels={"role": "b"})]))
    add(state, with_affinity(pod("pair-1", gpus=1, gang="pair", labels={"role": "b"}),
                             together=[term(matchLabels={"role": "a"})]))
    failure = refused(plan_gang(state, "default/pair"))
    assert failure.constraint == POD_AFFINITY
    assert "each of the plan's pods they select needs another placed before it" in failure.reason
