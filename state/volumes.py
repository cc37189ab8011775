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
- *unbound, WaitForFirstConsumer, of a class that provisions nothing* (`kubernetes.io/no-provisioner`:
  local disks made into PersistentVolumes in advance): bound to one of those volumes, as kube-scheduler's
  VolumeBinding does it (`FindMatchingVolume` of k8s.io/component-helpers, scheduler path). A volume may
  be bound to the claim when it is pre-bound to it (`spec.claimRef` naming it, without a uid or with its
  uid: then it is the only one), or else when it is Available, names no claim, is not being deleted,
  is of the claim's class, volumeMode (Filesystem when unset) and volumeAttributesClassName, offers
  every access mode of the claim and at least the storage it requests, and carries labels the claim's
  `spec.selector` selects. The pod may go where such a volume's required node affinity allows
  (`static_reach`: counted per node, leaving out the volumes spoken for by the claims of pods placed
  already, `spoken_for`);
  once it is placed, the loop pre-binds the smallest of them on its node to the claim (the volume's
  `claimRef`, as kube-scheduler's PreBind writes it) and waits for the PV controller to bind the claim.
  A claim of a class with a provisioner is bound so too when such a volume reaches the chosen node,
  and provisioned otherwise;
- anything else waits, and the pod with it, in kube-scheduler's words: a claim not found (or not created
  yet by the ephemeral volume controller, or not the pod's own), being deleted, lost, unbound with an
  Immediate class (the PV controller binds it on its own; kube-scheduler waits for that too), or of a
  WaitForFirstConsumer class without a provisioner while no volume made in advance may be bound to it.

A claim whose access modes hold ReadWriteOncePod may be used by one pod in the whole cluster
(VolumeRestrictions): a pod waits while another pod that uses it is placed (bound, or assumed by us)
and not finished, in kube-scheduler's words. Two pending pods of ours that use one such claim would
be placed together by one plan (a gang, or a batch of lone pods), where kube-scheduler places one
after the other and finds the second in conflict; here the one with the smaller key may go and the
other waits for it. kube-scheduler may preempt the pod that holds the claim; toposched does not
preempt for a volume (the constraint `volume`), so the pod waits until the holder ends.
`VolumeBook.users` indexes the pods by the claims they name, and `released` gathers the claims whose
users left or finished, for the loop to wake the pods that wait on them.

CSI attach limits per node (NodeVolumeLimits, kube-scheduler's CSILimits plugin): a node's CSINode says, per
CSI driver, how many volumes of it may be used there at once (`spec.drivers[].allocatable.count`; no CSINode,
or a driver without a count: no limit). A pod's volumes are counted by `<driver>/<volumeHandle>` for a
claim naming a PersistentVolume with `spec.csi`, and by its StorageClass's provisioner and the claim for a
claim naming no volume yet (or one not found) (`csi_volumes`), once per node however many pods there use
them; every pod bound or assumed on the node counts, whoever scheduled it, until it finishes
(`ClusterState.attach_room`), and so do the volumes of the nominations there of priority >= the pod's
(placement/fit.py `Capacity.attach_room`). A pod may go to a node only while the new volumes it brings there fit the
room left (`attach_needs`, placement/fit.py `attach_fit`), else: "node(s) exceed max volume count".
PersistentVolumes of the in-tree plugins migrated to CSI (awsElasticBlockStore, gcePersistentDisk, azureDisk,
cinder) and claims of classes naming their in-tree provisioners count against the CSI driver, by the handle
csi-translation-lib gives them (`csi_source`, `MIGRATED_DRIVERS`). Not counted, unlike kube-scheduler:
portworxVolume PersistentVolumes (migrated behind a feature gate and the CSINode's
`storage.alpha.kubernetes.io/migrated-plugins` annotation) and migrated in-tree inline volumes of pods
(awsElasticBlockStore and the like written in the pod itself), so such a volume adds nothing to its node's
count; and the legacy `attachable-volumes-csi-*` Node allocatable keys (kubelets have not written them since
CSINodes). Not modelled: CSI storage capacity.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from collections.abc import Set as AbstractSet

import msgspec

from events.objects import (
    BETA_STORAGE_CLASS_ANNOTATION,
    BIND_COMPLETED_ANNOTATION,
    READ_WRITE_ONCE_POD,
    CSINode,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    StorageClass,
    TopologySelectorTerm,
)
from state.indexes import leave
from state.label_selectors import selects
from state.node_selectors import HOSTNAME_FIELD, term_matches
from state.resources import QuantityError, parse_quantity

NO_PROVISIONER = "kubernetes.io/no-provisioner"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
CLAIM_LOST = "Lost"
VOLUME_AVAILABLE = "Available"
FILESYSTEM = "Filesystem"  # a volumeMode left unset
STORAGE = "storage"
HOSTNAME_LABEL = "kubernetes.io/hostname"
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
_SELECTOR_KEY = msgspec.msgpack.Encoder(order="deterministic")
# kube-scheduler's filter reasons, so `kubectl describe` reads the same with either scheduler.
NODE_CONFLICT = "node(s) had volume node affinity conflict"
NO_VOLUME_TO_BIND = "node(s) didn't find available persistent volumes to bind"
ZONE_CONFLICT = "node(s) had no available volume zone"
READ_WRITE_ONCE_POD_CONFLICT = ("node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod "
                                "access mode")
MAX_VOLUME_COUNT = "node(s) exceed max volume count"  # NodeVolumeLimits' ErrReasonMaxVolumeCountExceeded
# A free vector's entry (placement/fit.py) for the volumes of a CSI driver a node may still take (kube-scheduler
# keys the limit so: volumeutil.GetCSIAttachLimitKey), and its marker for a volume used on the node already.
ATTACH_PREFIX = "attachable-volumes-csi-"
ATTACHED_PREFIX = "attached-volume:"
CSI_NODE_KIND = "CSINode"
# The in-tree volume plugins kube-scheduler counts against the CSI driver they migrated to (csi-translation-lib:
# migration is on for these four wherever the node has a CSINode, which is where a limit can be), by the
# provisioner name a StorageClass gives: AWS EBS, GCE PD, Azure Disk, OpenStack Cinder.
MIGRATED_DRIVERS = {
    "kubernetes.io/aws-ebs": "ebs.csi.aws.com",
    "kubernetes.io/gce-pd": "pd.csi.storage.gke.io",
    "kubernetes.io/azure-disk": "disk.csi.azure.com",
    "kubernetes.io/cinder": "cinder.csi.openstack.org",
}
_GCE_UNSPECIFIED = "UNSPECIFIED"
INVALID_CSI_NODE = "InvalidCSINode"  # the Warning Event's reason for a CSINode entry not read


class VolumeReach(msgspec.Struct, frozen=True):
    """Which nodes can reach one claim's volume: those matching one of `terms` (None: any node) whose
    zone / region labels, where the node has any, are among `zones`' values; `reason` is what a node
    outside `terms` is told. It does not name the claim: the pods of a StatefulSet, each with its own
    volume in one zone, then share one shape, so placement asks about that zone once, not per pod."""

    terms: tuple[NodeSelectorTerm, ...] | None
    zones: tuple[tuple[str, tuple[str, ...]], ...]
    reason: str
    # A claim to be bound to a volume made in advance (`static_reach`): how many of the volumes it may be
    # bound to, and no other pod's claim is spoken for, reach each node. A volume pinned to one node, as a
    # local disk is, is counted by that node's kubernetes.io/hostname label (`by_hostname`) or name
    # (`by_name`); `elsewhere` holds the required node terms of each other volume (None: any node).
    # `static` is False for every other reach.
    static: bool = False
    by_hostname: dict[str, int] = {}
    by_name: dict[str, int] = {}
    elsewhere: tuple[tuple[NodeSelectorTerm, ...] | None, ...] = ()
    # What a shape's key holds of a static reach, instead of its thousands of counts (the same for every pod
    # of a gang): a number the VolumeBook gives each `Candidates` it derives, or a hash of the counts of one
    # made for a single pod. Two reaches that differ never share it; two equal ones may not.
    digest: str = ""


class AttachNeed(msgspec.Struct, frozen=True):
    """What a pod asks of the attach limit of one CSI driver (NodeVolumeLimits): `own` volumes of that driver no
    other pod uses (new on every node), and the unique names (`<driver>/<volumeHandle>`) of those some other pod
    uses too (new only on a node where no pod uses them yet)."""

    driver: str
    own: int
    shared: tuple[str, ...] = ()


class VolumeNeeds(msgspec.Struct, frozen=True):
    """What a pod's claims ask of its placement: `blocked` (why no node can take it now, "" when one
    may), `reach` (each claim that narrows its nodes), `provision` (the claims the scheduler must mark
    with the chosen node before the Binding, unless a volume made in advance reaches it) and `static`
    (those it must bind to a volume made in advance)."""

    blocked: str = ""
    reach: tuple[VolumeReach, ...] = ()
    provision: tuple[str, ...] = ()
    # The claims to be bound to a volume made in advance once the pod is placed (`static_reach`).
    static: tuple[str, ...] = ()
    # Per CSI driver some node limits (`VolumeBook.limited`), the pod's volumes of it (`attach_needs`).
    attach: tuple[AttachNeed, ...] = ()


NO_NEEDS = VolumeNeeds()


class VolumeBook:
    """The claims (by `namespace/name`), PersistentVolumes and StorageClasses (by name) the state holds; the
    pods that name each claim (`users`, by pod key, whatever their phase); and the claims whose users left
    or finished since the loop last looked (`released`)."""

    __slots__ = ("_changed", "_changed_from", "_facts", "_matches", "_named", "_serial", "attach_limits", "claims",
                 "classes", "csi_nodes", "handles", "limited", "released", "users", "version", "volume_version",
                 "volumes")

    MATCHES_KEPT = 256  # `static_match` entries (one per distinct request of a claim: a few per cluster)
    CHANGES_KEPT = 4096  # volume changes remembered for `static_match` to follow (past that, it derives afresh)

    def __init__(self) -> None:
        self.version = 0  # counts the changes of claims and volumes (what is derived from them is kept per version)
        self.volume_version = 0  # counts the changes of volumes alone
        # The names of the volumes changed since volume version `_changed_from`, one per change.
        self._changed: list[str] = []
        self._changed_from = 0
        # `static_match`: by what a claim asks of a volume, (volume version, its `Candidates`); and the names of
        # the volumes whose claimRef names each claim (kept as volumes change).
        self._matches: dict[tuple[object, ...], tuple[int, Candidates]] = {}
        self._named: dict[str, set[str]] = {}
        self._serial = 0  # numbers each static reach made (`VolumeReach.digest`)
        # By volume name: (the volume as held, its capacity, the node it is pinned to), read once per version
        # of each volume (`facts`).
        self._facts: dict[str, tuple[PersistentVolume, int | None, tuple[str, str] | None]] = {}
        self.claims: dict[str, PersistentVolumeClaim] = {}
        self.volumes: dict[str, PersistentVolume] = {}
        self.classes: dict[str, StorageClass] = {}
        self.users: dict[str, set[str]] = {}
        self.released: set[str] = set()
        # CSINodes by name (their node's), each node's attach limit per CSI driver (`allocatable.count`; a driver
        # without one, or a node without a CSINode, has none) and, per driver, how many nodes limit it.
        self.csi_nodes: dict[str, CSINode] = {}
        self.attach_limits: dict[str, dict[str, int]] = {}
        self.limited: dict[str, int] = {}
        # The names of the PersistentVolumes of each CSI volume (`<driver>/<volumeHandle>`, `csi_source`): more
        # than one when two volumes point at one disk (one in-tree, one CSI, say), whose users then share it.
        self.handles: dict[str, set[str]] = {}

    def put_csi_node(self, csi_node: CSINode) -> list[tuple[str, str]]:
        """Hold `csi_node` and its node's attach limits; returns (field, message) for each entry not read."""
        name = csi_node.metadata.name
        self.drop_csi_node(name)
        self.csi_nodes[name] = csi_node
        limits: dict[str, int] = {}
        problems: list[tuple[str, str]] = []
        seen: set[str] = set()
        for index, driver in enumerate(csi_node.spec.drivers):
            field = f"spec.drivers[{index}]"
            if not driver.name:
                problems.append((f"{field}.name", "empty: the entry is not read"))
                continue
            if driver.name in seen:
                # The API server refuses it (Duplicate); kube-scheduler, handed one, keeps the last entry's count.
                problems.append((f"{field}.name", f'duplicate driver "{_shown(driver.name)}": the last entry counts'))
            seen.add(driver.name)
            count = driver.allocatable.count if driver.allocatable is not None else None
            if count is None:
                limits.pop(driver.name, None)
                continue
            if count < 0:
                problems.append((f"{field}.allocatable.count", f"{count}: must be >= 0; the driver is not limited"))
                limits.pop(driver.name, None)
                continue
            limits[driver.name] = count
        if limits:
            self.attach_limits[name] = limits
            for driver_name in limits:
                self.limited[driver_name] = self.limited.get(driver_name, 0) + 1
        self.version += 1
        return problems

    def drop_csi_node(self, name: str) -> None:
        self.csi_nodes.pop(name, None)
        limits = self.attach_limits.pop(name, None)
        if limits is None:
            return
        for driver_name in limits:
            left = self.limited[driver_name] - 1
            if left:
                self.limited[driver_name] = left
            else:
                del self.limited[driver_name]
        self.version += 1

    def put_claim(self, key: str, claim: PersistentVolumeClaim) -> None:
        """Hold `claim` under `key` (`namespace/name`)."""
        self.claims[key] = claim
        self.version += 1

    def drop_claim(self, key: str) -> None:
        self.claims.pop(key, None)
        self.version += 1

    def put_volume(self, volume: PersistentVolume) -> None:
        """Hold `volume` (new, or a version of one held)."""
        name = volume.metadata.name
        self._unname(self.volumes.get(name))
        self.volumes[name] = volume
        ref = volume.spec.claim_ref
        if ref is not None:
            self._named.setdefault(f"{ref.namespace}/{ref.name}", set()).add(name)
        source = csi_source(volume)
        if source is not None:
            self.handles.setdefault(f"{source[0]}/{source[1]}", set()).add(name)
        self._volume_changed(name)

    def drop_volume(self, name: str) -> None:
        self._unname(self.volumes.pop(name, None))
        self._volume_changed(name)

    def _unname(self, volume: PersistentVolume | None) -> None:
        """Take the volume out of the handle and claimRef indexes (`put_volume` puts it in)."""
        if volume is None:
            return
        source = csi_source(volume)
        if source is not None:
            leave(self.handles, f"{source[0]}/{source[1]}", volume.metadata.name)
        ref = volume.spec.claim_ref
        if ref is not None:
            leave(self._named, f"{ref.namespace}/{ref.name}", volume.metadata.name)

    def _volume_changed(self, name: str) -> None:
        self.version += 1
        self.volume_version += 1
        if len(self._changed) >= self.CHANGES_KEPT:
            self._changed = []
            self._changed_from = self.volume_version - 1
        self._changed.append(name)

    def changed_since(self, volume_version: int) -> set[str] | None:
        """The names of the volumes changed since `volume_version` (None: too far back to tell)."""
        if volume_version < self._changed_from:
            return None
        return set(self._changed[volume_version - self._changed_from:])

    def is_named(self, claim: str) -> bool:
        """Whether some volume's claimRef names `claim` (`namespace/name`)."""
        return claim in self._named

    def named(self, claim: str) -> list[PersistentVolume]:
        """The volumes whose claimRef names `claim` (`namespace/name`)."""
        return [self.volumes[name] for name in sorted(self._named.get(claim, ()))]

    def next_serial(self) -> int:
        self._serial += 1
        return self._serial

    def facts(self, volume: PersistentVolume) -> tuple[int | None, tuple[str, str] | None]:
        """The volume's storage capacity (None: not a quantity) and the (kubernetes.io/hostname or
        metadata.name, value) of the one node it is pinned to (None: not pinned to one)."""
        name = volume.metadata.name
        kept = self._facts.get(name)
        if kept is not None and kept[0] is volume:
            return kept[1], kept[2]
        capacity, pin = _storage(volume.spec.capacity), _pinned(volume_terms(volume))
        if len(self._facts) > 2 * len(self.volumes) + 1024:  # volumes deleted: let go of theirs
            self._facts = {key: value for key, value in self._facts.items() if key in self.volumes}
        self._facts[name] = (volume, capacity, pin)
        return capacity, pin

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


def csi_volumes(book: VolumeBook, pod: Pod) -> dict[str, tuple[str, str]]:
    """The CSI volumes the pod's claims use, unique name -> (driver, the claim's `namespace/name`), as
    NodeVolumeLimits counts them: a claim naming a PersistentVolume with spec.csi by `<driver>/<volumeHandle>`;
    one naming no volume, or one not found, by its StorageClass's provisioner as the driver and the claim as
    the volume (what will be provisioned for it); a claim not found, not the pod's own (a generic ephemeral
    one), without a class, of a class not found or without provisioner, or bound to a volume of another kind
    (local, nfs, ...: `csi_source`), is not counted. A class naming a migrated in-tree provisioner counts
    against its CSI driver (`MIGRATED_DRIVERS`)."""
    found: dict[str, tuple[str, str]] = {}
    for key, ephemeral in claim_keys(pod):
        claim = book.claims.get(key)
        if claim is None or (ephemeral and not _owned_by(claim, pod)):
            continue
        volume = book.volumes.get(claim.spec.volume_name) if claim.spec.volume_name else None
        if volume is not None:
            source = csi_source(volume)
            if source is not None:
                found[f"{source[0]}/{source[1]}"] = (source[0], key)
            continue
        class_name = claim_class(claim)
        storage_class = book.classes.get(class_name) if class_name else None
        if storage_class is not None and storage_class.provisioner:
            driver = MIGRATED_DRIVERS.get(storage_class.provisioner, storage_class.provisioner)
            # kube-scheduler names such a volume by a random prefix and the claim: unique to the claim.
            found[f"{driver}/<claim {key}>"] = (driver, key)
    return found


def csi_source(volume: PersistentVolume) -> tuple[str, str] | None:
    """The (driver, volume handle) a PersistentVolume is counted by: its spec.csi, or the CSI form of an
    in-tree source whose plugin migrated (`MIGRATED_DRIVERS`), as csi-translation-lib translates it; None for
    a volume of another kind (local, nfs, hostPath, ...) or one that does not translate."""
    spec = volume.spec
    if spec.csi is not None:
        return (spec.csi.driver, spec.csi.volume_handle) if spec.csi.driver and spec.csi.volume_handle else None
    handle = driver = ""
    if spec.aws_elastic_block_store is not None:
        handle, driver = _ebs_volume_id(spec.aws_elastic_block_store.volume_id), "ebs.csi.aws.com"
    elif spec.gce_persistent_disk is not None:
        handle, driver = _gce_volume_id(volume, spec.gce_persistent_disk.pd_name), "pd.csi.storage.gke.io"
    elif spec.azure_disk is not None:
        handle, driver = spec.azure_disk.disk_uri, "disk.csi.azure.com"
    elif spec.cinder is not None:
        handle, driver = spec.cinder.volume_id, "cinder.csi.openstack.org"
    return (driver, handle) if handle else None


def _ebs_volume_id(kubernetes_id: str) -> str:
    """An EBS volume id from the in-tree forms `aws://<zone>/vol-...`, `aws:///vol-...` and `vol-...` ("" when
    it is none of them: csi-translation-lib's KubernetesVolumeIDToEBSVolumeID refuses it)."""
    if not kubernetes_id.startswith("aws://"):
        return kubernetes_id
    path = kubernetes_id.removeprefix("aws://").partition("/")[2]
    return path if path.startswith("vol-") and "/" not in path else ""


def _gce_volume_id(volume: PersistentVolume, pd_name: str) -> str:
    """The GCE PD CSI handle of an in-tree disk: zonal by the PV's zone label, regional when it lists several
    zones of one region, else with the zone left UNSPECIFIED (csi-translation-lib's gce_pd.go)."""
    if not pd_name:
        return ""
    labels = volume.metadata.labels
    zones = (labels.get("failure-domain.beta.kubernetes.io/zone") or labels.get("topology.kubernetes.io/zone")
             or "").split(ZONES_DELIMITER)
    if len(zones) == 1 and zones[0]:
        return f"projects/{_GCE_UNSPECIFIED}/zones/{zones[0]}/disks/{pd_name}"
    if len(zones) > 1:
        regions = {"-".join(parts[:2]) for parts in (zone.split("-") for zone in zones) if len(parts) == 3}
        if len(regions) != 1 or any(len(zone.split("-")) != 3 for zone in zones):
            return ""  # csi-translation-lib fails to translate it: not counted
        return f"projects/{_GCE_UNSPECIFIED}/regions/{regions.pop()}/disks/{pd_name}"
    return f"projects/{_GCE_UNSPECIFIED}/zones/{_GCE_UNSPECIFIED}/disks/{pd_name}"


def attach_needs(book: VolumeBook, pod: Pod, key: str) -> tuple[AttachNeed, ...]:
    """Per CSI driver some node limits, the pod's volumes of it (`AttachNeed`): those of its claims that another
    pod names too, or whose disk another PersistentVolume points at too (`VolumeBook.handles`), are `shared`.
    () when none of its volumes is of a limited driver (no CSINode limits any)."""
    if not book.limited:
        return ()
    own: dict[str, int] = {}
    shared: dict[str, list[str]] = {}
    users = book.users
    for unique, (driver, claim) in csi_volumes(book, pod).items():
        if driver not in book.limited:
            continue
        others = users.get(claim, ())
        if len(others) > 1 or (others and key not in others) or len(book.handles.get(unique, ())) > 1:
            shared.setdefault(driver, []).append(unique)
        else:
            own[driver] = own.get(driver, 0) + 1
    return tuple(AttachNeed(driver=driver, own=own.get(driver, 0), shared=tuple(sorted(shared.get(driver, ()))))
                 for driver in sorted({*own, *shared}))


def _owned_by(claim: PersistentVolumeClaim, pod: Pod) -> bool:
    return any(owner.controller and owner.uid == pod.metadata.uid for owner in claim.metadata.owner_references)


def _shown(text: str) -> str:
    return text if len(text) <= 64 else text[:64] + "..."


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
             holder: Callable[[str], str] = lambda claim: "",
             spoken: Callable[[str], AbstractSet[str]] = lambda class_name: frozenset(),
             pod_key: str = "") -> VolumeNeeds:
    """What `pod`'s claims ask (see the module docstring). `unreadable`: the (kind, key) of objects whose
    latest version could not be decoded, so a claim that could not be read is named as such. `holder`: the
    key of another pod that holds a ReadWriteOncePod claim now ("" when none does). `spoken(class)`: the
    volumes of that class the claims of other pods placed already will get (`spoken_for`)."""
    if not pod.spec.volumes:
        return NO_NEEDS
    reach: list[VolumeReach] = []
    provision: list[str] = []
    static: list[str] = []
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
            match = static_match(book, claim, key)
            free = match.reach
            if not match.entries:
                return VolumeNeeds(blocked=(
                    f'{NO_VOLUME_TO_BIND}: no PersistentVolume of StorageClass "{class_name}" (WaitForFirstConsumer, '
                    f'no provisioner) may be bound to persistentvolumeclaim "{name}" ({_wanted(claim)})'))
            taken = spoken(class_name)
            if taken and not match.names().isdisjoint(taken):
                free = static_reach([volume for _, name, volume in match.entries if name not in taken])
            reach.append(free)
            static.append(key)
            continue
        terms = _topology_terms(storage_class.allowed_topologies)
        if terms is not None:
            reach.append(VolumeReach(terms=terms, zones=(), reason=NO_VOLUME_TO_BIND))
        provision.append(key)
    attach = attach_needs(book, pod, pod_key) if book.limited else ()
    return VolumeNeeds(reach=tuple(reach), provision=tuple(provision), static=tuple(static), attach=attach)


class Candidates:
    """The volumes made in advance that a claim may be bound to, wherever they are (kube-scheduler's
    FindMatchingVolume but for the node): the one pre-bound to it if there is one, else every match (module
    docstring), as (capacity, name, volume) smallest first, then by name, the order the binder takes them
    in (`entries`); their `static_reach` (`reach`); and which of them reach a node (`reaching`), found
    without a pass over all of them: a volume pinned to one node is indexed by that node's hostname label
    or name, the rest (`elsewhere`) are few."""

    __slots__ = ("_names", "elsewhere", "entries", "pinned", "reach")

    def __init__(self, book: VolumeBook, volumes: list[tuple[int, str, PersistentVolume]]) -> None:
        """`volumes`: (capacity, name, volume), sorted."""
        self._names: frozenset[str] | None = None
        self.entries = volumes
        self.pinned: dict[tuple[str, str], list[tuple[int, str, PersistentVolume]]] = {}
        self.elsewhere: list[tuple[int, str, PersistentVolume]] = []
        by_hostname: dict[str, int] = {}
        by_name: dict[str, int] = {}
        for entry in volumes:  # smallest first: so is each list
            pin = book.facts(entry[2])[1]
            if pin is None:
                self.elsewhere.append(entry)
            else:
                self.pinned.setdefault(pin, []).append(entry)
                into = by_name if pin[0] == HOSTNAME_FIELD else by_hostname
                into[pin[1]] = into.get(pin[1], 0) + 1
        self.reach = _reach(book, by_hostname, by_name, tuple(volume_terms(entry[2]) for entry in self.elsewhere))

    def names(self) -> frozenset[str]:
        """The candidates' names (made on first use)."""
        if self._names is None:
            self._names = frozenset(name for _, name, _ in self.entries)
        return self._names

    def updated(self, book: VolumeBook, gone: set[str], added: list[tuple[int, str, PersistentVolume]]
                ) -> Candidates:
        """These candidates without the volumes named in `gone`, with `added` (sorted): what a few volume
        changes make of them, derived from these (a pass over the names, no volume read again)."""
        new = Candidates.__new__(Candidates)
        new._names = None
        kept = [entry for entry in self.entries if entry[1] not in gone] if gone else list(self.entries)
        if added:
            kept.extend(added)
            kept.sort(key=_size_then_name)
        new.entries = kept
        pinned = dict(self.pinned)
        by_hostname, by_name = dict(self.reach.by_hostname), dict(self.reach.by_name)
        touched: set[tuple[str, str]] = set()
        for entry in self.entries if gone else ():
            if entry[1] in gone:
                pin = book.facts(entry[2])[1] if entry[2] is book.volumes.get(entry[1]) else _pin_of(entry[2])
                if pin is not None:
                    touched.add(pin)
                    into = by_name if pin[0] == HOSTNAME_FIELD else by_hostname
                    into[pin[1]] -= 1
                    if not into[pin[1]]:
                        del into[pin[1]]
        for entry in added:
            pin = book.facts(entry[2])[1]
            if pin is not None:
                touched.add(pin)
                into = by_name if pin[0] == HOSTNAME_FIELD else by_hostname
                into[pin[1]] = into.get(pin[1], 0) + 1
        for pin in touched:
            entries = [entry for entry in pinned.get(pin, ()) if entry[1] not in gone]
            entries += (entry for entry in added if book.facts(entry[2])[1] == pin)
            entries.sort(key=_size_then_name)
            if entries:
                pinned[pin] = entries
            else:
                pinned.pop(pin, None)
        new.pinned = pinned
        elsewhere = [entry for entry in self.elsewhere if entry[1] not in gone]
        unpinned = [entry for entry in added if book.facts(entry[2])[1] is None]
        if unpinned:
            elsewhere.extend(unpinned)
            elsewhere.sort(key=_size_then_name)
        new.elsewhere = elsewhere
        new.reach = _reach(book, by_hostname, by_name, tuple(volume_terms(entry[2]) for entry in elsewhere))
        return new

    def reaching(self, name: str, labels: Mapping[str, str]) -> list[PersistentVolume]:
        """The candidates whose node affinity admits the node, smallest first (then by name)."""
        found = [*self.pinned.get((HOSTNAME_FIELD, name), ())]
        host = labels.get(HOSTNAME_LABEL)
        if host is not None:
            found += self.pinned.get((HOSTNAME_LABEL, host), ())
        found += (entry for entry in self.elsewhere if reaches_node(entry[2], name, labels))
        found.sort(key=_size_then_name)
        return [volume for _, _, volume in found]


def _size_then_name(entry: tuple[int, str, PersistentVolume]) -> tuple[int, str]:
    return entry[0], entry[1]


def _pin_of(volume: PersistentVolume) -> tuple[str, str] | None:
    return _pinned(volume_terms(volume))


def static_match(book: VolumeBook, claim: PersistentVolumeClaim, key: str) -> Candidates:
    """The `Candidates` of `claim` (held under `key`). The pods of a StatefulSet or a gang ask alike of a
    volume: what one asks is kept, and followed through the changes of the volumes."""
    spec = claim.spec
    requested = _storage(spec.resources.requests if spec.resources is not None else {})
    if requested is None:
        return Candidates(book, [])
    mode = spec.volume_mode or FILESYSTEM
    attributes = spec.volume_attributes_class_name or ""
    uid = claim.metadata.uid
    for volume in book.named(key):  # pre-bound to this claim: that volume or none of them
        ref = volume.spec.claim_ref
        if ref is not None and (not ref.uid or ref.uid == uid) and _fits(book, volume, requested, mode, attributes):
            return Candidates(book, [(book.facts(volume)[0] or 0, volume.metadata.name, volume)])
    class_name = claim_class(claim)
    match_key = (class_name, requested, tuple(spec.access_modes), mode, attributes,
                 _SELECTOR_KEY.encode(spec.selector) if spec.selector is not None else b"")
    version = book.volume_version

    def qualifies(volume: PersistentVolume) -> bool:
        return (volume.spec.claim_ref is None and volume.status.phase == VOLUME_AVAILABLE
                and _fits(book, volume, requested, mode, attributes)
                and (spec.selector is None or selects(spec.selector, volume.metadata.labels))
                and volume_class(volume) == class_name
                and all(wanted in volume.spec.access_modes for wanted in spec.access_modes))

    kept = book._matches.get(match_key)
    if kept is not None and kept[0] == version:
        return kept[1]
    changed = book.changed_since(kept[0]) if kept is not None else None
    if kept is not None and changed is not None:
        added = [(book.facts(held)[0] or 0, name, held) for name in changed
                 if (held := book.volumes.get(name)) is not None and qualifies(held)]
        added.sort(key=_size_then_name)
        candidates = kept[1].updated(book, changed, added)
    else:
        found = [(book.facts(volume)[0] or 0, name, volume) for name, volume in book.volumes.items()
                 if qualifies(volume)]
        found.sort(key=_size_then_name)
        candidates = Candidates(book, found)
    if len(book._matches) >= VolumeBook.MATCHES_KEPT and match_key not in book._matches:
        book._matches.clear()
    book._matches[match_key] = (version, candidates)
    return candidates


def _fits(book: VolumeBook, volume: PersistentVolume, requested: int, mode: str, attributes: str) -> bool:
    """Big enough, of the claim's volumeMode and attributes class, not being deleted."""
    spec = volume.spec
    capacity = book.facts(volume)[0]
    return (capacity is not None and capacity >= requested and (spec.volume_mode or FILESYSTEM) == mode
            and (spec.volume_attributes_class_name or "") == attributes and volume.metadata.deletion_timestamp is None)


def static_reach(candidates: Iterable[PersistentVolume]) -> VolumeReach:
    """Where a claim bound to one of `candidates` may go, counted per node (`VolumeReach`)."""
    by_hostname: dict[str, int] = {}
    by_name: dict[str, int] = {}
    elsewhere: list[tuple[NodeSelectorTerm, ...] | None] = []
    for volume in candidates:
        terms = volume_terms(volume)
        pin = _pinned(terms)
        if pin is None:
            elsewhere.append(terms)
        else:
            into = by_name if pin[0] == HOSTNAME_FIELD else by_hostname
            into[pin[1]] = into.get(pin[1], 0) + 1
    return _reach(None, by_hostname, by_name, tuple(elsewhere))


def _reach(book: VolumeBook | None, by_hostname: dict[str, int], by_name: dict[str, int],
           elsewhere: tuple[tuple[NodeSelectorTerm, ...] | None, ...]) -> VolumeReach:
    """A static reach, numbered by `book` (never twice the same number); without a book (a reach made for one
    pod), digested from its counts."""
    if book is not None:
        digest = f"#{book.next_serial()}"
    else:
        digest = hashlib.blake2b(_SELECTOR_KEY.encode((by_hostname, by_name, elsewhere)), digest_size=16).hexdigest()
    return VolumeReach(terms=None, zones=(), reason=NO_VOLUME_TO_BIND, static=True, by_hostname=by_hostname,
                       by_name=by_name, elsewhere=elsewhere, digest=digest)


def spoken_for(book: VolumeBook, waiting: Iterable[tuple[str, str, Mapping[str, str], list[str]]]
               ) -> dict[str, list[str]]:
    """The volumes made in advance that the unbound claims of pods placed already will get, by pod: for each
    (pod key, its node's name, the node's labels, its claims waiting for such a volume), in that order, each
    claim (smallest request first) given the smallest of its candidates that reaches the node and is not
    given yet, as the loop chooses them before the Bindings (placement/volume_binding.py). Until a volume
    names its claim, no other claim may count on it."""
    given: set[str] = set()
    by_pod: dict[str, list[str]] = {}
    for pod_key, node_name, labels, claims in waiting:
        ordered = sorted(claims, key=lambda key: (_claim_request(book, key), key))
        for claim_key in ordered:
            claim = book.claims.get(claim_key)
            if claim is None:
                continue
            for volume in static_match(book, claim, claim_key).reaching(node_name, labels):
                name = volume.metadata.name
                if name not in given:
                    given.add(name)
                    by_pod.setdefault(pod_key, []).append(name)
                    break
    return by_pod


def reaches_node(volume: PersistentVolume, name: str, labels: Mapping[str, str]) -> bool:
    """The volume's required node affinity admits the node (kube-scheduler's CheckNodeAffinity)."""
    terms = volume_terms(volume)
    return terms is None or any(term_matches(term, name, labels) for term in terms)


def claim_request(claim: PersistentVolumeClaim) -> int:
    """The storage the claim asks for (milli-units; 0 when absent or not a quantity)."""
    return _storage(claim.spec.resources.requests if claim.spec.resources is not None else {}) or 0


def _claim_request(book: VolumeBook, key: str) -> int:
    claim = book.claims.get(key)
    return claim_request(claim) if claim is not None else 0


def volume_terms(volume: PersistentVolume) -> tuple[NodeSelectorTerm, ...] | None:
    """The volume's required node terms (None: it may be used from any node)."""
    affinity = volume.spec.node_affinity
    required = affinity.required if affinity is not None else None
    return tuple(required.node_selector_terms) if required is not None else None


def volume_class(volume: PersistentVolume) -> str:
    """The volume's StorageClass name, the deprecated annotation first, as the PV controller reads it."""
    annotated = volume.metadata.annotations.get(BETA_STORAGE_CLASS_ANNOTATION)
    return annotated if annotated is not None else volume.spec.storage_class_name


def refers_to(volume: PersistentVolume, claim: str, uid: str) -> bool:
    """Whether the volume's claimRef names `claim` (`namespace/name`), without a uid or with `uid`."""
    ref = volume.spec.claim_ref
    return (ref is not None and f"{ref.namespace}/{ref.name}" == claim and (not ref.uid or not uid or ref.uid == uid))


def _pinned(terms: tuple[NodeSelectorTerm, ...] | None) -> tuple[str, str] | None:
    """(kubernetes.io/hostname or metadata.name, the value) of terms that admit exactly one node by it."""
    if terms is None or len(terms) != 1:
        return None
    term = terms[0]
    requirements = [*term.match_expressions, *term.match_fields]
    if len(requirements) != 1:
        return None
    requirement = requirements[0]
    key = HOSTNAME_FIELD if term.match_fields else HOSTNAME_LABEL
    if requirement.key != key or requirement.operator != "In" or len(requirement.values) != 1:
        return None
    return key, requirement.values[0]


def _storage(amounts: Mapping[str, str]) -> int | None:
    """The storage amount (milli-units; 0 when absent), None when it is not a quantity."""
    raw = amounts.get(STORAGE)
    if raw is None:
        return 0
    try:
        return parse_quantity(raw)
    except QuantityError:
        return None


def _wanted(claim: PersistentVolumeClaim) -> str:
    """What the claim asks of a volume, as a user reads it."""
    spec = claim.spec
    asked = spec.resources.requests.get(STORAGE, "0") if spec.resources is not None else "0"
    parts = [f"storage {asked if len(asked) <= 32 else asked[:32] + '...'}"]  # any quantity the API admits
    if spec.access_modes:
        parts.append(f"access modes {', '.join(spec.access_modes)}")
    if spec.volume_mode and spec.volume_mode != FILESYSTEM:
        parts.append(f"volumeMode {spec.volume_mode}")
    if spec.selector is not None:
        parts.append("a selector on its labels")
    return "; ".join(parts)


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
    terms = volume_terms(volume)
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
