"""List+watch every kind in `events.ingest.KINDS` and record what the API says as events.

For each kind a `KindWatcher` lists (paginated, `limit`/`continue`), records an upsert for every
object and a deletion for every object it knew that the list no longer holds, then watches from the
list's resourceVersion with bookmarks on. Each watch event is decoded from the raw JSON line with
msgspec (`upsert_event`: a bad object becomes `ObjectUndecodable`, never an exception) and handed to
the recorder, which appends it to the log before folding it (`daemon.scheduling.journal.Journal`).

Failure handling:
- 410 Gone (on the watch request or as an ERROR event): relist; objects missing after the relist
  become deletions, so nothing deleted while we were away is kept.
- A relist records only what the state does not already hold as it is (a listed object equal to the
  version held, resourceVersion included, and not marked broken, is left out): after a restart from
  a snapshot, the ~100,000 unchanged objects of a large cluster are neither logged nor folded again.
  A list that left objects out says so in a `watch.relisted` line: how many it held, left out,
  recorded and deleted.
- A dropped connection or a watch that times out: watch again from the last resourceVersion seen
  (bookmarks keep it fresh); errors back off exponentially with jitter.
- 404 on the list of a custom resource (CRD not installed): logged once, retried slowly, not fatal;
  the kind counts as synced so readiness does not wait for a CRD that may never come. A kind with
  `older_api_versions` (Kueue's Topology: v1beta2, else v1beta1; Kubernetes' PodGroup: v1beta1, else
  v1alpha3, else v1alpha2) is listed and watched at the first
  version served; it is missing only when none is.
- Lines of any length are read (a 1 MiB pod in one watch line is fine): the reader splits the byte
  stream itself instead of relying on a bounded readline.

Every completed list (the first sync, after a 410, after a long outage) counts one
`toposched_watch_relists_total{kind}`.

Must never: write to the API, or fold an event that was not first handed to the recorder.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

import aiohttp
import anyio
import msgspec
import structlog

from daemon.config import TimeoutConfig
from daemon.kube.client import KubeApiError, KubeClient, backoff_delay, decode_status
from daemon.telemetry.metrics import Metrics
from events.ingest import KINDS, KindInfo, decode_object, delete_event
from events.model import Event, ObjectUndecodable
from events.objects import KUBEFLOW_JOB_KINDS, ObjectMeta
from state.cluster import ClusterState

log = structlog.get_logger("toposched.watch")

LIST_PAGE_SIZE = 500


class Recorder(Protocol):
    """Where watched events go: appended to the log, then folded."""

    async def record(self, event: Event) -> None: ...

    async def record_many(self, events: Sequence[Event]) -> None:
        """`record` each, in order (a chunk of a watch stream, a page of a list: appended in one go)."""
        ...

    async def record_listed(self, events: Sequence[Event]) -> int:
        """`record_many` of a page of a list, but for the objects the state already holds unchanged
        (`ClusterState.holds_unchanged`); returns how many of those were left out."""
        ...


class _ListMeta(msgspec.Struct, frozen=True):
    resourceVersion: str = ""
    # `continue` is a Python keyword: read it under another name.
    continue_: str = msgspec.field(default="", name="continue")


class _List(msgspec.Struct, frozen=True):
    metadata: _ListMeta = _ListMeta()
    items: list[msgspec.Raw] = []


class _WatchEvent(msgspec.Struct, frozen=True):
    type: str = ""
    object: msgspec.Raw = msgspec.Raw(b"{}")


class _IdentityMeta(msgspec.Struct, frozen=True, rename="camel"):
    """What a watcher reads of every object itself: who it is and its version (not its labels)."""

    name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""


class _Identity(msgspec.Struct, frozen=True):
    metadata: _IdentityMeta = _IdentityMeta()


# Who an object is when not even its metadata decodes (its ObjectUndecodable names it as best it can).
_UNNAMED = _IdentityMeta(name="<unnamed>")
_list_decoder = msgspec.json.Decoder(_List)
_event_decoder = msgspec.json.Decoder(_WatchEvent)
_identity_decoder = msgspec.json.Decoder(_Identity)


class Gone(Exception):
    """The resourceVersion we watch from is too old (410): relist."""


class CrdMissing(Exception):
    """The list answered 404: the kind's CRD is not installed."""


def collection_path(info: KindInfo, api_version: str = "") -> str:
    """The cluster-wide collection URL of a kind (all namespaces for namespaced kinds), at its own apiVersion
    or at `api_version` (one of its `older_api_versions`)."""
    group, _, version = (api_version or info.api_version).rpartition("/")
    if group:
        return f"/apis/{group}/{version}/{info.plural}"
    return f"/api/{version}/{info.plural}"


class ByteSource(Protocol):
    """What the line splitter reads from (an aiohttp StreamReader in the daemon)."""

    async def readany(self) -> bytes: ...


async def split_line_batches(reader: ByteSource) -> AsyncIterator[list[bytes]]:
    """Yield the lines (of any length) each chunk of a byte stream completes, as one list per chunk: the
    watch events that arrived together are recorded together."""
    buffer = bytearray()
    while True:
        chunk = await reader.readany()
        if not chunk:
            if buffer.strip():
                yield [bytes(buffer)]
            return
        newline = chunk.find(b"\n")
        if newline < 0:
            buffer += chunk
            continue
        lines: list[bytes] = []
        buffer += chunk[:newline]
        if buffer.strip():
            lines.append(bytes(buffer))
        buffer.clear()
        start = newline + 1
        while True:
            newline = chunk.find(b"\n", start)
            if newline < 0:
                buffer += chunk[start:]
                break
            line = chunk[start:newline]
            if line.strip():
                lines.append(line)
            start = newline + 1
        if lines:
            yield lines


class KindWatcher:
    """Keeps one kind's objects flowing into the recorder for as long as it runs."""

    def __init__(
        self,
        client: KubeClient,
        info: KindInfo,
        recorder: Recorder,
        timeouts: TimeoutConfig,
        known: dict[str, str] | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.client = client
        self.info = info
        self.recorder = recorder
        self.timeouts = timeouts
        self._relisted = metrics.watch_relists.labels(info.name) if metrics is not None else None
        self._unchanged = metrics.watch_relist_unchanged.labels(info.name) if metrics is not None else None
        self.known: dict[str, str] = dict(known or {})  # key -> uid of every object the state holds
        self.resource_version = ""
        self.synced = anyio.Event()
        self.missing_crd = False
        self.api_version = info.api_version  # where the kind is listed and watched (see `relist`)
        self.relists = 0
        self.unchanged_listed = 0  # objects relists found held unchanged, over this watcher's life
        self.watch_restarts = 0
        self.lines_seen = 0

    # ------------------------------------------------------------------ list

    async def relist(self) -> None:
        """List everything, record upserts, record deletions for what disappeared; set resourceVersion.

        A kind with `older_api_versions` is listed at the version it was last listed at, else at the first
        one served (newest first): a cluster running an older release of the kind's project serves only an
        older version. CrdMissing when none is served."""
        versions = (self.info.api_version, *self.info.older_api_versions)
        listed_at = self.api_version
        for api_version in (listed_at, *(v for v in versions if v != listed_at)):
            self.api_version = api_version  # what the objects listed are decoded as (`_upsert_of`)
            try:
                await self._relist_at(api_version)
            except CrdMissing:
                continue
            return
        self.api_version = listed_at
        raise CrdMissing(collection_path(self.info))

    async def _relist_at(self, api_version: str) -> None:
        path = collection_path(self.info, api_version)
        seen: dict[str, str] = {}
        continue_token = ""
        resource_version = ""
        unchanged = 0  # listed objects the state holds as they are: not recorded again
        while True:
            query = [("limit", str(LIST_PAGE_SIZE))]
            if continue_token:
                query.append(("continue", continue_token))
            response = await self.client.call("GET", path, query=query)
            if response.status == 404 and self.info.group:
                raise CrdMissing(path)
            if response.status == 410:
                # The continue token expired mid-list: start the list again.
                seen.clear()
                continue_token = ""
                unchanged = 0
                continue
            if not response.ok:
                raise KubeApiError("GET", path, response.status, response.reason())
            page = _list_decoder.decode(response.body)
            del response
            # Recorded page by page, not after the whole list: 100,000 decoded pods held at once, and
            # then slimmed down by the fold, left ~100 MiB of holes the process never returned. An
            # upsert recorded before a 410 restarts the list is still true (and recorded again).
            upserts: list[Event] = []
            for raw in page.items:
                upsert, meta = self._upsert_of(bytes(raw))
                seen[_key(meta)] = meta.uid
                upserts.append(upsert)
            unchanged += await self.recorder.record_listed(upserts)
            del upserts
            continue_token = page.metadata.continue_
            resource_version = page.metadata.resourceVersion or resource_version
            del page
            if not continue_token:
                break
        gone = sorted(set(self.known) - set(seen))
        for key in gone:
            namespace, _, name = key.rpartition("/")
            await self.recorder.record(
                delete_event(self.info, ObjectMeta(name=name, namespace=namespace, uid=self.known[key]))
            )
        self.known = seen
        self.resource_version = resource_version
        self.relists += 1
        self.unchanged_listed += unchanged
        if self._relisted is not None:
            self._relisted.inc()
        if self._unchanged is not None:
            self._unchanged.inc(unchanged)
        if unchanged:  # a first list into an empty state (a cold start, `toposched topology show`) says nothing
            log.info("watch.relisted", kind=self.info.name, objects=len(seen), unchanged=unchanged,
                     recorded=len(seen) - unchanged, deleted=len(gone))

    # ------------------------------------------------------------------ watch

    async def watch_once(self) -> None:
        """One watch request from `resource_version`, until the server closes it. Raises Gone on 410."""
        path = collection_path(self.info, self.api_version)
        query = [
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("resourceVersion", self.resource_version),
            ("timeoutSeconds", str(self.timeouts.watch_seconds)),
        ]
        async with self.client.stream(path, query, read_timeout=self.timeouts.watch_seconds + 30) as (status, body):
            if status == 410:
                raise Gone(path)
            if isinstance(body, bytes):
                if status == 404 and self.info.group:
                    raise CrdMissing(path)
                raise KubeApiError("GET", path, status, decode_status(body).message)
            async for lines in split_line_batches(body):
                await self._handle_lines(lines)

    async def _handle_lines(self, lines: list[bytes]) -> None:
        """Record the events of lines that arrived together, in one go; an ERROR line raises once the
        events before it are recorded."""
        events: list[Event] = []
        try:
            for line in lines:
                event = self._event_of(line)
                if event is not None:
                    events.append(event)
        finally:
            if events:
                await self.recorder.record_many(events)

    def _event_of(self, line: bytes) -> Event | None:
        """The event one watch line says (None: a bookmark, or a line that is not JSON, logged)."""
        self.lines_seen += 1
        try:
            event = _event_decoder.decode(line)
        except (msgspec.DecodeError, msgspec.ValidationError) as error:
            log.warning("watch.bad_line", kind=self.info.name, error=str(error), line=line[:200])
            return None
        raw = bytes(event.object)
        if event.type == "ERROR":
            status = decode_status(raw)
            if status.code == 410:
                raise Gone(status.message)
            raise KubeApiError("WATCH", collection_path(self.info, self.api_version), status.code, status.message)
        upsert: Event | None = None
        if event.type in ("ADDED", "MODIFIED"):
            upsert, meta = self._upsert_of(raw)
        else:
            try:
                meta = _identity_decoder.decode(raw).metadata if raw else _IdentityMeta()
            except (msgspec.DecodeError, msgspec.ValidationError) as error:  # no API server sends it; go on
                log.warning("watch.bad_line", kind=self.info.name, error=str(error), line=line[:200])
                return None
        if meta.resource_version:
            self.resource_version = meta.resource_version
        if event.type == "BOOKMARK":
            return None
        key = _key(meta)
        if event.type == "DELETED":
            self.known.pop(key, None)
            return delete_event(self.info, ObjectMeta(name=meta.name, namespace=meta.namespace, uid=meta.uid))
        if upsert is not None and meta is not _UNNAMED:
            self.known[key] = meta.uid
        return upsert

    def _upsert_of(self, raw: bytes) -> tuple[Event, ObjectMeta | _IdentityMeta]:
        """The upsert of an object and its identity: read from the decoded object, so the JSON is walked once
        (a pod's is kilobytes), or, when it does not decode, by the identity decoder alone."""
        decoded = decode_object(self.info, raw, self.api_version)
        if isinstance(decoded, ObjectUndecodable):
            try:
                return decoded, _identity_decoder.decode(raw).metadata
            except (msgspec.DecodeError, msgspec.ValidationError):
                return decoded, _UNNAMED
        return self.info.upsert(decoded), decoded.metadata

    # ------------------------------------------------------------------ the loop

    def _backoff(self, failures: int) -> float:
        return backoff_delay(failures, self.timeouts.backoff_initial_seconds, self.timeouts.backoff_max_seconds)

    async def sync(self) -> None:
        """The first list (retried until it works); marks the kind synced."""
        failures = 0
        while True:
            try:
                await self.relist()
            except CrdMissing:
                if not self.missing_crd:
                    log.warning("watch.crd_missing", kind=self.info.name, path=collection_path(self.info),
                                retry_seconds=self.timeouts.missing_crd_retry_seconds)
                self.missing_crd = True
                self.synced.set()
                return
            except KubeApiError as error:
                delay = self._backoff(failures)
                failures += 1
                log.warning("watch.list_failed", kind=self.info.name, error=str(error), retry_in=round(delay, 2))
                await anyio.sleep(delay)
                continue
            if self.missing_crd:
                log.info("watch.crd_appeared", kind=self.info.name)
            self.missing_crd = False
            self.synced.set()
            return

    async def run(self) -> None:
        """Sync (unless done), then watch forever: relist on 410, back off on errors."""
        if not self.synced.is_set():
            await self.sync()
        failures = 0
        while True:
            if self.missing_crd:
                await anyio.sleep(self.timeouts.missing_crd_retry_seconds)
                await self.sync()
                continue
            try:
                started, seen = anyio.current_time(), self.lines_seen
                await self.watch_once()
                self.watch_restarts += 1
                if self.lines_seen == seen and anyio.current_time() - started < 1.0:
                    # Closed at once with nothing said: back off rather than spin on a misbehaving server.
                    await anyio.sleep(self._backoff(failures))
                    failures += 1
                else:
                    failures = 0
            except Gone:
                log.info("watch.gone_relisting", kind=self.info.name, resource_version=self.resource_version)
                self.resource_version = ""
                await self._relist_with_retry()
            except CrdMissing:
                self.missing_crd = True
            except (KubeApiError, aiohttp.ClientError, TimeoutError, OSError) as error:
                delay = self._backoff(failures)
                failures += 1
                self.watch_restarts += 1
                log.warning("watch.reconnect", kind=self.info.name, error=str(error), retry_in=round(delay, 2))
                await anyio.sleep(delay)
                if failures >= 3:
                    # A long outage: the resourceVersion may be compacted by now; a relist is cheap and certain.
                    await self._relist_with_retry()

    async def _relist_with_retry(self) -> None:
        failures = 0
        while True:
            try:
                await self.relist()
                return
            except CrdMissing:
                self.missing_crd = True
                return
            except KubeApiError as error:
                delay = self._backoff(failures)
                failures += 1
                log.warning("watch.relist_failed", kind=self.info.name, error=str(error), retry_in=round(delay, 2))
                await anyio.sleep(delay)


def _key(meta: ObjectMeta | _IdentityMeta) -> str:
    return f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name


class Watchers:
    """All kinds' watchers: sync them in KINDS order (nodes before pods), then watch them all."""

    def __init__(
        self,
        client: KubeClient,
        recorder: Recorder,
        timeouts: TimeoutConfig,
        known: Callable[[KindInfo], dict[str, str]] | None = None,
        kinds: Iterable[KindInfo] = KINDS,
        metrics: Metrics | None = None,
    ) -> None:
        self.watchers = [
            KindWatcher(client, info, recorder, timeouts, known(info) if known else None, metrics) for info in kinds
        ]
        self.synced = anyio.Event()

    async def run(self, on_synced: Callable[[], Awaitable[None]] | None = None) -> None:
        for watcher in self.watchers:
            await watcher.sync()
        self.synced.set()
        log.info("watch.synced", kinds=[w.info.name for w in self.watchers if not w.missing_crd],
                 missing_crds=[w.info.name for w in self.watchers if w.missing_crd])
        if on_synced is not None:
            await on_synced()
        async with anyio.create_task_group() as group:
            for watcher in self.watchers:
                group.start_soon(watcher.run)


def known_from_state(state: ClusterState) -> Callable[[KindInfo], dict[str, str]]:
    """What a restored state holds of each kind (key -> uid): a relist turns the missing into deletions."""

    def known(info: KindInfo) -> dict[str, str]:
        return HELD_BY_KIND[info.name](state)

    return known


def _uids(objects: Mapping[str, Any]) -> dict[str, str]:
    return {key: obj.metadata.uid for key, obj in objects.items()}


def _kubeflow_jobs_held(kind: str) -> Callable[[ClusterState], dict[str, str]]:
    """The Kubeflow training jobs of one kind the state holds (they share `ClusterState.kubeflow_jobs`)."""
    return lambda state: {key: job.metadata.uid for (held, key), job in state.kubeflow_jobs.items() if held == kind}


# Per kind (`events.ingest.KINDS`): what the state holds of it, key -> uid. Every kind has an entry (a test
# checks), so an object deleted while the daemon was down is never kept because its kind was forgotten.
HELD_BY_KIND: dict[str, Callable[[ClusterState], dict[str, str]]] = {
    "Node": lambda state: {name: node.obj.metadata.uid for name, node in state.nodes.items()},
    "Pod": lambda state: {key: pod.uid for key, pod in state.pods.items() if not pod.removed},
    "PodGroup": lambda state: _uids(state.pod_groups),
    "VolcanoPodGroup": lambda state: _uids(state.volcano_pod_groups),
    "SchedulerPluginsPodGroup": lambda state: _uids(state.scheduler_plugins_pod_groups),
    "KubernetesPodGroup": lambda state: _uids(state.kube_pod_groups),
    "CompositePodGroup": lambda state: _uids(state.composite_pod_groups),
    "Workload": lambda state: _uids(state.workloads),
    "ClusterNetworkTopology": lambda state: _uids(state.network_topologies),
    "HyperNode": lambda state: _uids(state.hyper_nodes),
    "KueueTopology": lambda state: _uids(state.kueue_topologies),
    "KaiTopology": lambda state: _uids(state.kai_topologies),
    "KaiPodGroup": lambda state: _uids(state.kai_pod_groups),
    "PriorityClass": lambda state: _uids(state.priority_classes),
    "ElasticQuota": lambda state: _uids(state.quotas.elastic_quotas),
    "CapacityElasticQuota": lambda state: _uids(state.quotas.capacity_quotas),
    "Queue": lambda state: _uids(state.quotas.queues),
    "KaiQueue": lambda state: _uids(state.quotas.kai_queues),
    "StorageClass": lambda state: _uids(state.volumes.classes),
    "CSINode": lambda state: _uids(state.volumes.csi_nodes),
    "PersistentVolume": lambda state: _uids(state.volumes.volumes),
    "PersistentVolumeClaim": lambda state: _uids(state.volumes.claims),
    "PodDisruptionBudget": lambda state: {key: budget.metadata.uid for budgets in state.budgets.values()
                                          for key, budget in budgets.items()},
    "VolcanoJob": lambda state: _uids(state.volcano_jobs),
    **{kind: _kubeflow_jobs_held(kind) for kind, _ in KUBEFLOW_JOB_KINDS},
}
