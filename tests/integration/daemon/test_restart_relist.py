"""Objects deleted while the daemon was down are deleted from its state when it restarts, for every kind.

A restarted daemon folds its log, then lists every kind: what the state holds and the list no longer has
is recorded as deleted (`daemon.kube.watch.HELD_BY_KIND`). A kind forgotten there kept its objects for
good: a claim deleted while the daemon was down still let pods be placed by its volume, and a quota
(Koordinator's or capacity scheduling's ElasticQuota, a Volcano Queue) deleted then kept limiting its pods.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from daemon.kube.watch import HELD_BY_KIND
from devcluster.cluster import DevCluster
from events.ingest import KINDS
from tests.integration.daemon.harness import daemons, nodes, wait_until

OBJECTS: list[dict[str, Any]] = [
    {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "gp3"},
     "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer"},
    {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "default"},
     "spec": {"storageClassName": "gp3", "accessModes": ["ReadWriteOnce"],
              "resources": {"requests": {"storage": "1Gi"}}}},
    {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "serving", "namespace": "default"},
     "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "serving"}}}},
    {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000},
    {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "research"},
     "spec": {"weight": 1}},
]
# (store resource, name, namespace) of each, to delete while the daemon is down
STORED = [("storageclasses.storage.k8s.io", "gp3", ""), ("persistentvolumeclaims", "data", "default"),
          ("poddisruptionbudgets.policy", "serving", "default"), ("priorityclasses.scheduling.k8s.io", "high", ""),
          ("queues.scheduling.volcano.sh", "research", "")]


def test_every_kind_the_daemon_lists_says_what_a_restored_state_holds_of_it() -> None:
    assert set(HELD_BY_KIND) == {info.name for info in KINDS}


async def test_objects_deleted_while_the_daemon_was_down_are_gone_from_its_state_after_the_restart(
        tmp_path: Path) -> None:
    async with DevCluster() as cluster:
        cluster.load_objects([*nodes(2), *OBJECTS])
        async with daemons(cluster, tmp_path) as (first,):
            before = first.daemon.state
            assert before is not None
            await wait_until(lambda: "default/data" in before.volumes.claims and "default" in before.budgets
                             and "gp3" in before.volumes.classes and "research" in before.quotas.queues,
                             what="the objects folded")
        for resource, name, namespace in STORED:
            cluster.store.delete(resource, name, namespace)
        async with daemons(cluster, tmp_path) as (second,):
            after = second.daemon.state
            assert after is not None
            await wait_until(lambda: not after.volumes.claims and not after.budgets and not after.volumes.classes
                             and "high" not in after.priority_classes and "research" not in after.quotas.queues,
                             what="the deletions recorded at the relist")
