"""Which volume made in advance each claim of a plan is bound to, as kube-scheduler's VolumeBinding
chooses them (`findMatchingVolumes`: a pod's claims smallest request first, each given the smallest
volume that matches it and reaches the pod's node, none given twice).

A claim of a WaitForFirstConsumer class without a provisioner must get one (`VolumeNeeds.static`); a
claim of a class with a provisioner gets one when one reaches the node, and is provisioned otherwise
(`VolumeNeeds.provision`). A volume the claims of pods placed before the plan will get
(`ClusterState.static_spoken`) is given to none of the plan's. `choose_volumes` answers for a whole
plan: the gang planner checks a plan with it before anything is assumed (two pods of one plan never
count on one volume), and the loop asks it again when the plan's Bindings start, to pre-bind the
volumes it names (state/volumes.py).

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet

from state.cluster import ClusterState
from state.volumes import NO_VOLUME_TO_BIND, VolumeBook, claim_class, claim_request, static_match


def choose_volumes(state: ClusterState, assignments: Sequence[tuple[str, str]],
                   excluded: AbstractSet[str] = frozenset()) -> tuple[dict[str, str], str]:
    """For the plan's (pod, node) pairs, each claim to be bound to a volume made in advance, with the name of
    that volume; volumes in `excluded` (pre-bound by Bindings still in flight) are not given. Returns
    (claim -> volume, "") or ({}, why) when a claim that must get one finds none left on its pod's node."""
    book = state.volumes
    chosen: dict[str, str] = {}
    taken = set(excluded)
    planned = {pod_key for pod_key, _ in assignments}
    spoken: dict[str, set[str]] = {}  # by class: the volumes the claims of pods placed before the plan will get
    for pod_key, node_name in assignments:
        pod = state.pods.get(pod_key)
        if pod is None or not pod.obj.spec.volumes:
            continue
        needs = state.volume_needs(pod)
        if not needs.static and not needs.provision:
            continue
        node = state.nodes.get(node_name)
        wanted = [(claim, True) for claim in needs.static] + [(claim, False) for claim in needs.provision]
        wanted.sort(key=lambda entry: (_requested(book, entry[0]), entry[0]))
        for claim_key, required in wanted:
            claim = book.claims.get(claim_key)
            if claim is None or claim_key in chosen:
                continue
            class_name = claim_class(claim)
            others = spoken.get(class_name)
            if others is None:
                others = spoken[class_name] = state.static_spoken(class_name, planned)
            reaching = static_match(book, claim, claim_key).reaching(node.name, node.labels) if node is not None else []
            for volume in reaching:
                name = volume.metadata.name
                if name not in taken and name not in others:
                    chosen[claim_key] = name
                    taken.add(name)
                    break
            else:
                if required:
                    return {}, (f"{NO_VOLUME_TO_BIND}: no PersistentVolume made in advance is left on node "
                                f"{node_name} for persistentvolumeclaim {claim_key} of pod {pod_key}")
    return chosen, ""


def _requested(book: VolumeBook, claim_key: str) -> int:
    claim = book.claims.get(claim_key)
    return claim_request(claim) if claim is not None else 0
