"""A plan whose pods have WaitForFirstConsumer claims: the claims are marked with their pods' nodes and
provisioned before any pod is bound (kube-scheduler's VolumeBinding PreBind), and a provisioning that
fails or takes too long releases the plan whole, to be placed again."""

from __future__ import annotations

import anyio
import msgspec

from daemon.scheduling.loop import Scheduler, SchedulerConfig
from events.builders import group_event, pod, pod_event, pod_group
from events.model import (
    BindFailed,
    ClaimDeleted,
    ClaimUpserted,
    Event,
    PodDeleted,
    PodForgotten,
    PodUpserted,
    StorageClassUpserted,
    VolumeUpserted,
)
from events.objects import (
    BIND_COMPLETED_ANNOTATION,
    READ_WRITE_ONCE_POD,
    SELECTED_NODE_ANNOTATION,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    ObjectMeta,
    OwnedMeta,
    PersistentVolume,
    PersistentVolumeClaim,
    PersistentVolumeClaimSpec,
    PersistentVolumeClaimVolumeSource,
    PersistentVolumeSpec,
    PersistentVolumeStatus,
    PodStatus,
    StorageClass,
    Volume,
    VolumeNodeAffinity,
    VolumeResourceRequirements,
)

from .test_scheduler import Harness, gang, nodes, wait_for

WFFC = StorageClassUpserted(storage_class=StorageClass(metadata=ObjectMeta(name="gp3"), provisioner="ebs.csi.aws.com",
                                                       volume_binding_mode="WaitForFirstConsumer"))


def claim(name: str) -> ClaimUpserted:
    return ClaimUpserted(claim=PersistentVolumeClaim(
        metadata=OwnedMeta(name=name, namespace="default", uid=f"uid-{name}"),
        spec=PersistentVolumeClaimSpec(storage_class_name="gp3")))


def with_claims(events: list[Event]) -> list[Event]:
    """A gang's pod events, each pod with a claim of its own (`data-<pod>`)."""
    out: list[Event] = []
    for event in events:
        if isinstance(event, PodUpserted):
            obj = event.pod
            volume = Volume(name="data", persistent_volume_claim=PersistentVolumeClaimVolumeSource(
                claim_name=f"data-{obj.metadata.name}"))
            event = PodUpserted(pod=msgspec.structs.replace(obj, spec=msgspec.structs.replace(obj.spec,
                                                                                            volumes=[volume])),
                                time=event.time)
        out.append(event)
    return out


def provisioned(h: Harness, key: str) -> None:
    """What the provisioner and the PV controller leave on a claim: bound to a new volume."""
    held = h.state.volumes.claims[key]
    meta = held.metadata
    h.add(ClaimUpserted(claim=msgspec.structs.replace(
        held,
        metadata=msgspec.structs.replace(meta, annotations={**meta.annotations, BIND_COMPLETED_ANNOTATION: "yes"}),
        spec=msgspec.structs.replace(held.spec, volume_name=f"pv-{meta.name}"))))


def given_up(h: Harness, key: str) -> None:
    """What a provisioner that cannot provision on the selected node does: it removes the annotation."""
    held = h.state.volumes.claims[key]
    meta = held.metadata
    kept = {k: v for k, v in meta.annotations.items() if k != SELECTED_NODE_ANNOTATION}
    h.add(ClaimUpserted(claim=msgspec.structs.replace(held, metadata=msgspec.structs.replace(meta, annotations=kept))))


CLAIMS = [f"default/data-train-{i}" for i in range(2)]


async def test_no_pod_is_bound_before_every_claim_of_its_plan_is_provisioned() -> None:
    h = Harness()
    h.add(*nodes(2), WFFC, *(claim(key.partition("/")[2]) for key in CLAIMS), *with_claims(gang("train", 2)))
    async with anyio.create_task_group() as group:
        group.start_soon(h.scheduler.run_once)
        await wait_for(lambda: len([c for c in h.api.calls if c[0] == "select_node"]) == 2)
        marked = {h.state.volumes.claims[key].metadata.annotations[SELECTED_NODE_ANNOTATION] for key in CLAIMS}
        assert marked == {"n0", "n1"}
        provisioned(h, CLAIMS[0])
        await anyio.sleep(0.01)
        assert not [c for c in h.api.calls if c[0] == "bind"]  # one claim is still being provisioned
        provisioned(h, CLAIMS[1])
    assert sorted(h.bound_pods()) == ["default/train-0", "default/train-1"]


async def test_pods_waiting_for_their_volumes_are_nominated_to_their_nodes_before_any_claim_is_marked() -> None:
    # KEP-5278: kube-scheduler writes nominatedNodeName at the start of a binding cycle with PreBind work.
    h = Harness()
    h.add(*nodes(2), WFFC, *(claim(key.partition("/")[2]) for key in CLAIMS), *with_claims(gang("train", 2)))
    async with anyio.create_task_group() as group:
        group.start_soon(h.scheduler.run_once)
        await wait_for(lambda: len([c for c in h.api.calls if c[0] == "select_node"]) == 2)
        for key in CLAIMS:
            provisioned(h, key)
    kinds = [kind for kind, _ in h.api.calls]
    nominated = sorted(pod for kind, pod in h.api.calls if kind == "nominate")
    assert nominated == ["default/train-0", "default/train-1"] and "unnominate" not in kinds
    assert max(i for i, kind in enumerate(kinds) if kind == "nominate") < kinds.index("select_node")
    assert sorted(h.bound_pods()) == ["default/train-0", "default/train-1"]


async def test_a_mark_not_yet_back_from_the_watch_is_not_taken_for_the_provisioner_giving_the_node_up() -> None:
    # The watch brings one claim's mark back before the other's: the other, not annotated in the state yet,
    # is our write on its way, not a provisioner that gave its node up (which released the plan).
    h = Harness()
    h.api.held_marks = []
    h.add(*nodes(2), WFFC, *(claim(key.partition("/")[2]) for key in CLAIMS), *with_claims(gang("train", 2)))
    async with anyio.create_task_group() as group:
        group.start_soon(h.scheduler.run_once)
        await wait_for(lambda: len(h.api.held_marks or []) == 2)
        first, second = h.api.held_marks
        h.add(second)  # the other claim's echo comes first
        await anyio.sleep(0.01)
        assert not h.pods(PodForgotten)
        h.add(first)
        for key in CLAIMS:
            provisioned(h, key)
    assert sorted(h.bound_pods()) == ["default/train-0", "default/train-1"] and not h.pods(PodForgotten)


async def test_a_provisioner_giving_the_node_up_releases_the_plan_and_the_gang_is_placed_again() -> None:
    h = Harness()
    h.add(*nodes(2), WFFC, *(claim(key.partition("/")[2]) for key in CLAIMS), *with_claims(gang("train", 2)))
    async with anyio.create_task_group() as group:
        group.start_soon(h.scheduler.run_once)
        await wait_for(lambda: len([c for c in h.api.calls if c[0] == "select_node"]) == 2)
        given_up(h, CLAIMS[1])
    assert h.bound_pods() == {} and not [c for c in h.api.calls if c[0] == "bind"]
    assert sorted(h.pods(PodForgotten)) == ["default/train-0", "default/train-1"]
    assert "gave node" in h.state.gangs["default/train"].last_reason
    assert not h.pods(BindFailed)  # no Binding was sent
    h.clock.advance_to(h.clock.time + 30)  # past its backoff
    async with anyio.create_task_group() as group:  # placed again: the claim given up is marked anew
        group.start_soon(h.scheduler.run_once)
        await wait_for(lambda: len([c for c in h.api.calls if c[0] == "select_node"]) >= 3)
        for key in CLAIMS:
            provisioned(h, key)
    assert sorted(h.bound_pods()) == ["default/train-0", "default/train-1"]


async def test_claims_not_provisioned_in_time_release_the_plan_saying_which() -> None:
    h = Harness(config=SchedulerConfig(retry_parked_seconds=None, volume_binding_timeout_seconds=0.05))
    h.add(*nodes(1), WFFC, claim("data-solo"), *with_claims([pod_event(pod("solo", gpus=1))]))
    await h.scheduler.run_once()
    assert h.bound_pods() == {} and h.pods(PodForgotten) == ["default/solo"]
    reason = h.scheduler.shown_reason("default/solo")
    assert "not provisioned within 0.05 s: default/data-solo" in reason


async def test_a_pod_folded_before_the_loop_began_is_tried_again_when_its_claim_comes() -> None:
    # As after a restart: the pod is in the state from the snapshot, not from an event the loop saw.
    h = Harness()
    for event in [*nodes(1), WFFC, *with_claims([pod_event(pod("solo", gpus=1))])]:
        h.state.apply(event)
    h.scheduler = Scheduler(h.journal, h.api, config=SchedulerConfig(retry_parked_seconds=None))
    await h.settle()
    assert h.bound_pods() == {} and "data-solo" in h.scheduler.shown_reason("default/solo")
    h.add(claim("data-solo"))
    async with anyio.create_task_group() as group:
        group.start_soon(h.scheduler.run_once)
        await wait_for(lambda: any(c[0] == "select_node" for c in h.api.calls))
        provisioned(h, "default/data-solo")
    assert h.bound_pods() == {"default/solo": "n0"}


async def test_a_claim_deleted_while_its_plan_waits_at_permit_fails_the_plan_before_any_binding() -> None:
    # A GangGroup: gang "a" is placed and waits at Permit for gang "b"; meanwhile a claim of a pod of "a" goes.
    h = Harness()
    members = ["default/a", "default/b"]
    h.add(*nodes(5), WFFC, claim("data-a-0"), claim("data-a-1"), claim("data-a-2"),
          *with_claims(gang("a", 3, min_member=2, gang_group=members)),
          group_event(pod_group("b", min_member=2, gang_group=members)), pod_event(pod("b-0", gang="b")))
    await h.settle()
    assert h.scheduler.has_waiting() and h.bound_pods() == {}
    h.add(ClaimDeleted(key="default/data-a-1"))
    h.clock.advance_to(5.0)
    h.add(pod_event(pod("b-1", gang="b"), 5.0))
    await h.settle()
    assert h.bound_pods() == {} and not [c for c in h.api.calls if c[0] in ("bind", "select_node")]
    assert "default/a-1" in h.pods(PodForgotten)
    assert 'persistentvolumeclaim "data-a-1" not found' in h.state.gangs["default/a"].last_reason


def _solo_claim(access_mode: str) -> list[Event]:
    """A bound claim "solo" of `access_mode` (its volume reachable from every node)."""
    meta = OwnedMeta(name="solo", namespace="default", uid="uid-solo", annotations={BIND_COMPLETED_ANNOTATION: "yes"})
    return [VolumeUpserted(volume=PersistentVolume(metadata=ObjectMeta(name="pv-solo"))),
            ClaimUpserted(claim=PersistentVolumeClaim(metadata=meta, spec=PersistentVolumeClaimSpec(
                storage_class_name="", volume_name="pv-solo", access_modes=[access_mode])))]


def _using_solo(event: PodUpserted, node_name: str = "", phase: str = "Pending") -> PodUpserted:
    obj = event.pod
    volume = Volume(name="data", persistent_volume_claim=PersistentVolumeClaimVolumeSource(claim_name="solo"))
    spec = msgspec.structs.replace(obj.spec, volumes=[volume], node_name=node_name)
    return PodUpserted(pod=msgspec.structs.replace(obj, spec=spec, status=PodStatus(phase=phase)), time=event.time)


async def test_a_pod_waits_while_another_runs_on_its_read_write_once_pod_claim_and_goes_once_that_one_ends() -> None:
    h = Harness()
    h.add(*nodes(2), *_solo_claim(READ_WRITE_ONCE_POD),
          _using_solo(pod_event(pod("holder", gpus=1)), node_name="n0", phase="Running"),
          _using_solo(pod_event(pod("next", gpus=1))))
    await h.settle()
    assert "default/next" not in h.bound_pods()
    assert "ReadWriteOncePod access mode (persistentvolumeclaim \"solo\" is used by pod default/holder" in (
        h.scheduler.shown_reason("default/next"))
    h.add(PodDeleted(key="default/holder", uid=""))  # it ended: the waiting pod is tried again at once
    await h.settle()
    assert h.bound_pods()["default/next"] in ("n0", "n1")


async def test_a_gang_whose_two_pods_share_a_read_write_once_pod_claim_never_binds_both() -> None:
    # kube-scheduler places one, finds the other in conflict, and the gang never reaches minMember; one plan
    # here would place both at once, which the kubelet could not start.
    h = Harness()
    h.add(*nodes(2), *_solo_claim(READ_WRITE_ONCE_POD),
          *(_using_solo(event) if isinstance(event, PodUpserted) else event for event in gang("pair", 2)))
    await h.settle()
    assert h.bound_pods() == {} and not [c for c in h.api.calls if c[0] == "bind"]
    assert "is used by pod default/pair-0" in h.state.gangs["default/pair"].last_reason
    h.add(*_solo_claim("ReadWriteOnce"))  # the claim may be shared on one node now: both go
    await h.settle()
    assert sorted(h.bound_pods()) == ["default/pair-0", "default/pair-1"]


# --------------------------------------------------------------------------- volumes made in advance

LOCAL = StorageClassUpserted(storage_class=StorageClass(
    metadata=ObjectMeta(name="local"), provisioner="kubernetes.io/no-provisioner",
    volume_binding_mode="WaitForFirstConsumer"))


def local_claim(name: str) -> ClaimUpserted:
    return ClaimUpserted(claim=PersistentVolumeClaim(
        metadata=OwnedMeta(name=name, namespace="default", uid=f"uid-{name}"),
        spec=PersistentVolumeClaimSpec(storage_class_name="local", access_modes=["ReadWriteOnce"],
                                       resources=VolumeResourceRequirements(requests={"storage": "1Ti"}))))


def local_volume(name: str, node_name: str) -> VolumeUpserted:
    pinned = NodeSelectorTerm(match_fields=[NodeSelectorRequirement(key="metadata.name", operator="In",
                                                                    values=[node_name])])
    return VolumeUpserted(volume=PersistentVolume(
        metadata=ObjectMeta(name=name, resource_version="7"),
        spec=PersistentVolumeSpec(storage_class_name="local", capacity={"storage": "2Ti"},
                                  access_modes=["ReadWriteOnce"],
                                  node_affinity=VolumeNodeAffinity(required=NodeSelector(node_selector_terms=[pinned]))),
        status=PersistentVolumeStatus(phase="Available")))


def controller_binds(h: Harness, claim_key: str) -> None:
    """What the PV controller does once a volume names a claim: the claim is bound to that volume."""
    volume = next(v for v in h.state.volumes.volumes.values()
                  if v.spec.claim_ref is not None and f"default/{v.spec.claim_ref.name}" == claim_key)
    held = h.state.volumes.claims[claim_key]
    meta = held.metadata
    h.add(ClaimUpserted(claim=msgspec.structs.replace(
        held,
        metadata=msgspec.structs.replace(meta, annotations={**meta.annotations, BIND_COMPLETED_ANNOTATION: "yes"}),
        spec=msgspec.structs.replace(held.spec, volume_name=volume.metadata.name))))


def small_gang(name: str, size: int) -> list[Event]:
    """A gang of one-GPU pods, each with a claim of its own (`data-<pod>`): several fit one node."""
    return with_claims([group_event(pod_group(name, min_member=size)),
                        *(pod_event(pod(f"{name}-{i}", gang=name, gpus=1, cpu="1", memory="1Gi"))
                          for i in range(size))])


async def test_claims_without_provisioner_get_the_local_volumes_made_in_advance_before_any_pod_is_bound() -> None:
    # Both one-GPU pods would fit n1 alone; its one local volume takes one of them, n2's the other.
    h = Harness()
    h.add(*nodes(4), LOCAL, local_volume("pv-n1", "n1"), local_volume("pv-n2", "n2"),
          *(local_claim(key.partition("/")[2]) for key in CLAIMS), *small_gang("train", 2))
    async with anyio.create_task_group() as group:
        group.start_soon(h.scheduler.run_once)
        await wait_for(lambda: len([c for c in h.api.calls if c[0] == "bind_volume"]) == 2)
        named = {v.metadata.name: v.spec.claim_ref.name for v in h.state.volumes.volumes.values()
                 if v.spec.claim_ref is not None}
        assert sorted(named) == ["pv-n1", "pv-n2"] and sorted(named.values()) == ["data-train-0", "data-train-1"]
        assert not [c for c in h.api.calls if c[0] in ("bind", "select_node")]  # not provisioned: bound
        controller_binds(h, CLAIMS[0])
        await anyio.sleep(0.01)
        assert not [c for c in h.api.calls if c[0] == "bind"]  # one claim is not bound yet
        controller_binds(h, CLAIMS[1])
    bound = h.bound_pods()
    assert sorted(bound.values()) == ["n1", "n2"]
    for volume in h.state.volumes.volumes.values():  # each pod went where the volume its claim got is
        ref = volume.spec.claim_ref
        assert ref is not None and bound[f"default/{ref.name.removeprefix('data-')}"] == volume.metadata.name[3:]


async def test_a_gang_with_more_pods_than_local_volumes_waits_saying_so() -> None:
    h = Harness()
    claims = [f"data-train-{i}" for i in range(3)]
    h.add(*nodes(4), LOCAL, local_volume("pv-n1", "n1"), local_volume("pv-n2", "n2"),
          *(local_claim(name) for name in claims), *small_gang("train", 3))
    await h.settle()
    assert h.bound_pods() == {} and not [c for c in h.api.calls if c[0] == "bind_volume"]
    assert "didn't find available persistent volumes to bind" in h.state.gangs["default/train"].last_reason
    h.add(local_volume("pv-n3", "n3"))  # a new volume made in advance wakes the gang
    async with anyio.create_task_group() as group:
        group.start_soon(h.scheduler.run_once)
        await wait_for(lambda: len([c for c in h.api.calls if c[0] == "bind_volume"]) == 3)
        for name in claims:
            controller_binds(h, f"default/{name}")
    assert sorted(h.bound_pods().values()) == ["n1", "n2", "n3"]


async def test_a_claim_bound_to_another_volume_than_the_one_chosen_releases_the_plan() -> None:
    # Someone else (a user's volumeName, another binder) binds the claim elsewhere meanwhile: the pod's node
    # may not reach that volume, so nothing is bound and the plan is placed again.
    h = Harness(config=SchedulerConfig(retry_parked_seconds=None))
    h.add(*nodes(2), LOCAL, local_volume("pv-n1", "n1"), local_claim("data-solo"),
          *with_claims([pod_event(pod("solo", gpus=1))]))
    async with anyio.create_task_group() as group:
        group.start_soon(h.scheduler.run_once)
        await wait_for(lambda: any(c[0] == "bind_volume" for c in h.api.calls))
        held = h.state.volumes.claims["default/data-solo"]
        meta = held.metadata
        h.add(ClaimUpserted(claim=msgspec.structs.replace(
            held, metadata=msgspec.structs.replace(meta, annotations={BIND_COMPLETED_ANNOTATION: "yes"}),
            spec=msgspec.structs.replace(held.spec, volume_name="pv-elsewhere"))))
    assert h.bound_pods() == {} and not [c for c in h.api.calls if c[0] == "bind"]
    assert h.pods(PodForgotten) == ["default/solo"]
    assert "was bound to persistentvolume pv-elsewhere, not to pv-n1" in h.scheduler.shown_reason("default/solo")
