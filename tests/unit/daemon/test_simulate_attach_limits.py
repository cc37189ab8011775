"""CSI attach limits in `toposched simulate` (the scheduler loop on a virtual clock): a node at its limit
takes no pod with a new volume of the driver, takes one whose volume is attached there already, and the
waiting pod says why in kube-scheduler's words until a pod ends and frees a volume
(tests/scenarios/ebs-attach-limits.yaml tells the story)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio

from daemon.offline.simulator import Simulation
from events.scenario import load_scenario

SCENARIO = Path(__file__).parents[2] / "scenarios" / "ebs-attach-limits.yaml"


def run(until: float | None = None) -> dict[str, Any]:
    report = anyio.run(Simulation(load_scenario(SCENARIO), until=until).run)
    return dict(json.loads(report.to_json()))


def test_a_pod_with_a_new_volume_waits_with_the_reason_while_every_node_is_at_its_limit() -> None:
    report = run(until=50)
    bindings = {b["pod"]: (b["node"], b["at"]) for b in report["bindings"]}
    assert bindings == {"default/train-0": ("n2", 0.0), "default/train-1": ("n2", 0.0),
                        "default/reader": ("n1", 10.0)}
    assert report["pending"] == [{
        "pod": "default/extra",
        "reason": "pod default/extra: 0/2 nodes are available: 2 node(s) exceed max volume count"}]


def test_the_waiting_pod_goes_once_a_pod_at_the_limit_ends_and_frees_a_volume() -> None:
    report = run()
    bindings = {b["pod"]: (b["node"], b["at"]) for b in report["bindings"]}
    assert bindings["default/extra"] == ("n1", 100.0)
    assert report["pending"] == []
