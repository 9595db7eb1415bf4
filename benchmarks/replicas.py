"""`replicas`: the multiturn workload on one replica, two behind each of Serve's routers.

Stands everything up itself on a local Ray (no cluster needed): Serve's proxy on a free
loopback port, then the server as Serve applications built by `oai_server.ray_serve:build_app`:

- `one`: one replica, the reference for the share of prompt tokens its prefix cache serves;
- `default` and `affinity`: two replicas each, Serve's default router against
  `ray_router: affinity` (the gateway and `CacheAffinityRouter`), both deployed at once
  and measured in turns (A B B A ...: each goes first as often, so drift in the machine's
  load favours neither), each run with system prompts of its own.

Before the workload, one conversation of two turns runs alone on `one`: its TTFTs are the
engine's floor for a fresh system prompt (prefill only) and for a cached one, against
which the workload's TTFTs show how much of them is waiting for the engine.

    python -m benchmarks replicas --rounds 2 --setting cpu_kvcache_space=1

Prints each run's figures, then the ratios the issue asks for: affinity's cached share
against one replica's, and its TTFT p50/p99 against the default router's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import socket
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from benchmarks import multiturn, options
from benchmarks.metrics import percentile

if TYPE_CHECKING:
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]

ROOT = Path(__file__).resolve().parents[1]
# Logical CPUs for Ray's scheduler: four replicas of half a CPU and the gateway's tenth fit.
RAY_CPUS = 4


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def local_serve() -> Iterator[str]:
    """A local Ray with Serve's proxy on a free loopback port; yields the proxy's URL."""
    import ray
    from ray import serve

    # Serve's proxy has three readiness checks of 5 s to start in, then Serve kills it: on
    # a loaded machine (two CPU hogs) it did not make it. A minute each, as in the tests.
    os.environ.setdefault("RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S", "60")
    # The replicas import oai_server from this checkout, as the driver does.
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    ray.init(
        num_cpus=RAY_CPUS,
        include_dashboard=False,
        runtime_env={"env_vars": {"PYTHONPATH": path}},
        log_to_driver=False,
    )
    port = _free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port, "request_timeout_s": None})
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        serve.shutdown()  # type: ignore[no-untyped-call]
        ray.shutdown()


def deploy(name: str, replicas: int, router: str, settings: dict[str, Any]) -> None:
    """The server as Serve application `name` at `/name`, with `replicas` replicas."""
    from ray import serve

    from oai_server.ray_serve import build_app

    args = {
        **settings,
        "ray_router": router,
        "ray_min_replicas": replicas,
        "ray_max_replicas": replicas,
    }
    serve.run(build_app(args), name=name, route_prefix=f"/{name}")


def wait_for_replicas(url: str, count: int, timeout: float = 120) -> None:
    """Until `url` has answered from `count` different replicas (the proxy learns them late)."""
    seen: set[str] = set()
    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=10) as client:
        while len(seen) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} answered only from {seen}")
            seen.add(client.get(f"{url}/health").headers["x-replica"])


def _measure(args: argparse.Namespace, base_url: str, tag: str) -> multiturn.Tally:
    run = argparse.Namespace(**{**vars(args), "base_url": f"{base_url}/v1", "tag": tag})
    return asyncio.run(multiturn.run(run))


def _alone(args: argparse.Namespace, base_url: str) -> None:
    """One conversation of two turns with nothing else running: the engine's floor."""
    alone = argparse.Namespace(**{**vars(args), "conversations": 1, "turns": 2})
    tally = _measure(alone, base_url, "alone-" + secrets.token_hex(4))
    print(
        f"alone: TTFT {_ms(tally.computed_ttft_s)} ms for a fresh prompt "
        f"({tally.prompt_tokens} prompt tokens over both turns), "
        f"{_ms(tally.cached_ttft_s)} ms for its cached follow-up"
    )


def _ms(seconds: list[float]) -> str:
    return f"{statistics.median(seconds) * 1000:.0f}" if seconds else "-"


def _warm(args: argparse.Namespace, base_url: str, replicas: int) -> None:
    """A few short conversations first: each engine's first steps are slower."""
    warm = argparse.Namespace(**{**vars(args), "conversations": 2 * replicas, "turns": 1})
    _measure(warm, base_url, "warm-" + secrets.token_hex(4))


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "n/a"


def _p(values: list[float], q: float) -> float:
    return percentile(values, q) or 0.0


def _command(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="oai-replicas-") as data_dir:
        # A store of its own: never migrate the data directory other servers here use.
        # No embedding model: four replicas at once each held an idle one (1.5 GB each).
        settings: dict[str, Any] = {
            "ray_num_cpus": 0.5,
            "data_dir": data_dir,
            "embedding_model": "none",
        }
        settings.update(args.setting)
        if args.engine_factory:
            settings["engine_factory"] = args.engine_factory
        results = _run_all(args, settings)
    _summarise(results)
    return 0


def _run_all(
    args: argparse.Namespace, settings: dict[str, Any]
) -> dict[str, list[multiturn.Tally]]:
    results: dict[str, list[multiturn.Tally]] = {"one": [], "default": [], "affinity": []}
    shape = f"{args.conversations} conversations x {args.turns} turns"
    print(f"replicas: {shape}, ~{args.system_tokens}-token system prompts, {args.rounds} rounds")
    with local_serve() as url:
        from ray import serve

        deploy("one", 1, "default", settings)
        wait_for_replicas(f"{url}/one", 1)
        _warm(args, f"{url}/one", 1)
        _alone(args, f"{url}/one")
        results["one"].append(_measure(args, f"{url}/one", secrets.token_hex(4)))
        print(f"one (load {os.getloadavg()[0]:.2f})", *multiturn.describe(results["one"][0]))
        serve.delete("one")
        for name in ("default", "affinity"):
            deploy(name, 2, name, settings)
        for name in ("default", "affinity"):
            wait_for_replicas(f"{url}/{name}", 2)
            _warm(args, f"{url}/{name}", 2)
        for round_ in range(args.rounds):
            order = ("default", "affinity") if round_ % 2 == 0 else ("affinity", "default")
            for name in order:
                tally = _measure(args, f"{url}/{name}", secrets.token_hex(4))
                results[name].append(tally)
                load = os.getloadavg()[0]
                print(f"{name} round {round_ + 1} (load {load:.2f})", *multiturn.describe(tally))
    return results


def _summarise(results: dict[str, list[multiturn.Tally]]) -> None:
    share = {k: statistics.median(multiturn.cached_share(t) for t in v) for k, v in results.items()}
    p50 = {k: statistics.median(_p(t.ttft_s, 50) for t in v) for k, v in results.items()}
    p99 = {k: statistics.median(_p(t.ttft_s, 99) for t in v) for k, v in results.items()}
    computed = {
        k: statistics.median(t.prompt_tokens - t.cached_tokens for t in v)
        for k, v in results.items()
    }
    print(
        "\n| setup | cached share | prompt tokens computed | TTFT p50 ms | TTFT p99 ms |"
        "\n|---|---:|---:|---:|---:|"
    )
    for name in results:
        print(
            f"| {name} | {share[name]:.3f} | {computed[name]:.0f} "
            f"| {p50[name] * 1000:.0f} | {p99[name] * 1000:.0f} |"
        )
    print(
        f"\naffinity / one: cached share {_ratio(share['affinity'], share['one'])}"
        f"\naffinity / default: cached share {_ratio(share['affinity'], share['default'])}, "
        f"TTFT p50 {_ratio(p50['affinity'], p50['default'])}, "
        f"p99 {_ratio(p99['affinity'], p99['default'])}"
    )


def register(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "replicas",
        help="multiturn on a local Ray: one replica, two behind the default router, two affinity",
    )
    multiturn.add_workload_options(parser)
    parser.add_argument(
        "--rounds", type=int, default=2, help="default/affinity turns (A B, then B A)"
    )
    parser.add_argument(
        "--setting",
        type=options.key_value,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a server setting for every replica, by field name (e.g. cpu_kvcache_space=1)",
    )
    parser.add_argument(
        "--engine-factory",
        default=None,
        help="module:function building each replica's engine (default: vLLM's)",
    )
    parser.set_defaults(handler=_command)
