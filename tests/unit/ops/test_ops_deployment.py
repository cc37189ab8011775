"""The Deployment and its companions in ops/base agree with the daemon they run: the config file
loads, the flags parse, ports, probes, volumes, security and disruption settings line up.
"""

from __future__ import annotations

import inspect
from pathlib import PurePosixPath
from typing import Any

from daemon.cli import run as run_cli
from daemon.config import DaemonConfig, load_config

from .opsfiles import BASE, REPO, Manifest, config_file, config_map_name, kustomization, one


def pod_spec() -> Manifest:
    spec: Manifest = one("Deployment")["spec"]["template"]["spec"]
    return spec


def container() -> Manifest:
    containers = pod_spec()["containers"]
    assert len(containers) == 1
    found: Manifest = containers[0]
    return found


def effective_config() -> DaemonConfig:
    """The config the container starts with: config.yaml under the Deployment's flags."""
    args = [arg.replace("$(POD_NAMESPACE)", "toposched-system").replace("$(POD_NAME)", "toposched-abc")
            for arg in container()["args"]]
    assert args[0] == "run", "the image's entrypoint is `toposched`; the first argument picks `run`"
    mount = next(m for m in container()["volumeMounts"] if m["name"] == "config")
    config_arg = next(a for a in args if a.startswith("--config="))
    assert PurePosixPath(config_arg.partition("=")[2]) == PurePosixPath(mount["mountPath"]) / config_file().name
    parsed = run_cli.parser().parse_args([a if not a.startswith("--config=") else f"--config={config_file()}"
                                           for a in args[1:]])
    return run_cli.config_from_args(parsed)


def test_config_file_loads_with_the_deployment_flags() -> None:
    config = effective_config()
    assert config == load_config(config_file(), {
        "leader_election.lease_namespace": "toposched-system", "leader_election.identity": "toposched-abc"})
    assert config.in_cluster
    assert config.leader_election.enabled
    assert config.leader_election.lease_namespace == one("Deployment")["metadata"]["namespace"]


def test_config_file_keys_are_exactly_daemon_config_fields() -> None:
    import yaml

    document: dict[str, Any] = yaml.safe_load(config_file().read_text(encoding="utf-8"))
    fields = set(DaemonConfig.__struct_fields__)
    assert set(document) <= fields
    # Everything an operator may want to tune is written out, so the ConfigMap documents itself.
    assert fields - set(document) == {"kubeconfig", "context"}


def test_config_map_volume_is_the_generated_config() -> None:
    volume = next(v for v in pod_spec()["volumes"] if v["name"] == "config")
    assert volume["configMap"]["name"] == config_map_name()
    assert kustomization(BASE)["configMapGenerator"][0].get("options", {}).get("disableNameSuffixHash") is not True


def test_two_replicas_campaign_for_the_lease_and_a_pdb_keeps_one() -> None:
    deployment = one("Deployment")
    assert deployment["spec"]["replicas"] == 2
    assert effective_config().leader_election.enabled
    pdb = one("PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]


def test_probes_and_the_metrics_port_match_the_daemon_address() -> None:
    _, port = effective_config().host_port()
    ports = container()["ports"]
    assert ports == [{"name": "metrics", "containerPort": port, "protocol": "TCP"}]
    assert container()["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert container()["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container()["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    template = one("Deployment")["spec"]["template"]["metadata"]
    assert template["annotations"]["prometheus.io/port"] == str(port)
    service = one("Service")
    assert service["spec"]["ports"] == [{"name": "metrics", "port": port, "targetPort": "metrics", "protocol": "TCP"}]
    assert service["spec"]["selector"] == one("Deployment")["spec"]["selector"]["matchLabels"]
    assert service["metadata"]["annotations"]["prometheus.io/scrape"] == "true"


def test_container_is_locked_down() -> None:
    pod = pod_spec()["securityContext"]
    assert pod["runAsNonRoot"] is True and pod["runAsUser"] != 0
    assert pod["seccompProfile"] == {"type": "RuntimeDefault"}
    own = container()["securityContext"]
    assert own == {
        "runAsNonRoot": True, "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"},
    }
    dockerfile = (REPO / "Dockerfile").read_text(encoding="utf-8")
    assert f"USER {pod['runAsUser']}:{pod['runAsGroup']}" in dockerfile


def test_requests_and_limits_are_set_for_cpu_and_memory() -> None:
    resources = container()["resources"]
    for part in ("requests", "limits"):
        assert set(resources[part]) == {"cpu", "memory"}


def test_every_path_the_daemon_writes_is_on_a_volume() -> None:
    mounts = {PurePosixPath(m["mountPath"]): m for m in container()["volumeMounts"]}
    log_dir = PurePosixPath(effective_config().log_dir)
    holder = next((path for path in mounts if path == log_dir or path in log_dir.parents), None)
    assert holder is not None, f"log_dir {log_dir} is on the read-only root filesystem"
    assert not mounts[holder].get("readOnly")
    volume = next(v for v in pod_spec()["volumes"] if v["name"] == mounts[holder]["name"])
    assert "emptyDir" in volume
    assert PurePosixPath("/tmp") in mounts


def test_shutdown_grace_fits_in_the_termination_grace_period() -> None:
    daemon_grace = inspect.signature(run_cli.Daemon.__init__).parameters["shutdown_grace_seconds"].default
    assert pod_spec()["terminationGracePeriodSeconds"] > daemon_grace


def test_the_scheduler_is_scheduled_by_the_default_scheduler() -> None:
    assert pod_spec()["schedulerName"] == "default-scheduler"
    assert effective_config().scheduler_name != pod_spec()["schedulerName"]


def test_everything_namespaced_lives_in_the_namespace_object() -> None:
    namespace = one("Namespace")["metadata"]["name"]
    assert kustomization(BASE)["namespace"] == namespace
    for kind in ("ServiceAccount", "Role", "RoleBinding", "Deployment", "Service", "PodDisruptionBudget"):
        assert one(kind)["metadata"]["namespace"] == namespace, kind
