"""A quiet, clear start: the server's own progress at `--log-level info`, the engine's at debug.

At info a start shows what a user needs and nothing else: converting the model (with a
progress bar, the first time), loading the engine, then one "ready" line with the URL, the
model, its dtype and the time it took, the chat page's address, a curl line to try it and
how to stop. vLLM,
transformers, Triton and torch speak only at `--log-level debug` (their errors still show).
Their log levels are set through the environment too, before vllm is imported, so that the
engine core process, spawned later, inherits them.
"""

from __future__ import annotations

import gc
import logging
import os
import time
import warnings
from collections.abc import Sequence

from pydantic import ValidationError

from oai_server.observability.printable import PrintableFormatter

# Third-party loggers that explain themselves at length while the engine loads.
_CHATTY_LOGGERS = ("vllm", "transformers", "torch", "triton", "filelock", "urllib3")
# uvicorn's own start-up lines, replaced by the "ready" line at info.
_UVICORN_START_LINES = (
    "Started server process",
    "Waiting for application startup",
    "Application startup complete",
    "Uvicorn running on",
)


def process_age_s() -> float:
    """Seconds since this process started (since this module was imported, where unknown)."""
    try:
        with open("/proc/self/stat", encoding="ascii") as stat:
            # Field 22, after the parenthesised command name: start time in clock ticks.
            start_ticks = int(stat.read().rpartition(")")[2].split()[19])
        with open("/proc/uptime", encoding="ascii") as uptime:
            up_s = float(uptime.read().split()[0])
        return max(0.0, up_s - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return time.monotonic() - _IMPORTED


_IMPORTED = time.monotonic()


def configure_logging(level: str) -> None:
    """Our log format and level; at anything but debug, silence the engine's libraries.

    Must run before vllm or transformers is imported: both read their level from the
    environment at import, and the engine core process inherits the environment.
    """
    debug = level == "debug"
    # One format at every level: the access log (oai_server.access) goes through it too.
    handler = logging.StreamHandler()
    # One event, one line: what a client chose (a path, a model name) is escaped.
    handler.setFormatter(PrintableFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level.upper(), handlers=[handler])
    if debug:
        return
    # setdefault: a user's own setting of these variables wins.
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
    # Python's warnings in the engine core process (FutureWarning, DeprecationWarning).
    os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning,ignore::DeprecationWarning")
    for name in _CHATTY_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    # The store's migrations: their warnings matter, their progress does not.
    logging.getLogger("alembic").setLevel(logging.WARNING)
    # vLLM's own variable, when the user set it, wins in this process as in the engine's.
    logging.getLogger("vllm").setLevel(os.environ["VLLM_LOGGING_LEVEL"].upper())
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)


class _DropStartLines(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(_UVICORN_START_LINES)


def quiet_uvicorn_start() -> None:
    """Drop uvicorn's start-up lines ("Uvicorn running on ..." comes before the model is
    ready); call after uvicorn has configured its logging, i.e. after `uvicorn.Config`."""
    logging.getLogger("uvicorn.error").addFilter(_DropStartLines())


def ready_message(
    *,
    host: str,
    port: int,
    model: str,
    dtype: str | None,
    web_ui: bool = True,
    embedding_model: str | None = None,
    embedding_dtype: str | None = None,
    more_models: Sequence[tuple[str, str | None]] = (),
    dialects: Sequence[tuple[str, str]] = (),
) -> list[str]:
    """The lines that say the server is ready: where, what, how long, how to try, how to stop.

    `model` is the first chat model; `more_models` the others, each (name, dtype);
    `dialects` how each chat model's output is read, (name, `tool calls: ...`)."""
    shown_host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    root = f"http://{shown_host}:{port}"
    base = f"{root}/v1"
    took = f"{process_age_s():.1f} s"
    chat = [(model, dtype), *more_models]
    what = ("models " if more_models else "model ") + ", ".join(
        name + (f" ({kind})" if kind else "") for name, kind in chat
    )
    if embedding_model is not None:
        what += f", embedding model {embedding_model}" + (
            f" ({embedding_dtype})" if embedding_dtype else ""
        )
    body = f'{{"model": "{model}", "messages": [{{"role": "user", "content": "Hello!"}}]}}'
    # The chat page is the one address a newcomer would not guess.
    page = [f"  chat: {root}/"] if web_ui else []
    return [
        f"ready in {took}: {base}, {what}",
        *(f"  {name}: {parsers}" for name, parsers in dialects),
        *page,
        f"  try:  curl {base}/chat/completions -H 'Content-Type: application/json' -d '{body}'",
        "  Ctrl-C to stop",
    ]


# Python collects its youngest generation every 700 allocations (net of frees) by default.
GC_THRESHOLDS = (10_000, 10, 10)


def prepare_gc_for_serving() -> None:
    """Leave what start-up built (modules, the app, the engine client) out of every garbage
    collection from now on, as `vllm serve` does once it is up, and collect the young
    generations less often.

    Each full collection walked all of the start-up heap, and a streamed answer allocates
    enough to set collections going: under load they cost more than a tenth of the
    server's own CPU time. A young collection walks every object then alive, under load
    those of every request in flight (a collection of the middle generation took 2 ms with
    32 streams in flight). At `GC_THRESHOLDS` they run a fourteenth as often: 4-7 % less of
    a request's CPU time under the floor's load, measured. A request leaves no reference
    cycle behind (`tests/unit/test_reference_cycles.py`), so no garbage waits on them.
    For a serving process only: in a process that builds apps and drops them (tests), what
    is frozen is never collected.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def invalid_settings(exc: ValidationError) -> str:
    """One line naming each bad setting as its flag, and why, for a start that must stop."""
    problems = []
    for error in exc.errors():
        name = str(error["loc"][0]) if error["loc"] else "settings"
        reason = str(error["msg"]).removeprefix("Value error, ")
        problems.append(f"--{name.replace('_', '-')}: {reason}")
    return "invalid settings: " + "; ".join(problems)
