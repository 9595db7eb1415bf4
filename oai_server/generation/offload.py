"""A request's prompt work (chat templating, tokenizing) off the event loop, when it is big.

Tokenizing costs time in proportion to the text: a few hundred nanoseconds per byte, so
seconds for a prompt of a few megabytes. Done on the event loop, that is every running
stream's wait, chunk for chunk. Big prompts go to a small pool of threads instead: the
Hugging Face fast tokenizer releases the GIL while it encodes (in Rust), so the loop keeps
sending chunks while they are worked. The pool is bounded: a flood of big prompts waits its
turn in the pool's queue, never on the loop, and uses at most a few cores.

Small prompts stay on the loop: a hand-off to a thread costs the loop tens of
microseconds (a wake-up and a context switch), more than tokenizing a short chat turn.
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

# Characters of prompt text worked on the loop; above, in the pool. Tokenizing 4 KiB takes
# about 1 ms here, the longest a stream's chunk may wait on it (the README's measurements).
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
