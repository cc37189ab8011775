"""Logging and tracing set-up for the daemon: structlog JSON lines and OpenTelemetry spans.

Logs: one JSON object per line on stderr, with `gang` and `pod` keys wherever a gang or pod is
concerned (bind `structlog.contextvars` or pass them as keys), so `jq 'select(.gang=="ns/job")'` gives
a gang's whole story (`daemon.telemetry.tracing` writes it). Records of the standard `logging` module
(the OpenTelemetry SDK, aiohttp, kubernetes-asyncio, warnings) go through the same JSON renderer, by a
`structlog.stdlib.ProcessorFormatter` on the root logger, with their `logger` name: one format on
stderr, whoever wrote the line.

Traces: the exporter is chosen by the standard OpenTelemetry variables, nothing of our own:
`OTEL_TRACES_EXPORTER` (`otlp` | `console` | `none`; unset means `otlp` only when an OTLP endpoint is
configured) and `OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (OTLP over
HTTP/protobuf). With nothing configured no span is exported and tracing costs next to nothing.
`OTEL_SERVICE_NAME` names the service (default `toposched`).

Span names (what a trace of a gang attempt looks like):
  `gang.attempt` (attributes gang, attempt, result)
    ├─ `gang.plan`        placement
    ├─ `gang.preempt`     job-level preemption (evictions, nominations)
    ├─ `gang.permit`      waiting for minMember assumed pods
    └─ `gang.bind`        the Binding calls (one `pod.bind` child per pod)

Must never: change what the scheduler decides, or block the event loop (export runs on the SDK's
batch thread).
"""

from __future__ import annotations

import logging
import os
import sys
from typing import TextIO

import structlog
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)

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


def silence_logging() -> None:
    """Only errors (the demo's own display replaces the log)."""
    configure_logging("error")


def _exporter_from_env(environ: dict[str, str]) -> SpanExporter | None:
    choice = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    endpoint = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if not choice:
        choice = "otlp" if endpoint else "none"
    first = choice.split(",")[0].strip()
    if first == "none":
        return None
    if first == "console":
        return ConsoleSpanExporter()
    if first in ("otlp", "otlp_proto_http"):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    raise ValueError(f"OTEL_TRACES_EXPORTER={choice!r} is not supported (use otlp, console or none)")


class Tracing:
    """The tracer provider for this process; `shutdown()` flushes spans still queued."""

    def __init__(self, environ: dict[str, str] | None = None, *, exporter: SpanExporter | None = None,
                 batch: bool = True) -> None:
        env = dict(os.environ if environ is None else environ)
        self.exporter = exporter or _exporter_from_env(env)
        resource = Resource.create({"service.name": env.get("OTEL_SERVICE_NAME", "toposched")})
        self.provider = TracerProvider(resource=resource)
        self.tracer: trace.Tracer
        if self.exporter is None:
            # Nothing would ever read the spans: do not build them (they cost ~20 us each on the hot path).
            self.tracer = trace.NoOpTracer()
            return
        processor = BatchSpanProcessor(self.exporter) if batch else SimpleSpanProcessor(self.exporter)
        self.provider.add_span_processor(processor)
        self.tracer = self.provider.get_tracer(TRACER_NAME)

    @property
    def exporting(self) -> bool:
        return self.exporter is not None

    def shutdown(self) -> None:
        self.provider.shutdown()
