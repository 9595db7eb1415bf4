"""`python -m benchmarks.asgi_serve --factory MODULE:FUNCTION --port P`: an ASGI app under uvicorn.

`FUNCTION()` returns the app. Every app measured by `floor` runs this way, each in a process
of its own whose CPU time is then that app's alone, under the same uvicorn settings: uvloop
and httptools where installed (uvicorn's "auto", as `python -m oai_server` runs), no access log,
the start-up heap frozen out of garbage collection and the young generations collected less
often (as `python -m oai_server` does).
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable, Sequence
from typing import Any

import uvicorn

from oai_server.startup import prepare_gc_for_serving


def load_factory(path: str) -> Callable[[], Any]:
    """The function named by "package.module:function"."""
    module_name, sep, name = path.partition(":")
    if not sep or not module_name or not name:
        raise ValueError(f"expected MODULE:FUNCTION, got {path!r}")
    factory = getattr(importlib.import_module(module_name), name)
    if not callable(factory):
        raise TypeError(f"{path} is not callable")
    return factory  # type: ignore[no-any-return]


def main(argv: Sequence[str] | None = None) -> None:
    """Serve the app of `--factory` on 127.0.0.1 until interrupted."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.asgi_serve", description=__doc__)
    parser.add_argument("--factory", required=True, metavar="MODULE:FUNCTION")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args(argv)
    app = load_factory(args.factory)()
    prepare_gc_for_serving()  # as `python -m oai_server` serves
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        loop="auto",
        http="auto",
        lifespan="on",
        access_log=False,
        log_level="warning",
    )


if __name__ == "__main__":
    main()
