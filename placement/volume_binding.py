"""Which volume made in advance each claim of a plan is bound to, as kube-scheduler's VolumeBinding
chooses them (`findMatchingVolumes`: a pod's claims smallest request first, each given the smallest
volume that matches it and reaches the pod's node, none given twice).

A claim of a WaitForFirstConsumer class without a provisioner must get one (`VolumeNeeds.static`); a
claim of a class with a provisioner gets one when one reaches the node, and is provisioned otherwise
(`VolumeNeeds.provision`). `choose_volumes` answers for a whole plan: the gang planner checks a plan
with it before anything is assumed (two pods of one plan never count on one volume), and the loop
asks it again when the plan's Bindings start, to pre-bind the volumes it names (state/volumes.py).

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet

from events.objects import PersistentVolume
from placement.fit import term_matches
from state.cluster import ClusterState, NodeInfo
from state.resources import QuantityError, parse_quantity
from state.volumes import NO_VOLUME_TO_BIND, STORAGE, static_candidates, volume_terms


def choose_volumes(state: ClusterState, assignments: Sequence[tuple[str, str]],
                   excluded: AbstractSet[str] = frozenset()) -> tuple[dict[str, str], str]:
    """For the plan's (pod, node) pairs, each claim to be bound to a volume made in advance, with the name of
    that volume; volumes in `excluded` (pre-bound by Bindings still in flight) are not given. Returns
    (claim -> volume, "") or ({}, why) when a claim that must get one finds none left on its pod's node."""
    book = state.volumes
    chosen: dict[str, str] = {}
    taken = set(excluded)
    for pod_key, node_name in assignments:
        pod = state.pods.get(pod_key)
        if pod is None or not pod.obj.spec.volumes:
            continue
        needs = state.volume_needs(pod)
        if not needs.static and not needs.provision:
            continue
        node = state.nodes.get(node_name)
        wanted = [(claim, True) for claim in needs.static] + [(claim, False) for claim in needs.provision]
        wanted.sort(key=lambda entry: (_requested(state, entry[0]), entry[0]))
        for claim_key, required in wanted:
            claim = book.claims.get(claim_key)
            if claim is None or claim_key in chosen:
                continue
            for volume in static_candidates(book, claim, claim_key):
                name = volume.metadata.name
                if name not in taken and node is not None and reaches(volume, node):
                    chosen[claim_key] = name
                    taken.add(name)
                    break
            else:
                if required:
                    return {}, (f"{NO_VOLUME_TO_BIND}: no PersistentVolume made in advance is left on node "
                                f"{node_name} for persistentvolumeclaim {claim_key} of pod {pod_key}")
    return chosen, ""


def reaches(volume: PersistentVolume, node: NodeInfo) -> bool:
    """The volume's required node affinity admits `node` (kube-scheduler's CheckNodeAffinity)."""
    terms = volume_terms(volume)
    return terms is None or any(term_matches(term, node.name, node.labels) for term in terms)


def _requested(state: ClusterState, claim_key: str) -> int:
    claim = state.volumes.claims.get(claim_key)
    if claim is None or claim.spec.resources is None:
        return 0
    try:
        return parse_quantity(claim.spec.resources.requests.get(STORAGE, "0"))
    except QuantityError:
        return 0
