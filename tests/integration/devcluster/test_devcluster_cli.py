"""`toposched devcluster` as a process: pre-loads a scenario, writes a kubeconfig, exits 0 on Ctrl-C."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SCENARIO = """
apiVersion: v1
kind: Node
metadata: {name: gpu-0, labels: {network.topology/block: b0}}
status: {allocatable: {cpu: "8", nvidia.com/gpu: "8"}}
---
apiVersion: v1
kind: Pod
metadata:
  name: running
  namespace: research
  annotations: {sim.toposched.io/at: "0", sim.toposched.io/runtime: "100"}
spec:
  nodeName: gpu-0
  containers: [{name: main, image: trainer}]
---
apiVersion: v1
kind: Pod
metadata: {name: waiting, namespace: research}
spec:
  schedulerName: toposched
  containers: [{name: main, image: trainer}]
---
apiVersion: v1
kind: Pod
metadata: {name: requests-only, namespace: research}
spec:
  containers: [{name: main, image: trainer, resources: {requests: {nvidia.com/gpu: "1"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: words, namespace: research}
spec:
  containers: [{name: main, image: trainer, resources: {limits: {nvidia.com/gpu: one}}}]
"""
HYPERNODES = """
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: block-0}
spec:
  tier: 1
  members: [{type: Node, selector: {exactMatch: {name: gpu-0}}}]
"""


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_cli_serves_a_preloaded_scenario_directory_and_exits_cleanly_on_interrupt(tmp_path: Path) -> None:
    scenario = tmp_path / "scenario"
    scenario.mkdir()
    (scenario / "01-cluster.yaml").write_text(SCENARIO)
    (scenario / "02-topology.yaml").write_text(HYPERNODES)
    kubeconfig = tmp_path / "kc"
    process = subprocess.Popen(
        [sys.executable, "-c", "import sys; from devcluster.cli import main; sys.exit(main(sys.argv[1:]))",
         "--kubeconfig", str(kubeconfig), "--load", str(scenario)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while not kubeconfig.exists():
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "no kubeconfig written"
            time.sleep(0.05)
        kubectl = [str(shutil.which("kubectl")), "--kubeconfig", str(kubeconfig), "--cache-dir", str(tmp_path / "c")]
        out = subprocess.run([*kubectl, "get", "pods", "-n", "research", "-o", "wide"], capture_output=True,
                             text=True, timeout=30, check=True).stdout
        running = next(line for line in out.splitlines() if line.startswith("running"))
        assert "Running" in running and "gpu-0" in running
        assert "Pending" in next(line for line in out.splitlines() if line.startswith("waiting"))
        tiers = subprocess.run([*kubectl, "get", "hypernodes", "-o", "jsonpath={.items[*].metadata.name}"],
                               capture_output=True, text=True, timeout=30, check=True).stdout
        assert tiers == "block-0"
    finally:
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=20)
    assert process.returncode == 0, stderr
    assert str(kubeconfig) in stdout and "http://127.0.0.1:" in stdout
    assert "Traceback" not in stderr
    assert "loaded 5 objects" in stdout  # the pod devcluster cannot decode is skipped, as simulate skips it
    assert ("01-cluster.yaml#4: Pod research/requests-only: a real API server refuses it: "
            "spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable "
            "resources") in stderr
    assert "01-cluster.yaml#5: Pod research/words: Pod in version \"v1\" cannot be handled as a Pod" in stderr


def test_cli_reports_an_unreadable_scenario_as_a_usage_error(tmp_path: Path) -> None:
    from devcluster.cli import main

    assert main(["--kubeconfig", str(tmp_path / "kc"), "--load", str(tmp_path / "missing.yaml")]) == 2


def test_cli_starts_with_fault_rules_that_the_admin_endpoint_lists(tmp_path: Path) -> None:
    import json
    import urllib.request

    process = subprocess.Popen(
        [sys.executable, "-c", "import sys; from devcluster.cli import main; sys.exit(main(sys.argv[1:]))",
         "--kubeconfig", str(tmp_path / "kc"), "--fault", "status=429,verb=create,path=/binding,fraction=1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        banner = [process.stdout.readline() for _ in range(4)]  # serving, kubeconfig, the rule, kubectl hint
        url = banner[0].split()[-1]  # "devcluster serving http://127.0.0.1:PORT"
        assert url.startswith("http://127.0.0.1:")
        assert banner[2].startswith("fault rule 1: ")
        with urllib.request.urlopen(f"{url}/devcluster/faults", timeout=10) as response:
            listed = json.load(response)
        assert [(r["status"], r["verb"], r["path"], r["fraction"]) for r in listed["rules"]] == [
            (429, "create", "/binding", 1.0)]
    finally:
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=20)
    assert process.returncode == 0, stderr
    assert "devcluster stopped" in stdout


def test_cli_refuses_a_fault_rule_it_cannot_use_naming_the_key(capsys: pytest.CaptureFixture[str]) -> None:
    from devcluster.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["--fault", "status=429,colour=red"])
    assert exited.value.code == 2
    assert "colour" in capsys.readouterr().err
