"""`toposched validate FILE...`: messages name file, document, object and field; exit codes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from daemon.cli.validate import main

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "topology"


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_valid_manifests_exit_0_with_a_short_ok_line(capsys: pytest.CaptureFixture[str]) -> None:
    files = [str(EXAMPLES / n) for n in ("cluster-labels.yaml", "cnt.yaml", "hypernodes.yaml", "podgroups.yaml")]
    assert main(files) == 0
    out = capsys.readouterr().out
    assert out.startswith("OK: 9 objects valid")
    assert out.count("\n") == 1


def test_the_invalid_example_lists_every_problem_with_file_document_object_and_field(
        capsys: pytest.CaptureFixture[str]) -> None:
    path = str(EXAMPLES / "invalid.yaml")
    assert main([path]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert f"{path}#1: HyperNode bad-selectors: spec.members[0].selector: exactly one of" in lines[0]
    assert any(line.startswith(f"{path}#1: HyperNode bad-selectors: spec.members[1].selector.regexMatch.pattern: "
                               "'gpu-([' is not a valid RE2 regular expression") for line in lines)
    assert any(line.startswith(f"{path}#2: HyperNode top: spec.members[0].selector.regexMatch: ") for line in lines)
    assert f"{path}#2: HyperNode top: spec.members[1].selector.exactMatch.name: member HyperNode 'missing-block' " \
           "does not exist; the HyperNode is left out of the tree" in lines
    assert any(line.startswith(f"{path}#3: ClusterNetworkTopology default: "
                               "spec.networkTopologySpec[0].parentTopologyLayer: 'PodLayer'") for line in lines)
    assert any(line.startswith(f"{path}#4: PodGroup team-a/broken: spec.minMember: -2 is negative") for line in lines)
    assert any("gatherStrategy[0].strategy: 'MustGatherPlease'" in line for line in lines)
    assert any("gatherStrategy[0].podCountMultiple: 0 is not positive" in line for line in lines)
    assert lines[-1].endswith("problems in 4 objects")


def test_hypernode_members_may_refer_across_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    low = write(tmp_path, "a.yaml", """
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: blk}
spec: {tier: 1, members: [{type: Node, selector: {exactMatch: {name: n1}}}]}
""")
    high = write(tmp_path, "b.yaml", """
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: spn}
spec: {tier: 2, members: [{type: HyperNode, selector: {exactMatch: {name: blk}}}]}
""")
    assert main([low, high]) == 0
    capsys.readouterr()


def test_a_cycle_and_a_tier_inversion_are_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "cycle.yaml", """
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: a}
spec: {tier: 2, members: [{type: HyperNode, selector: {exactMatch: {name: b}}}]}
---
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: b}
spec: {tier: 2, members: [{type: HyperNode, selector: {exactMatch: {name: a}}}]}
---
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: c}
spec: {tier: 1, members: [{type: HyperNode, selector: {exactMatch: {name: d}}}]}
---
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: d}
spec: {tier: 1, members: [{type: Node, selector: {exactMatch: {name: n1}}}]}
""")
    assert main([path]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"{path}#1: HyperNode a: spec.members[0]: HyperNode membership forms a cycle a -> b -> a; "
        "the HyperNode is left out of the tree",
        f"{path}#2: HyperNode b: spec.members[0]: HyperNode membership forms a cycle a -> b -> a; "
        "the HyperNode is left out of the tree",
        f"{path}#3: HyperNode c: spec.members[0]: member HyperNode 'd' has tier 1, not below 'c''s tier 1 "
        "(tiers grow upward); the HyperNode is left out of the tree",
        "3 problems in 4 objects",
    ]


def test_pod_group_layers_are_checked_against_the_topology_in_the_files(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    group = write(tmp_path, "pg.yaml", """
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: PodGroup
metadata:
  name: job
  annotations:
    gang.scheduling.koordinator.sh/network-topology-spec: '{"gatherStrategy":[{"layer":"RackLayer"}]}'
spec: {minMember: 2}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: vjob}
spec: {minMember: 2, networkTopology: {mode: hard, highestTierName: rack}}
""")
    assert main([str(EXAMPLES / "cnt.yaml"), group]) == 1
    out = capsys.readouterr().out
    known = "(known: ClusterTopologyLayer/cluster/tier 3, SpineLayer/spine/tier 2, BlockLayer/block/tier 1)"
    assert "PodGroup default/job: metadata.annotations[gang.scheduling.koordinator.sh/network-topology-spec]" \
           ".gatherStrategy[0].layer: 'RackLayer' is not a layer, tierName or tier of the cluster's topology " \
           f"{known}; this PreferGather wish is dropped" in out
    assert "PodGroup default/vjob: spec.networkTopology.highestTierName: 'rack' is not a layer, tierName or tier " \
           f"of the cluster's topology {known}; the gang stays pending until the cluster has it" in out


def test_without_any_topology_in_the_files_layer_names_are_not_checked(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(EXAMPLES / "podgroups.yaml")]) == 0
    assert capsys.readouterr().out.startswith("OK: 2 objects valid")


def test_nodes_in_the_files_reveal_label_contradictions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stray = write(tmp_path, "stray.yaml", """
apiVersion: v1
kind: Node
metadata:
  name: stray
  labels: {network.topology.nvidia.com/spine: s1, network.topology.nvidia.com/block: b0}
""")
    assert main([str(EXAMPLES / "cluster-labels.yaml"), str(EXAMPLES / "cnt.yaml"), stray]) == 1
    out = capsys.readouterr().out
    assert f"{stray}#1: Node stray: metadata.labels[network.topology.nvidia.com/spine]: labels contradict" in out


def test_an_undecodable_document_is_reported_with_its_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "bad.yaml", """
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: h}
spec: {tier: high}
""")
    assert main([path]) == 1
    assert f"{path}#1: HyperNode h: spec.tier: Expected `int`" in capsys.readouterr().out


def test_unreadable_files_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "missing.yaml")]) == 2
    assert "cannot read" in capsys.readouterr().err
    broken = write(tmp_path, "broken.yaml", "a: [1, 2\n")
    assert main([broken]) == 2
    assert "not valid YAML" in capsys.readouterr().err


def test_a_catastrophic_backtracking_regex_is_checked_in_linear_time(tmp_path: Path) -> None:
    # `^(a+)+$` against forty a's and "-b" never finishes with a backtracking engine; with RE2 it
    # is one scan. Run in a process of its own so a regression fails at the deadline, not by hanging.
    path = write(tmp_path, "hostile.yaml", f"""
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {{name: s0}}
spec: {{tier: 1, members: [{{type: Node, selector: {{regexMatch: {{pattern: "^(a+)+$"}}}}}}]}}
---
apiVersion: v1
kind: Node
metadata: {{name: {"a" * 40}-b}}
""")
    done = subprocess.run([sys.executable, "-m", "daemon", "validate", path], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("OK: 1 object valid")


def test_a_pattern_only_a_backtracking_engine_accepts_is_reported(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "lookahead.yaml", """
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: s0}
spec: {tier: 1, members: [{type: Node, selector: {exactMatch: {name: n1}}},
                          {type: Node, selector: {regexMatch: {pattern: "^gpu-(?!0)"}}}]}
""")
    assert main([path]) == 1
    assert capsys.readouterr().out.splitlines()[0] == (
        f"{path}#1: HyperNode s0: spec.members[1].selector.regexMatch.pattern: '^gpu-(?!0)' is not a valid RE2 "
        "regular expression (invalid perl operator: (?!); the HyperNode is left out of the tree")


def test_the_newer_gang_kinds_are_checked_with_the_daemons_rules(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "gangs.yaml", """
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata: {name: nginx, namespace: default}
spec: {minMember: 3, minResources: {cpu: "3", memory: lots}}
---
apiVersion: scheduling.k8s.io/v1alpha1
kind: Workload
metadata: {name: training, namespace: default}
spec:
  podGroups:
  - {name: workers, policy: {gang: {minCount: 0}}}
---
apiVersion: scheduling.k8s.io/v1alpha2
kind: PodGroup
metadata: {name: example-podgroup, namespace: default}
spec:
  schedulingPolicy: {gang: {minCount: 4}}
  schedulingConstraints: {topology: [{key: topology.example.com/rack}]}
""")
    assert main([path]) == 1
    lines = capsys.readouterr().out.splitlines()
    # scheduler-plugins' Coscheduling reads minResources (toposched too); a quantity that does not parse is said
    assert lines[0].startswith(f"{path}#1: SchedulerPluginsPodGroup default/nginx: spec.minResources[memory]: ")
    assert "left out of the check that the cluster has room for the gang" in lines[0]
    assert lines[1] == (f"{path}#2: Workload default/training: spec.podGroups[0].policy.gang.minCount: "
                        "Required value (the API server refuses it)")
    assert lines[2].startswith(f"{path}#2: Workload default/training: spec.podGroups[0].policy.gang.minCount: 0 is")
    assert lines[3] == "3 problems in 3 objects"


def test_a_kubernetes_1_37_pod_group_is_checked_as_kube_apiserver_and_the_daemon_check_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "pod-group.yaml", """
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: workers, namespace: default}
spec:
  schedulingPolicy: {gang: {minCount: 4}}
  disruptionMode: {single: {}, all: {}}
  parentCompositePodGroupName: training
""")
    assert main([path]) == 1
    lines = capsys.readouterr().out.splitlines()
    refused = [line for line in lines if line.endswith("(the API server refuses it)")]
    assert len(refused) == 2 and "spec.disruptionMode" in refused[0]
    # a PodGroup naming a parent CompositePodGroup names its Workload too (`+k8s:dependentRequired`)
    assert "spec.workloadRef: Required value: must be set when spec.parentCompositePodGroupName is set" in refused[1]
    assert any(line.endswith("spec.disruptionMode: sets both single and all; single") for line in lines)


def test_a_composite_pod_group_is_checked_as_kube_apiserver_and_the_daemon_check_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "composite.yaml", """
apiVersion: scheduling.k8s.io/v1alpha3
kind: CompositePodGroup
metadata: {name: root-group-0, namespace: default}
spec:
  workloadRef: {workloadName: hierarchical-workload, templateName: root}
  schedulingPolicy: {gang: {minGroupCount: 0}}
  schedulingConstraints: {topology: [{key: topology.kubernetes.io/zone}, {key: topology.example.com/rack}]}
---
apiVersion: scheduling.k8s.io/v1alpha3
kind: CompositePodGroup
metadata: {name: replica-0, namespace: default}
spec:
  parentCompositePodGroupName: root-group-0
  schedulingPolicy: {basic: {}}
""")
    assert main([path]) == 1
    lines = capsys.readouterr().out.splitlines()
    refused = [line for line in lines if line.endswith("(the API server refuses it)")]
    assert any("#1: CompositePodGroup default/root-group-0: spec.schedulingPolicy.gang.minGroupCount: Required value"
               in line for line in refused)
    assert any("#1: CompositePodGroup default/root-group-0: spec.schedulingConstraints.topology: Too many: 2"
               in line for line in refused)
    assert any("#2: CompositePodGroup default/replica-0: spec.workloadRef: Required value" in line
               for line in refused)
    # the daemon's own words for what it does instead
    assert any(line.endswith("spec.schedulingPolicy.gang.minGroupCount: 0 is not positive; treated as 1")
               for line in lines)
    assert any("spec.schedulingConstraints.topology[1].key: only one topology constraint is honoured" in line
               for line in lines)


def test_a_kubernetes_1_37_workload_is_checked_as_kube_apiserver_checks_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "workload.yaml", """
apiVersion: scheduling.k8s.io/v1beta1
kind: Workload
metadata: {name: training, namespace: default}
spec:
  podGroupTemplates:
  - {name: workers, schedulingPolicy: {basic: {}, gang: {minCount: 4}}}
---
apiVersion: scheduling.k8s.io/v1alpha2
kind: Workload
metadata: {name: tuning, namespace: default}
spec:
  podGroupTemplates:
  - {name: workers, schedulingPolicy: {gang: {minCount: 4}}, disruptionMode: PodGroup}
""")
    assert main([path]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"{path}#1: Workload default/training: spec.podGroupTemplates[0].schedulingPolicy: "
                               "Invalid value")
    assert lines[0].endswith("(the API server refuses it)")
    assert lines[1] == "1 problem in 2 objects"


def test_a_kueue_topology_is_checked_and_names_the_layers_pod_groups_may_use(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    topology = ("apiVersion: kueue.x-k8s.io/v1beta2\nkind: Topology\nmetadata: {name: racks}\nspec:\n  levels:\n"
                "  - nodeLabel: cloud.provider.com/topology-rack\n  - nodeLabel: kubernetes.io/hostname\n")
    gang = ("apiVersion: scheduling.sigs.k8s.io/v1alpha1\nkind: PodGroup\nmetadata:\n  name: job\n  annotations:\n"
            "    gang.scheduling.koordinator.sh/network-topology-spec: "
            "'{\"gatherStrategy\": [{\"layer\": \"BlockLayer\", \"strategy\": \"MustGather\"}]}'\n"
            "spec: {minMember: 2}\n")
    node = ("apiVersion: v1\nkind: Node\nmetadata:\n  name: n0\n  labels: {cloud.provider.com/topology-rack: r0}\n"
            "status: {allocatable: {cpu: '8'}}\n")
    files = [write(tmp_path, "t.yaml", topology), write(tmp_path, "g.yaml", gang), write(tmp_path, "n.yaml", node)]
    assert main(files) == 0
    assert "1 Topology" in capsys.readouterr().out
    bad = topology.replace("nodeLabel: kubernetes.io/hostname", "nodeLabel: x/-y-")
    assert main([write(tmp_path, "bad.yaml", bad)]) == 1
    out = capsys.readouterr().out
    assert "bad.yaml#1: KueueTopology racks: spec.levels[1].nodeLabel: 'x/-y-' is not a node label key" in out


def test_kai_topologies_and_pod_groups_are_checked_together(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    topology = ("apiVersion: kai.scheduler/v1alpha1\nkind: Topology\nmetadata: {name: cluster-topology}\nspec:\n"
                "  levels:\n  - nodeLabel: cloud.provider.com/topology-rack\n  - nodeLabel: kubernetes.io/hostname\n")
    gang = ("apiVersion: scheduling.run.ai/v2alpha2\nkind: PodGroup\nmetadata: {name: job, namespace: team}\n"
            "spec:\n  minMember: 2\n  topologyConstraint:\n    topology: cluster-topology\n"
            "    requiredTopologyLevel: cloud.provider.com/topology-rack\n")
    node = ("apiVersion: v1\nkind: Node\nmetadata:\n  name: n0\n  labels: {cloud.provider.com/topology-rack: r0}\n"
            "status: {allocatable: {cpu: '8'}}\n")
    files = [write(tmp_path, "t.yaml", topology), write(tmp_path, "g.yaml", gang), write(tmp_path, "n.yaml", node)]
    assert main(files) == 0
    assert "1 Topology" in capsys.readouterr().out
    lost = gang.replace("requiredTopologyLevel: cloud.provider.com/topology-rack",
                        "requiredTopologyLevel: example.com/zone").replace("topology: cluster-topology",
                                                                           "topology: elsewhere")
    bad = topology.replace("nodeLabel: kubernetes.io/hostname", "nodeLabel: x/-y-")
    files = [write(tmp_path, "t.yaml", topology), write(tmp_path, "lost.yaml", lost), write(tmp_path, "n.yaml", node),
             write(tmp_path, "bad.yaml", bad.replace("cluster-topology", "bad"))]
    assert main(files) == 1
    out = capsys.readouterr().out
    assert ("lost.yaml#1: KaiPodGroup team/job: spec.topologyConstraint.requiredTopologyLevel: 'example.com/zone' "
            "is not the node label") in out
    assert "lost.yaml#1: KaiPodGroup team/job: spec.topologyConstraint.topology: 'elsewhere' is not the topology" in out
    assert "bad.yaml#1: KaiTopology bad: spec.levels[1].nodeLabel: 'x/-y-' is not a node label key" in out


def test_a_volcano_job_not_naming_toposched_is_said_to_be_left_to_another_scheduler(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: train, namespace: ml}
spec:
  minAvailable: 1
  schedulerName: {scheduler}
  tasks: [{name: worker, replicas: 1, template: {spec: {containers: [{name: main, image: trainer}]}}}]
"""
    ours = write(tmp_path, "ours.yaml", job.replace("{scheduler}", "toposched"))
    assert main([ours]) == 0
    assert capsys.readouterr().out.startswith("OK: 1 object valid (1 Volcano Job)")
    defaulted = write(tmp_path, "defaulted.yaml", job.replace("{scheduler}", '""'))
    assert main([defaulted]) == 1
    [line, _] = capsys.readouterr().out.splitlines()
    assert line.startswith(f"{defaulted}#1: Job ml/train: spec.schedulerName: is empty, which Volcano's webhook "
                           "makes 'volcano', not 'toposched': toposched neither enqueues")


def test_a_training_jobs_replica_not_naming_toposched_is_said_to_be_left_to_another_scheduler(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = """
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: bert, namespace: ml}
spec:
  runPolicy: {schedulingPolicy: {queue: default}}
  pytorchReplicaSpecs:
    Master: {replicas: 1, template: {spec: {schedulerName: toposched, containers: [{name: pytorch, image: t}]}}}
    Worker: {replicas: 3, template: {spec: {WORKER, containers: [{name: pytorch, image: t}]}}}
"""
    ours = write(tmp_path, "ours.yaml", job.replace("WORKER", "schedulerName: toposched"))
    assert main([ours]) == 0
    assert capsys.readouterr().out.startswith("OK: 1 object valid (1 Kubeflow training job)")
    # a template naming none takes training-operator's --gang-scheduler-name (toposched's, with scheduler-plugins
    # gang scheduling under its name): a manifest does not tell, so it is not reported
    unnamed = write(tmp_path, "unnamed.yaml", job.replace("WORKER, ", ""))
    assert main([unnamed]) == 0
    capsys.readouterr()
    theirs = write(tmp_path, "theirs.yaml", job.replace("WORKER", "schedulerName: volcano"))
    assert main([theirs]) == 1
    [line, _] = capsys.readouterr().out.splitlines()
    assert line.startswith(f"{theirs}#1: PyTorchJob ml/bert: spec.pytorchReplicaSpecs.Worker.template.spec."
                           "schedulerName: is 'volcano', not 'toposched': toposched neither enqueues this job's "
                           "PodGroup (unless")
