"""Where spans go is chosen by the standard OpenTelemetry variables only: OTLP over HTTP or gRPC, the
console, or nowhere; a value the daemon cannot honour is one line on stderr and exit code 2.

The OTLP cases export for real, to a receiver on 127.0.0.1 speaking the OTLP protocol (the gRPC
TraceService, and HTTP POST /v1/traces), as a collector would receive them."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent import futures
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import grpc  # type: ignore[import-untyped]
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.sdk.trace.export import ConsoleSpanExporter

from daemon.cli import demo, run
from daemon.config import ConfigError
from daemon.telemetry.observability import TraceExport, Tracing, exporters_from_env, trace_export_from_env

_VARIABLES = ("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
              "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


@pytest.fixture(autouse=True)
def no_otel_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """The exporters also read the process's environment: start each test from a clean one."""
    for name in _VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(("environ", "expected"), [
    ({}, TraceExport(())),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"},
     TraceExport(("otlp",), "http/protobuf", "http://collector:4318")),
    ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, TraceExport(("otlp",), "grpc")),
    ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
      "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, TraceExport(("otlp",), "http/protobuf")),
    ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://c:4317", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://other:1",
      "OTEL_EXPORTER_OTLP_PROTOCOL": "GRPC"}, TraceExport(("otlp",), "grpc", "https://c:4317", True)),
    ({"OTEL_TRACES_EXPORTER": " Console , otlp "}, TraceExport(("console", "otlp"))),
    ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"},
     TraceExport((), "http/protobuf", "http://collector:4318")),
    ({"OTEL_TRACES_EXPORTER": "console", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
     TraceExport(("console",), "http/json")),  # the protocol matters only to OTLP
])
def test_the_standard_variables_choose_the_export(environ: dict[str, str], expected: TraceExport) -> None:
    assert trace_export_from_env(environ) == expected


@pytest.mark.parametrize(("environ", "variable", "words"), [
    ({"OTEL_TRACES_EXPORTER": "jaeger"}, "OTEL_TRACES_EXPORTER", "'jaeger' is not supported"),
    ({"OTEL_TRACES_EXPORTER": "otlp,zipkin"}, "OTEL_TRACES_EXPORTER", "'zipkin' is not supported"),
    ({"OTEL_TRACES_EXPORTER": "none,console"}, "OTEL_TRACES_EXPORTER", "cannot be combined"),
    ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "OTEL_EXPORTER_OTLP_PROTOCOL",
     "'http/json' is not supported"),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "udp"},
     "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "'udp' is not supported (use http/protobuf or grpc)"),
])
def test_a_value_the_daemon_cannot_honour_is_a_config_error(environ: dict[str, str], variable: str,
                                                          words: str) -> None:
    with pytest.raises(ConfigError) as raised:
        trace_export_from_env(environ)
    assert raised.value.key == variable and words in str(raised.value) and "\n" not in str(raised.value)


def test_each_exporter_is_built_for_its_protocol_and_endpoint() -> None:
    (grpc_exporter,) = exporters_from_env({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
                                           "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"})
    assert isinstance(grpc_exporter, GrpcSpanExporter)
    http_base, console = exporters_from_env({"OTEL_TRACES_EXPORTER": "otlp,console",
                                             "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"})
    assert isinstance(http_base, HttpSpanExporter) and isinstance(console, ConsoleSpanExporter)
    assert http_base._endpoint == "http://collector:4318/v1/traces"  # the base URL gets the signal's path
    (http_exact,) = exporters_from_env({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:9999/custom"})
    assert isinstance(http_exact, HttpSpanExporter) and http_exact._endpoint == "http://collector:9999/custom"
    assert exporters_from_env({}) == [] and not Tracing({}).exporting


def test_toposched_run_refuses_an_unsupported_exporter_in_one_line_with_exit_code_2(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "jaeger")
    code = run.main(["--kubeconfig", str(tmp_path / "kubeconfig"), "--log-dir", str(tmp_path / "log")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("toposched run: bad configuration: OTEL_TRACES_EXPORTER: 'jaeger' is not supported")


def test_toposched_demo_refuses_an_unsupported_exporter_before_starting_anything(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "zipkin")
    code = demo.main([])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("toposched demo: bad configuration: OTEL_TRACES_EXPORTER")


# --------------------------------------------------------------------------- real export


class _GrpcReceiver(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self) -> None:
        self.requests: list[trace_service_pb2.ExportTraceServiceRequest] = []

    def Export(self, request: trace_service_pb2.ExportTraceServiceRequest,
               context: Any) -> trace_service_pb2.ExportTraceServiceResponse:
        self.requests.append(request)
        return trace_service_pb2.ExportTraceServiceResponse()


def _names(requests: list[trace_service_pb2.ExportTraceServiceRequest]) -> list[str]:
    return [span.name for request in requests for resource in request.resource_spans
            for scope in resource.scope_spans for span in scope.spans]


def _services(requests: list[trace_service_pb2.ExportTraceServiceRequest]) -> set[str]:
    return {attribute.value.string_value for request in requests for resource in request.resource_spans
            for attribute in resource.resource.attributes if attribute.key == "service.name"}


@pytest.fixture
def grpc_receiver() -> Iterator[tuple[_GrpcReceiver, int]]:
    receiver = _GrpcReceiver()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(receiver, server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield receiver, port
    finally:
        server.stop(grace=None)


@pytest.fixture
def http_receiver() -> Iterator[tuple[list[tuple[str, trace_service_pb2.ExportTraceServiceRequest]], int]]:
    received: list[tuple[str, trace_service_pb2.ExportTraceServiceRequest]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            received.append((self.path, trace_service_pb2.ExportTraceServiceRequest.FromString(body)))
            reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield received, server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_spans_reach_a_collector_over_grpc(grpc_receiver: tuple[_GrpcReceiver, int]) -> None:
    receiver, port = grpc_receiver
    tracing = Tracing({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
                       "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}", "OTEL_SERVICE_NAME": "sched-a"},
                      batch=False)
    tracing.tracer.start_span("gang.attempt").end()
    tracing.shutdown()
    assert _names(receiver.requests) == ["gang.attempt"]
    assert _services(receiver.requests) == {"sched-a"}


def test_spans_reach_a_collector_over_http(
        http_receiver: tuple[list[tuple[str, trace_service_pb2.ExportTraceServiceRequest]], int]) -> None:
    received, port = http_receiver
    tracing = Tracing({"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}"}, batch=False)
    tracing.tracer.start_span("gang.plan").end()
    tracing.shutdown()
    assert [path for path, _ in received] == ["/v1/traces"]
    assert _names([request for _, request in received]) == ["gang.plan"]
    assert _services([request for _, request in received]) == {"toposched"}
