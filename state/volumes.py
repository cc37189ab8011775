"""Persistent volumes: where a pod's claims let it go, as kube-scheduler's VolumeBinding and VolumeZone
plugins decide it.

A pod names a PersistentVolumeClaim in `spec.volumes[].persistentVolumeClaim.claimName`, or asks for a
generic ephemeral volume, whose claim the ephemeral volume controller creates as `<pod>-<volume>`,
controlled by the pod. Each claim is in one of these states for the scheduler:
- *bound* (spec.volumeName set and the PV controller's `pv.kubernetes.io/bind-completed` on it): the pod
  may go only where its PersistentVolume can be reached: the PV's required node affinity (a local disk's
  node, a zonal disk's zone) and the zone / region labels the PV carries (VolumeZone: a node that has
  such labels must be in one of the PV's values, `a__b` meaning either);
- *unbound, WaitForFirstConsumer, dynamically provisioned*: the pod may go to any node the class's
  `allowedTopologies` allow; once it is placed, the scheduler writes the node on the claim
  (`volume.kubernetes.io/selected-node`), the provisioner creates the volume there, and the pod is
  bound once the claim is (the loop's `_provision`). Without that annotation such a claim is never
  provisioned and its pod never starts;
- anything else waits, and the pod with it, in kube-scheduler's words: a claim not found (or not created
  yet by the ephemeral volume controller, or not the pod's own), being deleted, lost, unbound with an
  Immediate class (the PV controller binds it on its own; kube-scheduler waits for that too), or of a
  WaitForFirstConsumer class that provisions nothing (`kubernetes.io/no-provisioner`: local volumes
  made in advance), which toposched does not bind; the reason says so.

A claim whose access modes hold ReadWriteOncePod may be used by one pod in the whole cluster
(VolumeRestrictions): a pod waits while another pod that uses it is placed (bound, or assumed by us)
and not finished, in kube-scheduler's words. Two pending pods of ours that use one such claim would
be placed together by one plan (a gang, or a batch of lone pods), where kube-scheduler places one
after the other and finds the second in conflict; here the one with the smaller key may go and the
other waits for it. kube-scheduler may preempt the pod that holds the claim; toposched does not
preempt for a volume (the constraint `volume`), so the pod waits until the holder ends.
`VolumeBook.users` indexes the pods by the claims they name, and `released` gathers the claims whose
users left or finished, for the loop to wake the pods that wait on them.

Not modelled: a WaitForFirstConsumer claim matched to a pre-created PersistentVolume (kube-scheduler
would bind one, toposched waits), CSI storage capacity and attach limits per node (NodeVolumeLimits).

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import msgspec

from events.objects import (
    BETA_STORAGE_CLASS_ANNOTATION,
    BIND_COMPLETED_ANNOTATION,
    READ_WRITE_ONCE_POD,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    StorageClass,
    TopologySelectorTerm,
)

NO_PROVISIONER = "kubernetes.io/no-provisioner"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
CLAIM_LOST = "Lost"
CLAIM_KIND = "PersistentVolumeClaim"
# The labels VolumeZone compares between a PersistentVolume and a node; a PV's value may list several
# zones joined by "__".
ZONE_LABELS = (
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
)
ZONES_DELIMITER = "__"
# kube-scheduler's filter reasons, so `kubectl describe` reads the same with either scheduler.
NODE_CONFLICT = "node(s) had volume node affinity conflict"
NO_VOLUME_TO_BIND = "node(s) didn't find available persistent volumes to bind"
ZONE_CONFLICT = "node(s) had no available volume zone"
READ_WRITE_ONCE_POD_CONFLICT = ("node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod "
                                "access mode")


class VolumeReach(msgspec.Struct, frozen=True):
    """Which nodes can reach one claim's volume: those matching one of `terms` (None: any node) whose
    zone / region labels, where the node has any, are among `zones`' values; `reason` is what a node
    outside `terms` is told. It does not name the claim: the pods of a StatefulSet, each with its own
    volume in one zone, then share one shape, so placement asks about that zone once, not per pod."""

    terms: tuple[NodeSelectorTerm, ...] | None
    zones: tuple[tuple[str, tuple[str, ...]], ...]
    reason: str


class VolumeNeeds(msgspec.Struct, frozen=True):
    """What a pod's claims ask of its placement: `blocked` (why no node can take it now, "" when one
    may), `reach` (each claim that narrows its nodes) and `provision` (the claims the scheduler must mark
    with the chosen node before the Binding)."""

    blocked: str = ""
    reach: tuple[VolumeReach, ...] = ()
    provision: tuple[str, ...] = ()


NO_NEEDS = VolumeNeeds()


class VolumeBook:
    """The claims (by `namespace/name`), PersistentVolumes and StorageClasses (by name) the state holds; the
    pods that name each claim (`users`, by pod key, whatever their phase); and the claims whose users left
    or finished since the loop last looked (`released`)."""

    __slots__ = ("claims", "classes", "released", "users", "volumes")

    def __init__(self) -> None:
        self.claims: dict[str, PersistentVolumeClaim] = {}
        self.volumes: dict[str, PersistentVolume] = {}
        self.classes: dict[str, StorageClass] = {}
        self.users: dict[str, set[str]] = {}
        self.released: set[str] = set()

    def pod_held(self, pod: Pod, key: str) -> None:
        """`pod` (held under `key`, with volumes) names its claims."""
        for claim, _ in claim_keys(pod):
            users = self.users.get(claim)
            if users is None:
                self.users[claim] = {key}
            else:
                users.add(key)

    def pod_let_go(self, pod: Pod, key: str) -> None:
        """`pod` (with volumes) is gone, or no longer names these claims: they may be free now."""
        for claim, _ in claim_keys(pod):
            users = self.users.get(claim)
            if users is not None:
                users.discard(key)
                if not users:
                    del self.users[claim]
            self.released.add(claim)

    def pod_finished(self, pod: Pod) -> None:
        """`pod` (with volumes) finished: a ReadWriteOncePod claim of it may be used by another now."""
        self.released.update(claim for claim, _ in claim_keys(pod))


def claim_keys(pod: Pod) -> list[tuple[str, bool]]:
    """The `namespace/name` of each claim the pod's volumes use, and whether it is a generic ephemeral one."""
    namespace, name = pod.metadata.namespace, pod.metadata.name
    keys: list[tuple[str, bool]] = []
    for volume in pod.spec.volumes:
        source = volume.persistent_volume_claim
        if source is not None:
            keys.append((f"{namespace}/{source.claim_name}", False))
        elif volume.ephemeral is not None:
            keys.append((f"{namespace}/{name}-{volume.name}", True))
    return keys


def claim_bound(claim: PersistentVolumeClaim | None) -> bool:
    """Bound as kube-scheduler reads it: a volume named, and the PV controller done binding it."""
    return (claim is not None and bool(claim.spec.volume_name)
            and BIND_COMPLETED_ANNOTATION in claim.metadata.annotations)


def claim_class(claim: PersistentVolumeClaim) -> str:
    """The claim's StorageClass name, the deprecated annotation first, as the PV controller reads it."""
    annotated = claim.metadata.annotations.get(BETA_STORAGE_CLASS_ANNOTATION)
    if annotated is not None:
        return annotated
    return claim.spec.storage_class_name or ""


def needs_of(book: VolumeBook, pod: Pod, unreadable: Mapping[tuple[str, str], object],
             holder: Callable[[str], str] = lambda claim: "") -> VolumeNeeds:
    """What `pod`'s claims ask (see the module docstring). `unreadable`: the (kind, key) of objects whose
    latest version could not be decoded, so a claim that could not be read is named as such. `holder`: the
    key of another pod that holds a ReadWriteOncePod claim now ("" when none does)."""
    if not pod.spec.volumes:
        return NO_NEEDS
    reach: list[VolumeReach] = []
    provision: list[str] = []
    for key, ephemeral in claim_keys(pod):
        name = key.partition("/")[2]
        if (CLAIM_KIND, key) in unreadable:  # what we hold of it (if anything) is out of date
            return VolumeNeeds(blocked=f'persistentvolumeclaim "{name}" could not be read (see its Warning Event)')
        claim = book.claims.get(key)
        if claim is None:
            if ephemeral:
                return VolumeNeeds(blocked=("waiting for ephemeral volume controller to create the "
                                            f'persistentvolumeclaim "{name}"'))
            return VolumeNeeds(blocked=f'persistentvolumeclaim "{name}" not found')
        why = _unusable(claim, name, pod, ephemeral)
        if why:
            return VolumeNeeds(blocked=why)
        if READ_WRITE_ONCE_POD in claim.spec.access_modes:
            other = holder(key)
            if other:
                return VolumeNeeds(blocked=(
                    f"{READ_WRITE_ONCE_POD_CONFLICT} (persistentvolumeclaim \"{name}\" is used by pod {other}; "
                    "toposched does not preempt for a volume: the pod waits until that one ends)"))
        volume_name = claim.spec.volume_name
        if claim_bound(claim):
            volume = book.volumes.get(volume_name)
            if volume is None:
                return VolumeNeeds(blocked=(f'persistentvolumeclaim "{name}" is bound to persistentvolume '
                                            f'"{volume_name}", which does not exist'))
            bound = _bound_reach(volume)
            if bound is not None:
                reach.append(bound)
            continue
        class_name = claim_class(claim)
        storage_class = book.classes.get(class_name) if class_name else None
        if volume_name or storage_class is None or storage_class.volume_binding_mode != WAIT_FOR_FIRST_CONSUMER:
            return VolumeNeeds(blocked=("pod has unbound immediate PersistentVolumeClaims "
                                        f"({_why_immediate(name, volume_name, class_name, storage_class)})"))
        if storage_class.provisioner in ("", NO_PROVISIONER):
            return VolumeNeeds(blocked=(
                f'persistentvolumeclaim "{name}" waits for a pre-created PersistentVolume of StorageClass '
                f'"{class_name}" (WaitForFirstConsumer, no provisioner), which toposched does not bind; '
                "use a class with a provisioner, or bind the claim (spec.volumeName) before the pod"))
        terms = _topology_terms(storage_class.allowed_topologies)
        if terms is not None:
            reach.append(VolumeReach(terms=terms, zones=(), reason=NO_VOLUME_TO_BIND))
        provision.append(key)
    return VolumeNeeds(reach=tuple(reach), provision=tuple(provision))


def zone_conflict(zones: tuple[tuple[str, tuple[str, ...]], ...], labels: Mapping[str, str]) -> bool:
    """VolumeZone: a node with any zone / region label must carry each of the volume's, with one of its values."""
    if not any(key in labels for key in ZONE_LABELS):
        return False
    return any(labels.get(key) not in values for key, values in zones)


def _unusable(claim: PersistentVolumeClaim, name: str, pod: Pod, ephemeral: bool) -> str:
    if claim.metadata.deletion_timestamp is not None:
        return f'persistentvolumeclaim "{name}" is being deleted'
    if claim.status.phase == CLAIM_LOST:
        return (f'persistentvolumeclaim "{name}" bound to non-existent persistentvolume '
                f'"{claim.spec.volume_name}"')
    if ephemeral and not any(owner.controller and owner.uid == pod.metadata.uid
                             for owner in claim.metadata.owner_references):
        return f'persistentvolumeclaim "{name}" was not created for the pod'
    return ""


def _why_immediate(name: str, volume_name: str, class_name: str, storage_class: StorageClass | None) -> str:
    if volume_name:
        return f'persistentvolumeclaim "{name}": its binding to persistentvolume "{volume_name}" is not complete yet'
    if not class_name:
        return f'persistentvolumeclaim "{name}" has no StorageClass: it waits for a PersistentVolume to be bound to it'
    if storage_class is None:
        return f'persistentvolumeclaim "{name}": storageclass "{class_name}" not found'
    return f'persistentvolumeclaim "{name}": StorageClass "{class_name}" binds it at once (Immediate), not yet done'


def _bound_reach(volume: PersistentVolume) -> VolumeReach | None:
    affinity = volume.spec.node_affinity
    required = affinity.required if affinity is not None else None
    terms = tuple(required.node_selector_terms) if required is not None else None
    labels = volume.metadata.labels
    zones = tuple((label, tuple(labels[label].split(ZONES_DELIMITER))) for label in ZONE_LABELS if label in labels)
    if terms is None and not zones:
        return None
    return VolumeReach(terms=terms, zones=zones, reason=NODE_CONFLICT)


def _topology_terms(allowed: list[TopologySelectorTerm]) -> tuple[NodeSelectorTerm, ...] | None:
    """A class's allowedTopologies as node selector terms (None: no limit, as an empty list means)."""
    if not allowed:
        return None
    return tuple(
        NodeSelectorTerm(match_expressions=[NodeSelectorRequirement(key=requirement.key, operator="In",
                                                                    values=list(requirement.values))
                                            for requirement in term.match_label_expressions])
        for term in allowed)
