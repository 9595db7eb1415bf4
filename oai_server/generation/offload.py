"""A request's prompt work (chat templating, tokenizing) off the event loop, when it is big.

Tokenizing costs time in proportion to the text, about a microsecond per byte: seconds for
a prompt of a few megabytes. Done on the event loop, that is every running stream's wait,
chunk for chunk. Big prompts go to a small pool of threads instead. The Hugging Face fast
tokenizer (transformers 5) releases the GIL for most of its work, encoding in Rust, and
holds it to build the result: measured on a loaded 2-core machine (2026-11-27), two 500 kB
prompts encoded in the pool held a 2 ms ticker on the loop for at most 0.5 s (p99 0.1 s),
against 5.4 s for the Rust `encode` that keeps the GIL and the whole encoding on the loop.
The pool is bounded: a flood of big prompts waits its turn in the pool's queue, never on
the loop, and takes at most a few cores.

Small prompts stay on the loop: a hand-off to a thread costs a wake-up and a context
switch (about 1 ms round trip on that loaded machine), and calls the per-request path
counts (`tests/unit/test_hot_path.py`).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

# Characters of prompt text worked on the loop; above, in the pool. A short chat turn (the
# floor benchmark's, ~600 characters) stays on the loop: its cost per request is unchanged
# (A B, 2026-11-27). 4,096 characters hold the loop a few milliseconds, about one chunk's
# interval (42 ms at a load of 24 on 2 cores, where a chunk's usual gap was 40-150 ms).
INLINE_CHARS = 4096

# A few threads: each big prompt holds one core while it is tokenized, and a server on a
# machine of a few cores must keep one for the loop and the engine.
_WORKERS = max(2, min(4, (os.cpu_count() or 2) - 1))

# Threads start on the first big prompt, not at import.
_POOL = ThreadPoolExecutor(max_workers=_WORKERS, thread_name_prefix="oai-prompt")


def in_pool(work: Callable[P, object], *args: P.args, **kwargs: P.kwargs) -> None:
    """Start `work` in the pool and leave it there: work whose result is kept elsewhere."""
    _POOL.submit(work, *args, **kwargs)


async def off_loop(size: int, work: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """`work(*args, **kwargs)`, in the pool when `size` (the characters it works on) passes
    `INLINE_CHARS`.

    An exception of `work` is raised here, as if it had run on the loop. The request's
    context variables (its log record) go with it. A request cancelled meanwhile stops
    waiting; its work, once begun, runs to its end in the pool.
    """
    if size <= INLINE_CHARS:
        return work(*args, **kwargs)
    context = contextvars.copy_context()
    loop = asyncio.get_running_loop()
    call = functools.partial(context.run, work, *args, **kwargs)
    return await loop.run_in_executor(_POOL, call)
