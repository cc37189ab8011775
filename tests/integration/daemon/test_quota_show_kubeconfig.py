"""`toposched quota show --kubeconfig`: the live cluster's quota trees, the same as `--scenario` on the same objects."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from daemon.cli.quota import main
from devcluster.cluster import BackgroundDevCluster

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


@pytest.mark.parametrize("name", ["quota-hierarchical-min", "capacity-quota-borrow-reclaim",
                                  "volcano-queue-reclaimable"])
def test_a_live_cluster_shows_the_same_trees_as_its_scenario(name: str, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    path = SCENARIOS / f"{name}.yaml"
    assert main(["show", "--scenario", str(path), "--json"]) == 0
    from_file = capsys.readouterr().out
    objects = [document for document in yaml.safe_load_all(path.read_text()) if document]
    with BackgroundDevCluster() as background:
        background.call(lambda cluster: cluster.load_objects(objects))
        kubeconfig = background.write_kubeconfig(tmp_path / "kubeconfig")
        assert main(["show", "--kubeconfig", str(kubeconfig), "--json"]) == 0
    assert capsys.readouterr().out == from_file
