"""What every chaos case shares: iterations with a tally, the canary gang, the log's verification.

A case breaks something on purpose (a paused leader, a kill -9, dropped watches, hostile objects)
against real `toposched run` processes on devcluster (`tests/integration/daemon/processes.py`), then
checks what must hold. `iterate` runs it `iterations` times, each iteration in its own directory
(the daemons' output and logs stay there) and bounded in time; it counts the iterations attempted
and survived in the case's `Tally` (printed at the end of the session, `tests/chaos/conftest.py`),
keeps going after one breaks, and fails the test at the end if any did, naming each.

What every iteration checks last: `canary_binds`, a gang of `CANARY_SIZE` pods of 8 GPUs (minMember
`CANARY_SIZE`) created after the damage, must be bound whole within `CANARY_SECONDS`, each pod by
exactly one accepted binding, with every daemon still running; and `verified`, `toposched replay
LOG --verify` of each daemon's log exits 0 (the same decisions re-decided, every invariant kept:
capacity, one node per pod, gangs at minMember; `state/invariants.py`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import msgspec

from devcluster.cluster import DevCluster
from tests.integration.daemon.harness import NAMESPACE, bound_count, gang, pod_names, wait_until
from tests.integration.daemon.processes import DaemonProcess, replay_verify, requests_of

ITERATION_SECONDS = 120.0
CANARY_SIZE = 4
CANARY_SECONDS = 20.0
_SHOWN = 400  # characters of a failure kept in the summary


class Tally(msgspec.Struct):
    """One case's count: iterations attempted, survived, and what broke in the others."""

    case: str
    attempted: int = 0
    survived: int = 0
    failures: list[str] = msgspec.field(default_factory=list)


async def iterate(tally: Tally, iterations: int, directory: Path,
                  case: Callable[[Path, int], Awaitable[None]]) -> None:
    """Run `case(directory/iteration-N, N)` for N in range(iterations); fail at the end if any broke."""
    for index in range(iterations):
        where = directory / f"iteration-{index}"
        where.mkdir(parents=True, exist_ok=True)
        tally.attempted += 1
        try:
            with anyio.fail_after(ITERATION_SECONDS):
                await case(where, index)
        except Exception as error:  # one broken iteration: counted and named, the others still run
            text = " ".join(f"{type(error).__name__}: {error}".split())
            tally.failures.append(f"iteration {index}: {text[:_SHOWN]} (outputs in {where})")
        else:
            tally.survived += 1
    assert not tally.failures, f"{tally.case}: {tally.survived} of {tally.attempted} iterations survived:\n" + \
        "\n".join(tally.failures)


def accepted_bindings(cluster: DevCluster, names: Sequence[str]) -> dict[str, int]:
    """Per pod, how many of its binding requests the API server accepted."""
    counts = dict.fromkeys(names, 0)
    for record in cluster.audit.since():
        if record.method == "POST" and record.path.endswith("/binding") and 200 <= record.status < 300:
            name = record.path.rsplit("/", 2)[-2]
            if name in counts:
                counts[name] += 1
    return counts


async def canary_binds(cluster: DevCluster, name: str, running: Sequence[DaemonProcess]) -> list[dict[str, Any]]:
    """A canary gang, created now, is bound whole within `CANARY_SECONDS`, each pod once; every daemon of
    `running` is still up. Returns its manifests (for `retire`)."""
    canary = gang(name, CANARY_SIZE)
    cluster.load_objects(canary)
    names = pod_names(canary)
    try:
        await wait_until(lambda: bound_count(cluster, names) == CANARY_SIZE, within=CANARY_SECONDS,
                         what=f"canary {name} bound whole")
    except AssertionError as error:
        raise AssertionError(f"{error}; {bound_count(cluster, names)} bound; {why_pending(cluster, name)}") from None
    twice = {pod: count for pod, count in accepted_bindings(cluster, names).items() if count != 1}
    assert twice == {}, f"canary pods bound other than once: {twice}"
    stopped = [daemon.identity for daemon in running if not daemon.running]
    assert stopped == [], f"daemons stopped: {stopped}"
    return canary


def why_pending(cluster: DevCluster, gang_name: str) -> str:
    """What the scheduler says of a gang (its PodGroup's conditions), and which nodes have 8 GPUs free."""
    group = cluster.store.find("podgroups.scheduling.sigs.k8s.io", gang_name, NAMESPACE) or {}
    said = "; ".join(f"{c.get('type')}: {c.get('message')}" for c in group.get("status", {}).get("conditions", []))
    used: dict[str, int] = {}
    for found in cluster.store.list("pods"):
        node = found.get("spec", {}).get("nodeName")
        if node:
            used[node] = used.get(node, 0) + requests_of(found).get("nvidia.com/gpu", 0)
    free = sorted(n["metadata"]["name"] for n in cluster.store.list("nodes")
                  if not n.get("spec", {}).get("unschedulable") and used.get(n["metadata"]["name"], 0) == 0)
    return f"the PodGroup says {said or 'nothing'}; nodes schedulable and without GPUs in use: {free}"


def retire(cluster: DevCluster, manifests: Sequence[dict[str, Any]]) -> None:
    """Delete these objects (pods first), e.g. a canary, to give its room back."""
    for manifest in sorted(manifests, key=lambda m: m["kind"] != "Pod"):
        resource = "pods" if manifest["kind"] == "Pod" else "podgroups.scheduling.sigs.k8s.io"
        if cluster.store.find(resource, manifest["metadata"]["name"], NAMESPACE) is not None:
            cluster.store.delete(resource, manifest["metadata"]["name"], NAMESPACE, grace_period_seconds=0)


async def verified(log_dir: Path) -> None:
    """`toposched replay LOG --verify` exits 0."""
    code, output = await replay_verify(log_dir)
    assert code == 0, f"replay --verify of {log_dir} exited {code}:\n{output[-3000:]}"
