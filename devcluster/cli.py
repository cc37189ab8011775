"""`toposched devcluster`: serve the embedded Kubernetes API server on 127.0.0.1 until interrupted.

Writes a kubeconfig (default ./devcluster.kubeconfig) and prints where, optionally pre-loads a
scenario's objects, then serves until Ctrl-C or SIGTERM (exit 0). A scenario is read exactly as
`toposched simulate` reads it (`manifests.read_manifests`: YAML documents, JSON, NDJSON, `kind: List`,
directories in name order) and each object is created as a cluster holds it (`manifests.load_object`:
the same defaulting and priority admission); pods with spec.nodeName are created running there.
What a real API server would have refused is printed, naming the document and the field; an object
devcluster cannot store is printed and skipped, as simulate skips it. Fault rules can be set from the
start (`--fault status=429,verb=create,path=/binding,fraction=1`, repeatable; changed later over HTTP
at /devcluster/faults, see devcluster.admin).

Exit codes, as every `toposched` command's: 0 stopped by Ctrl-C or SIGTERM; 2 a usage error (a bad
flag, a --load scenario that cannot be read); 3 the environment (the port in use, the kubeconfig
cannot be written).

Owns argument parsing and the process lifecycle only.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Sequence
from typing import Any

import msgspec

from devcluster.cluster import DevCluster
from devcluster.errors import ApiError
from devcluster.faults import FaultSpec, FaultSpecError, parse_fault
from manifests import ManifestFileError, read_manifests


def _fault(text: str) -> FaultSpec:
    try:
        return parse_fault(text)
    except FaultSpecError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="toposched devcluster",
                                     description="Serve the embedded Kubernetes API server on 127.0.0.1.",
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="exit codes:\n"
                                            "  0    stopped by Ctrl-C or SIGTERM\n"
                                            "  2    a bad flag, or a --load scenario that cannot be read\n"
                                            "  3    the port in use, or the kubeconfig cannot be written\n")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (default: any free port)")
    parser.add_argument("--kubeconfig", default="devcluster.kubeconfig",
                        help="where to write the kubeconfig (default: ./devcluster.kubeconfig)")
    parser.add_argument("--load", metavar="SCENARIO",
                        help="pre-load a scenario's objects (YAML, JSON or NDJSON file, or a directory of them)")
    parser.add_argument("--history", type=int, default=10_000,
                        help="watch history window in events; older resourceVersions get 410 Gone (default 10000)")
    parser.add_argument("--no-kubelet", action="store_true", help="do not mark bound pods Running")
    parser.add_argument("--kubelet-delay", type=float, default=0.5,
                        help="seconds from binding to Running for the fake kubelet (default 0.5)")
    parser.add_argument("--fault", metavar="RULE", type=_fault, action="append", default=[],
                        help="inject a fault from the start, e.g. status=429,verb=create,path=/binding,fraction=1 "
                        "(keys: status, count or fraction, verb, path, retry_after, latency); repeatable; "
                        "change them later at http://127.0.0.1:PORT/devcluster/faults")
    parser.add_argument("--fault-seed", type=int, default=0, metavar="N",
                        help="seed of the fault injector's random choices (default 0)")
    return parser


async def _serve(args: argparse.Namespace) -> int:
    cluster = DevCluster(port=args.port, history=args.history, kubelet=not args.no_kubelet,
                         kubelet_delay=args.kubelet_delay, fault_seed=args.fault_seed)
    for spec in args.fault:
        cluster.faults.add(spec)
    manifests = read_manifests(args.load) if args.load else []
    try:
        await cluster.start()
    except OSError as error:
        raise OSError(error.errno, f"cannot listen on 127.0.0.1:{args.port}: {error.strerror}") from error
    try:
        loaded = sum(_load(cluster, source, obj) for source, obj in manifests)
        try:
            path = cluster.write_kubeconfig(args.kubeconfig)
        except OSError as error:
            raise OSError(error.errno, f"cannot write the kubeconfig {args.kubeconfig}: {error.strerror}") from error
        print(f"devcluster serving {cluster.url}", flush=True)
        if manifests:
            print(f"loaded {loaded} objects from {args.load}", flush=True)
        print(f"kubeconfig written to {path}", flush=True)
        for rule in cluster.faults.rules:
            print(f"fault rule {rule.id}: {msgspec.json.encode(rule).decode()}", flush=True)
        print(f"  kubectl --kubeconfig {path} get nodes,pods -A -o wide", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        await stop.wait()
        print("devcluster stopped", flush=True)
        return 0
    finally:
        await cluster.stop()


def _load(cluster: DevCluster, source: str, obj: dict[str, Any]) -> int:
    """Create one scenario object; print its problems (the words `toposched simulate` reports); 1 if stored."""
    raw_meta = obj.get("metadata")
    meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "?")
    where = f"{source}: {obj.get('kind') or '?'} {f'{namespace}/{name}' if namespace else name}"
    warnings: list[str] = []
    try:
        cluster.load_objects([obj], warnings)
    except ApiError as refusal:
        print(f"{where}: {refusal.message}; skipped", file=sys.stderr, flush=True)
        return 0
    finally:
        for warning in warnings:
            print(f"{where}: {warning}", file=sys.stderr, flush=True)
    return 1


EXIT_USAGE = 2  # the numbers of daemon/cli/exits.py, which devcluster may not import
EXIT_ENVIRONMENT = 3


def main(argv: Sequence[str]) -> int:
    args = parser().parse_args(list(argv))
    try:
        return asyncio.run(_serve(args))
    except (ManifestFileError, ApiError) as exc:
        print(f"toposched devcluster: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except RecursionError:  # a --load file nested thousands deep: the decoder's recursion
        print(f"toposched devcluster: {args.load} is nested too deeply to hold Kubernetes objects", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"toposched devcluster: {where}{exc.strerror or exc}", file=sys.stderr)
        return EXIT_ENVIRONMENT
    except KeyboardInterrupt:
        return 0
