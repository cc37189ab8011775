"""Chaos: hostile objects (issue 11's list) keep arriving; the daemon stays up, says what is wrong, schedules.

One devcluster and one event log for the whole case; each iteration starts `toposched run` on that
log (so it folds every hostile object of the iterations before, and relists them), adds a batch:

- pods asking for 1e18 GPUs, 20Pi of memory, a 40-digit cpu count (alone, and as one member of a gang);
- a HyperNode whose `regexMatch` is catastrophic for a backtracking engine (`^(a+)+$`), and a node
  named 40 `a`s then `-b...` for it to chew on;
- two HyperNodes in a cycle;
- a pod with a 1 MB annotation toposched does not read (it must be scheduled, and not logged), and one
  with a 1.1 MB annotation it does read (over the log's record cap);
- malformed gang annotations (a negative `min-available`, a `groups` annotation that is not JSON; both
  are read leniently, the Warning says how);
- a pod asking for "eight" GPUs, and one whose priority is "high" (stored unchecked: a server that
  does not validate, an old or aggregated one, may hand the daemon anything);

and checks that every bad object gets a Warning Event, nothing hostile is bound, no record of the two
pods with 1 MB annotations takes more than a few KB in the log, a canary binds, and the daemon is
still running. It then kills it
with -9 (odd iterations) or SIGTERM (even ones), and `replay --verify` of the log must be clean.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from devcluster.cluster import DevCluster
from events.log import EventLog
from events.model import PodUpserted, encode_event
from events.objects import GANG_GROUPS_ANNOTATION, GANG_MIN_AVAILABLE_ANNOTATION, GANG_NAME_ANNOTATION
from tests.chaos.harness import Tally, canary_binds, iterate, retire, verified
from tests.integration.daemon.harness import NAMESPACE, bound_count, gang, nodes, pod, wait_until
from tests.integration.daemon.processes import config_file, daemon_process
from tests.integration.daemon.test_hostile_objects import HOSTILE, admitted_unchecked, with_request

pytestmark = pytest.mark.chaos

HN = "topology.volcano.sh/v1alpha1"
WARNED_WITHIN = 20.0
BIG = 1_000_000
RECORD_BYTES = 8192  # what a pod's record may take in the log, its 1 MB annotation dropped or cut to its core


class Batch:
    """One iteration's hostile objects: what must be warned about, what must never be bound."""

    def __init__(self, index: int) -> None:
        suffix = f"-{index}"
        self.objects: list[dict[str, Any]] = []
        self.warned: dict[tuple[str, str], str] = {}  # (kind, name) -> words its Warning Event must hold
        self.never_bound: list[str] = []
        self.unchecked: set[str] = set()  # names stored as written (devcluster's validation skipped)
        for name, (resource, quantity) in HOSTILE.items():
            lone = f"{name}{suffix}"
            members = gang(f"gang-{name}{suffix}", 2)
            with_request(members[2], resource, quantity)
            self.objects += [with_request(pod(lone), resource, quantity), *members]
            self.warned[("Pod", lone)] = f"Insufficient {resource}"
            self.warned[("PodGroup", f"gang-{name}{suffix}")] = f"Insufficient {resource}"
            self.never_bound += [lone, *(m["metadata"]["name"] for m in members[1:])]
        self.chewed = f"{'a' * 40}-b{index}"
        chewy = nodes(1)[0]
        chewy["metadata"]["name"] = self.chewed
        self.objects += [chewy, hyper_node(f"backtrack{suffix}", 1, {"regexMatch": {"pattern": "^(a+)+$"}})]
        self.objects += [hyper_node(f"cycle-a{suffix}", 2, {"exactMatch": {"name": f"cycle-b{suffix}"}}, "HyperNode"),
                         hyper_node(f"cycle-b{suffix}", 2, {"exactMatch": {"name": f"cycle-a{suffix}"}}, "HyperNode")]
        self.warned[("HyperNode", f"cycle-a{suffix}")] = ""
        self.warned[("HyperNode", f"cycle-b{suffix}")] = ""
        self.annotated = f"annotated{suffix}"
        annotated = pod(self.annotated, 0)
        annotated["metadata"]["annotations"] = {"example.com/blob": "x" * BIG}
        oversized = pod(f"oversized{suffix}", 1)
        oversized["metadata"]["annotations"] = {GANG_GROUPS_ANNOTATION: json.dumps(["x" * (BIG + BIG // 10)])}
        self.objects += [annotated, oversized]
        self.warned[("Pod", f"oversized{suffix}")] = ""
        self.never_bound.append(f"oversized{suffix}")
        negative = pod(f"negative-min{suffix}", 1)
        negative["metadata"]["annotations"] = {GANG_NAME_ANNOTATION: f"negative{suffix}",
                                               GANG_MIN_AVAILABLE_ANNOTATION: "-3"}
        not_json = pod(f"groups-not-json{suffix}", 1, gang_name=f"not-json{suffix}")
        not_json["metadata"]["annotations"] = {GANG_GROUPS_ANNOTATION: "[not json"}
        group = {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
                 "metadata": {"name": f"not-json{suffix}", "namespace": NAMESPACE,
                              "annotations": {GANG_GROUPS_ANNOTATION: "[not json"}},
                 "spec": {"minMember": 1}}
        self.objects += [negative, group, not_json]
        # Both are read leniently, as the Warning says (minMember 1; the gang on its own): they may bind.
        self.warned[("Pod", f"negative-min{suffix}")] = "min-available"
        self.warned[("PodGroup", f"not-json{suffix}")] = GANG_GROUPS_ANNOTATION
        eight = with_request(pod(f"eight-gpus{suffix}"), "nvidia.com/gpu", "eight")
        high = pod(f"priority-high{suffix}", 1)
        high["spec"]["priority"] = "high"
        self.objects += [eight, high]
        self.unchecked |= {f"eight-gpus{suffix}", f"priority-high{suffix}"}
        self.warned[("Pod", f"eight-gpus{suffix}")] = "'eight' is not"
        self.warned[("Pod", f"priority-high{suffix}")] = "spec.priority"
        self.never_bound += [f"eight-gpus{suffix}", f"priority-high{suffix}"]


def hyper_node(name: str, tier: int, selector: dict[str, Any], member: str = "Node") -> dict[str, Any]:
    return {"apiVersion": HN, "kind": "HyperNode", "metadata": {"name": name},
            "spec": {"tier": tier, "members": [{"type": member, "selector": selector}]}}


def not_warned(cluster: DevCluster, batch: Batch) -> list[str]:
    """The objects of `batch` still without the Warning Event they must get."""
    warnings = [e for e in cluster.store.list("events", NAMESPACE) if e["type"] == "Warning"]
    return [f"{kind} {name}" for (kind, name), words in batch.warned.items()
            if not any(e["involvedObject"]["kind"] == kind and e["involvedObject"]["name"] == name
                       and words in e["message"] for e in warnings)]


def largest_record(log_dir: Path, pods: set[str]) -> int:
    """The largest record (its encoded bytes) the log holds about these pods ("namespace/name")."""
    with EventLog.open_readonly(log_dir) as log:
        return max((len(encode_event(e)) for e in log.read() if isinstance(e, PodUpserted)
                    and f"{e.pod.metadata.namespace}/{e.pod.metadata.name}" in pods), default=0)


async def test_hostile_objects_never_stop_the_daemon_and_each_is_named_in_a_warning(
        tmp_path: Path, iterations: int, tally: Tally, monkeypatch: pytest.MonkeyPatch) -> None:
    async with DevCluster() as cluster, aiohttp.ClientSession() as session:
        cluster.load_objects(nodes(8))
        config = config_file(tmp_path / "config.yaml", fsync="always")
        batches = [Batch(index) for index in range(iterations)]
        admitted_unchecked(monkeypatch, set().union(*(batch.unchecked for batch in batches)))

        async def one_batch(directory: Path, index: int) -> None:
            batch = batches[index]
            async with daemon_process(cluster, directory, "toposched", election=False, config=config,
                                      log_dir=tmp_path / "log") as daemon:
                await daemon.wait_ready(session, "leader")
                cluster.load_objects(batch.objects)
                await wait_until(lambda: not not_warned(cluster, batch), within=WARNED_WITHIN,
                                 what=f"Warning Events on {not_warned(cluster, batch)}")
                await wait_until(lambda: bound_count(cluster, [batch.annotated]) == 1, within=WARNED_WITHIN,
                                 what="the pod with a 1 MB annotation bound")
                assert bound_count(cluster, batch.never_bound) == 0
                big = {f"{NAMESPACE}/{batch.annotated}", f"{NAMESPACE}/oversized-{index}"}
                largest = largest_record(daemon.log_dir, big)
                assert 0 < largest < RECORD_BYTES, f"a record of {largest} bytes for the pods with 1 MB annotations"
                retire(cluster, await canary_binds(cluster, f"canary-{index}", [daemon]))
                if index % 2:
                    daemon.kill()
                    await daemon.process.wait()
                else:
                    assert await daemon.stop() == 0
            await verified(daemon.log_dir)

        await iterate(tally, iterations, tmp_path, one_batch)
