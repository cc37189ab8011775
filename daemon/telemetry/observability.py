"""Logging and tracing set-up for the daemon: structlog JSON lines and OpenTelemetry spans.

Logs: one JSON object per line on stderr, with `gang` and `pod` keys wherever a gang or pod is
concerned (bind `structlog.contextvars` or pass them as keys), so `jq 'select(.gang=="ns/job")'` gives
a gang's whole story (`daemon.telemetry.tracing` writes it). Records of the standard `logging` module
(the OpenTelemetry SDK, aiohttp, kubernetes-asyncio, warnings) go through the same JSON renderer, by a
`structlog.stdlib.ProcessorFormatter` on the root logger, with their `logger` name: one format on
stderr, whoever wrote the line.

Traces: the exporter is chosen by the standard OpenTelemetry variables, nothing of our own:
`OTEL_TRACES_EXPORTER` (`otlp`, `console`, `none` or a list such as `otlp,console`; unset means
`otlp` only when an OTLP endpoint is configured), `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` /
`OTEL_EXPORTER_OTLP_PROTOCOL` (`http/protobuf`, the default, to :4318, or `grpc` to :4317) and
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as it is) / `OTEL_EXPORTER_OTLP_ENDPOINT` (the base URL:
`/v1/traces` is appended for HTTP); headers, timeout, compression and certificates are read by the
exporters from their own standard variables. A value we cannot honour (`OTEL_TRACES_EXPORTER=jaeger`,
protocol `http/json`) is a `ConfigError`: `toposched run` says so in one line and exits 2. With
nothing configured no span is exported and tracing costs next to nothing. `OTEL_SERVICE_NAME` names
the service (default `toposched`).

Span names and attributes: see `daemon.telemetry.tracing`, which makes them.

Must never: change what the scheduler decides, or block the event loop (export runs on the SDK's
batch thread).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from typing import TextIO

import msgspec
import structlog
from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)

from daemon.config import ConfigError
from daemon.version import package_version

TRACER_NAME = "toposched"


class _LineHandler(logging.Handler):
    """The root logger's handler: one formatted line per record on `stream` (stderr, looked up per
    record: it may be swapped after set-up, as tests and embedding callers do)."""

    def __init__(self, stream: TextIO | None) -> None:
        super().__init__()
        self._stream = stream

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
            stream = self._stream if self._stream is not None else sys.stderr
            stream.write(line + "\n")
            stream.flush()
        except Exception:
            self.handleError(record)


def configure_logging(level: str = "info", stream: TextIO | None = None, json: bool = True) -> None:
    """structlog to JSON lines (or a console renderer for humans) at `level`, and the standard
    `logging` records through the same renderer (module docstring)."""
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        numeric = logging.INFO
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[*shared, structlog.processors.format_exc_info, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        # Resolve stderr when a logger is made, not now: sys.stderr may be swapped later (tests, daemons).
        logger_factory=(structlog.PrintLoggerFactory(stream) if stream is not None
                        else lambda *_: structlog.PrintLogger(sys.stderr)),
        cache_logger_on_first_use=False,
    )
    handler = _LineHandler(stream)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    structlog.processors.format_exc_info, renderer],
    ))
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _LineHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric)
    logging.captureWarnings(True)


def log_enabled(level: int) -> bool:
    """Whether structlog as configured now lets a line at `level` through, asked without making a logger
    (a module-level `structlog.get_logger()` proxy builds one, a PrintLogger included, on every use:
    ~3 us per filtered line on the per-pod path)."""
    wrapper = structlog.get_config()["wrapper_class"]
    floor = _level_floors.get(wrapper)
    if floor is None:
        floor = _level_floors[wrapper] = _level_floor(wrapper)
    return level >= floor


_level_floors: dict[type, int] = {}


def _level_floor(wrapper: type) -> int:
    """The lowest level a wrapper class lets through: its own (`make_filtering_bound_logger`'s classes
    filter by level without looking at the logger), else 0 (anything else asks the logger: let it)."""
    try:
        probe = wrapper(None, [], {})
        return next(level for level in range(logging.NOTSET, logging.CRITICAL + 1) if probe.is_enabled_for(level))
    except Exception:
        return logging.NOTSET


def silence_logging() -> None:
    """Only errors (the demo's own display replaces the log)."""
    configure_logging("error")


TRACE_EXPORTERS = ("otlp", "console", "none")  # OTEL_TRACES_EXPORTER values we honour
OTLP_PROTOCOLS = ("http/protobuf", "grpc")  # OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL values we honour
DEFAULT_OTLP_PROTOCOL = "http/protobuf"  # the specification's default


class TraceExport(msgspec.Struct, frozen=True):
    """Where spans go, as the standard variables say (`trace_export_from_env`)."""

    exporters: tuple[str, ...]  # "otlp" and/or "console"; empty: no export
    protocol: str = DEFAULT_OTLP_PROTOCOL
    endpoint: str = ""  # as configured ("": the exporter's default, localhost:4318 or :4317)
    endpoint_is_signal_specific: bool = False  # OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: used as it is


def trace_export_from_env(environ: Mapping[str, str]) -> TraceExport:
    """Read OTEL_TRACES_EXPORTER, OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL and ..._ENDPOINT.

    Raises `ConfigError` (one line, naming the variable and what is supported) for a value this
    daemon cannot honour, e.g. `OTEL_TRACES_EXPORTER=jaeger` or `OTEL_EXPORTER_OTLP_PROTOCOL=http/json`.
    """
    traces_endpoint = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    endpoint = traces_endpoint or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    raw = environ.get("OTEL_TRACES_EXPORTER", "").strip()
    names = [name.strip().lower() for name in raw.split(",") if name.strip()] or (["otlp"] if endpoint else ["none"])
    for name in names:
        if name not in TRACE_EXPORTERS:
            raise ConfigError("OTEL_TRACES_EXPORTER", f"{name!r} is not supported (use {', '.join(TRACE_EXPORTERS)}; "
                              "a list like otlp,console sends spans to each)")
    if "none" in names and len(names) > 1:
        raise ConfigError("OTEL_TRACES_EXPORTER", f"{raw!r}: 'none' cannot be combined with another exporter")
    exporters = tuple(dict.fromkeys(name for name in names if name != "none"))
    key = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
    protocol = environ.get(key, "").strip().lower()
    if not protocol:
        key = "OTEL_EXPORTER_OTLP_PROTOCOL"
        protocol = environ.get(key, "").strip().lower() or DEFAULT_OTLP_PROTOCOL
    if "otlp" in exporters and protocol not in OTLP_PROTOCOLS:
        raise ConfigError(key, f"{protocol!r} is not supported (use {' or '.join(OTLP_PROTOCOLS)})")
    return TraceExport(exporters, protocol, endpoint, bool(traces_endpoint))


def _otlp_exporter(export: TraceExport) -> SpanExporter:
    """The OTLP exporter for the protocol; the exporter reads the other standard variables itself
    (headers, timeout, compression, certificates, insecure)."""
    if export.protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter

        return GrpcSpanExporter(endpoint=export.endpoint or None)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter

    endpoint = export.endpoint
    if endpoint and not export.endpoint_is_signal_specific:  # the base URL: the signal's path is appended
        endpoint = endpoint.rstrip("/") + "/v1/traces"
    return HttpSpanExporter(endpoint=endpoint or None)


def exporters_from_env(environ: Mapping[str, str]) -> list[SpanExporter]:
    """The span exporters the standard variables ask for (none: no export). Raises `ConfigError`."""
    export = trace_export_from_env(environ)
    return [_otlp_exporter(export) if name == "otlp" else ConsoleSpanExporter() for name in export.exporters]


class Tracing:
    """The tracer provider for this process; `shutdown()` flushes spans still queued.

    The exporters come from the standard variables (`exporters_from_env`: a bad value raises
    `ConfigError`), or `exporter` when given (tests). The resource names the service
    (`OTEL_SERVICE_NAME`, default `toposched`) and its version; `OTEL_RESOURCE_ATTRIBUTES` adds to it.
    """

    def __init__(self, environ: Mapping[str, str] | None = None, *, exporter: SpanExporter | None = None,
                 batch: bool = True) -> None:
        env = os.environ if environ is None else environ
        self.exporters: list[SpanExporter] = [exporter] if exporter is not None else exporters_from_env(env)
        resource = Resource.create({SERVICE_NAME: env.get("OTEL_SERVICE_NAME", "toposched"),
                                    SERVICE_VERSION: package_version()})
        self.provider = TracerProvider(resource=resource)
        self.tracer: trace.Tracer
        if not self.exporters:
            # Nothing would ever read the spans: do not build them (they cost ~20 us each on the hot path).
            self.tracer = trace.NoOpTracer()
            return
        for each in self.exporters:
            self.provider.add_span_processor(BatchSpanProcessor(each) if batch else SimpleSpanProcessor(each))
        self.tracer = self.provider.get_tracer(TRACER_NAME, package_version())

    @property
    def exporting(self) -> bool:
        return bool(self.exporters)

    def shutdown(self) -> None:
        self.provider.shutdown()
