"""The daemon's configuration: one typed struct, read from a YAML file and overridden by flags.

`load_config(path, overrides)` is the only way a `DaemonConfig` is made at start-up. The YAML keys are
the struct's field names (snake_case); unknown keys, wrong types and out-of-range values are rejected
with a `ConfigError` naming the key (`leader_election.lease_duration_seconds: expected a number >= 1,
got 0`), so a typo in a ConfigMap stops the daemon at once instead of being silently ignored. So is a
file that is not a config at all, in one line: not UTF-8 text (a binary), not YAML (with the line and
column), nested deeper than any key goes (10,000 nested lists), or holding an infinite or NaN number
(`.inf`, `.nan`: no timeout or size is infinite).

Example (every key optional; these are the defaults):

    kubeconfig: ""              # path; "" = in-cluster if available, else ~/.kube/config
    context: ""                 # kubeconfig context ("" = current)
    in_cluster: false           # force the service-account configuration
    scheduler_name: toposched
    kai_node_pool_label: kai.scheduler/node-pool  # the node label naming KAI node pools (KAI's
                                # nodePoolLabelKey); "" = no pools, every node in one
    log_dir: /var/lib/toposched/log
    fsync: interval:10ms        # always | never | interval:<N>ms (events.log.FsyncPolicy)
    bind_concurrency: 64
    address: 0.0.0.0:10251      # /metrics, /healthz, /readyz
    leader_election:
      enabled: true
      lease_name: toposched
      lease_namespace: kube-system
      identity: ""              # "" = hostname_pid
      lease_duration_seconds: 15
      renew_deadline_seconds: 10
      retry_period_seconds: 2
    timeouts:
      request_seconds: 30
      watch_seconds: 300
      backoff_initial_seconds: 0.5
      backoff_max_seconds: 30
      missing_crd_retry_seconds: 60
      bind_retry_attempts: 5
      volume_binding_seconds: 600  # how long a plan's WaitForFirstConsumer claims may take to be provisioned
      not_ready_report_seconds: 5  # a gang's pods wait this long for its missing members before they are
                                   # marked PodScheduled=False/NotReadyForScheduling (kube-scheduler's 5 s)
    event_log:
      max_record_bytes: 1048576       # an object bigger than this once slimmed is logged as its core
      retention_bytes: 1073741824     # history older than the newest snapshot kept, at most this many bytes
      retention_seconds: 604800       # ... and at most this old (7 days)
      on_corruption: recover          # recover | refuse: a damaged log is moved aside and rebuilt, or stops the daemon

Pure: reads the one file it is given, never the network, never the environment.
"""

from __future__ import annotations

import math
import os
import re
import reprlib
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
import yaml

from events.log import MAX_RECORD_BYTES, EventLogError, FsyncPolicy
from events.objects import KAI_NODE_POOL_LABEL
from state.topology_validation import label_key_problem

MAX_DEPTH = 16  # keys go 2 levels deep; anything far deeper is not a config (and must not reach a recursion)
PositiveInt = Annotated[int, msgspec.Meta(ge=1)]
PositiveFloat = Annotated[float, msgspec.Meta(gt=0)]


class ConfigError(Exception):
    """The configuration cannot be used; the message names the key and what is wrong with it."""

    def __init__(self, key: str, problem: str) -> None:
        self.key = key
        self.problem = problem
        super().__init__(f"{key}: {problem}" if key else problem)


class _Section(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    pass


class LeaderElectionConfig(_Section, frozen=True):
    enabled: bool = True
    lease_name: str = "toposched"
    lease_namespace: str = "kube-system"
    identity: str = ""
    lease_duration_seconds: PositiveFloat = 15.0
    renew_deadline_seconds: PositiveFloat = 10.0
    retry_period_seconds: PositiveFloat = 2.0

    def holder_identity(self) -> str:
        return self.identity or f"{socket.gethostname()}_{os.getpid()}"


class TimeoutConfig(_Section, frozen=True):
    request_seconds: PositiveFloat = 30.0
    watch_seconds: PositiveInt = 300
    backoff_initial_seconds: PositiveFloat = 0.5
    backoff_max_seconds: PositiveFloat = 30.0
    missing_crd_retry_seconds: PositiveFloat = 60.0
    bind_retry_attempts: PositiveInt = 5
    volume_binding_seconds: PositiveFloat = 600.0
    not_ready_report_seconds: Annotated[float, msgspec.Meta(ge=0)] = 5.0


class EventLogConfig(_Section, frozen=True):
    """How big one record may be and how much history the log keeps (see `daemon.scheduling.journal`)."""

    max_record_bytes: Annotated[int, msgspec.Meta(ge=64 * 1024, le=MAX_RECORD_BYTES)] = 1024 * 1024
    retention_bytes: Annotated[int, msgspec.Meta(ge=0)] = 1024 * 1024 * 1024
    retention_seconds: Annotated[float, msgspec.Meta(ge=0)] = 7 * 24 * 3600.0
    # What a damaged log (daemon.cli.run) does at start: moved aside and rebuilt from a relist, or exit 3.
    on_corruption: Literal["recover", "refuse"] = "recover"


class DaemonConfig(_Section, frozen=True):
    kubeconfig: str = ""
    context: str = ""
    in_cluster: bool = False
    scheduler_name: Annotated[str, msgspec.Meta(min_length=1)] = "toposched"
    kai_node_pool_label: str = KAI_NODE_POOL_LABEL
    log_dir: Annotated[str, msgspec.Meta(min_length=1)] = "/var/lib/toposched/log"
    fsync: str = "interval:10ms"
    bind_concurrency: PositiveInt = 64
    address: str = "0.0.0.0:10251"
    leader_election: LeaderElectionConfig = LeaderElectionConfig()
    timeouts: TimeoutConfig = TimeoutConfig()
    event_log: EventLogConfig = EventLogConfig()

    def fsync_policy(self) -> FsyncPolicy:
        return FsyncPolicy.parse(self.fsync)

    def host_port(self) -> tuple[str, int]:
        return parse_address(self.address, "address")


_ADDRESS = re.compile(r"^(?P<host>\[[0-9a-fA-F:]+\]|[^:\[\]]*):(?P<port>\d{1,5})$")


def parse_address(value: str, key: str) -> tuple[str, int]:
    match = _ADDRESS.match(value)
    if match is None or int(match["port"]) > 65535:
        raise ConfigError(key, f"expected HOST:PORT (e.g. 0.0.0.0:10251), got {value!r}")
    host = match["host"].strip("[]") or "0.0.0.0"
    return host, int(match["port"])


def load_config(path: str | Path | None, overrides: Mapping[str, Any] | None = None) -> DaemonConfig:
    """Read `path` (YAML, may be None), apply dotted-key `overrides` (flags), validate everything."""
    document: dict[str, Any] = {}
    if path is not None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as error:
            raise ConfigError("", f"cannot read config file {path}: {error.strerror or error}") from error
        except UnicodeDecodeError as error:
            raise ConfigError("", f"config file {path} is not UTF-8 text (byte {error.start}: "
                                  f"{error.object[error.start:error.start + 1]!r}); is it a binary?") from error
        try:
            loaded = yaml.load(text, Loader=_LOADER)  # safe: plain data only
        except yaml.YAMLError as error:
            raise ConfigError("", f"config file {path} is not valid YAML: {yaml_problem(error)}") from error
        except RecursionError as error:
            raise ConfigError("", f"config file {path} is nested too deeply to be a config") from error
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigError("", f"config file {path} must hold a mapping of keys, got {type(loaded).__name__}")
        document = loaded
    for dotted, value in (overrides or {}).items():
        _set_dotted(document, dotted, value)
    return decode_config(document)


def yaml_problem(error: yaml.YAMLError) -> str:
    """A YAML error on one line: what is wrong and where (PyYAML's own text spans several lines)."""
    if isinstance(error, yaml.MarkedYAMLError) and error.problem:
        mark = error.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        context = f" ({error.context})" if error.context else ""
        return " ".join(f"{error.problem}{where}{context}".split())
    return " ".join(str(error).split())


def _check_values(document: Mapping[str, Any]) -> None:
    """Depth and finiteness, walked without recursion: the two things msgspec would take badly or accept."""
    stack: list[tuple[str, object, int]] = [("", document, 0)]
    while stack:
        key, value, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ConfigError(key.split(".")[0], f"nested more than {MAX_DEPTH} levels deep; no key of the config "
                                                 "holds more than a mapping of values")
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(key, f"expected a finite number, got {value!r}")
        if isinstance(value, Mapping):
            stack.extend((f"{key}.{name}" if key else str(name), item, depth + 1) for name, item in value.items())
        elif isinstance(value, list):
            stack.extend((f"{key}.{index}" if key else str(index), item, depth + 1) for index, item in enumerate(value))


def decode_config(document: Mapping[str, Any]) -> DaemonConfig:
    _check_values(document)
    try:
        config = msgspec.convert(document, type=DaemonConfig, strict=False)
    except msgspec.ValidationError as error:
        key, problem = _reword(str(error))
        found = _lookup(document, key)
        if found is not _ABSENT and ", got" not in problem and "key" not in problem:
            problem = f"{problem}, got {reprlib.repr(found)}"
        raise ConfigError(key, problem) from error
    parse_address(config.address, "address")
    try:
        FsyncPolicy.parse(config.fsync)
    except EventLogError as error:
        raise ConfigError("fsync", f"expected always, never or interval:<N>ms, got {config.fsync!r}") from error
    bad_label = pool_label_problem(config.kai_node_pool_label)
    if bad_label is not None:
        raise ConfigError("kai_node_pool_label", bad_label)
    _check_consistency(config)
    return config


def pool_label_problem(value: str) -> str | None:
    """What is wrong with `value` as the node label naming KAI node pools ("" is no pools), or None."""
    bad = label_key_problem(value) if value else None
    return f"expected a node label key (or \"\" for no pools): {bad}" if bad is not None else None


_ABSENT = object()
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: fast, depth-capped


def _lookup(document: Mapping[str, Any], dotted: str) -> object:
    node: object = document
    for part in dotted.split(".") if dotted else []:
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return _ABSENT
    return node


def _set_dotted(document: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = document
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[parts[-1]] = value


def _check_consistency(config: DaemonConfig) -> None:
    election = config.leader_election
    if election.renew_deadline_seconds >= election.lease_duration_seconds:
        raise ConfigError(
            "leader_election.renew_deadline_seconds",
            f"must be shorter than lease_duration_seconds ({election.lease_duration_seconds:g}), "
            f"got {election.renew_deadline_seconds:g}",
        )
    if election.retry_period_seconds >= election.renew_deadline_seconds:
        raise ConfigError(
            "leader_election.retry_period_seconds",
            f"must be shorter than renew_deadline_seconds ({election.renew_deadline_seconds:g}), "
            f"got {election.retry_period_seconds:g}",
        )
    if config.timeouts.backoff_initial_seconds > config.timeouts.backoff_max_seconds:
        raise ConfigError("timeouts.backoff_initial_seconds", "must not exceed timeouts.backoff_max_seconds")


_UNKNOWN = re.compile(r"^Object contains unknown field `(?P<field>[^`]+)`$")
_MISSING = re.compile(r"^Object missing required field `(?P<field>[^`]+)`$")


def _reword(text: str) -> tuple[str, str]:
    """msgspec's "Expected `int` >= 1, got `0` - at `$.a.b`" -> ("a.b", "expected int >= 1, got 0")."""
    message, _, path = text.partition(" - at `$")
    key = path.rstrip("`").lstrip(".")
    key = re.sub(r"\[(\d+)\]", r".\1", key)
    unknown = _UNKNOWN.match(message)
    if unknown:
        field = unknown["field"]
        return (f"{key}.{field}" if key else field), "unknown key (check the spelling; see `toposched run --help`)"
    missing = _MISSING.match(message)
    if missing:
        field = missing["field"]
        return (f"{key}.{field}" if key else field), "required key is missing"
    problem = message.replace("`", "")
    problem = problem[:1].lower() + problem[1:]
    if not key:
        return "", f"the config must be a mapping of keys ({problem})"
    return key, problem
