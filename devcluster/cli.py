"""`toposched devcluster`: serve the embedded Kubernetes API server on 127.0.0.1 until interrupted.

Writes a kubeconfig (default ./devcluster.kubeconfig) and prints where, optionally pre-loads a
scenario's objects (a multi-document YAML file or a directory of them, in name order; pods with
spec.nodeName are created running there), optionally starts with fault rules (`--fault
status=429,verb=create,path=/binding,fraction=1`, repeatable; changed later over HTTP at
/devcluster/faults, see devcluster.admin), then serves until Ctrl-C or SIGTERM (exit 0).

Owns argument parsing and the process lifecycle only.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Sequence

import msgspec

from devcluster.cluster import DevCluster
from devcluster.errors import ApiError
from devcluster.faults import FaultSpec, FaultSpecError, parse_fault
from devcluster.scenario import ScenarioError, read_objects


def _fault(text: str) -> FaultSpec:
    try:
        return parse_fault(text)
    except FaultSpecError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="toposched devcluster",
                                     description="Serve the embedded Kubernetes API server on 127.0.0.1.")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (default: any free port)")
    parser.add_argument("--kubeconfig", default="devcluster.kubeconfig",
                        help="where to write the kubeconfig (default: ./devcluster.kubeconfig)")
    parser.add_argument("--load", metavar="SCENARIO", help="pre-load a scenario's objects (YAML file or directory)")
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
    objects = read_objects(args.load) if args.load else []
    await cluster.start()
    try:
        if objects:
            cluster.load_objects(objects)
        path = cluster.write_kubeconfig(args.kubeconfig)
        print(f"devcluster serving {cluster.url}", flush=True)
        if objects:
            print(f"loaded {len(objects)} objects from {args.load}", flush=True)
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


def main(argv: Sequence[str]) -> int:
    args = _parser().parse_args(list(argv))
    try:
        return asyncio.run(_serve(args))
    except (ScenarioError, ApiError, OSError) as exc:
        print(f"toposched devcluster: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
