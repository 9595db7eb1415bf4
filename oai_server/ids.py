"""Every id this server makes: requests, tool calls, items, responses, sessions, events.

An id is a prefix, this process's random stem and a counter: unique across replicas (the
stem) and within one (the counter), and far cheaper than a fresh UUID for every item.
"""

from __future__ import annotations

import itertools
import secrets

_STEM = secrets.token_hex(10)
_COUNTER = itertools.count()


def new_id(prefix: str, sep: str = "_") -> str:
    """A fresh id such as `msg_3f2a...` (`sep` joins the prefix: `chatcmpl-` uses '-')."""
    return f"{prefix}{sep}{_STEM}{next(_COUNTER):012x}"


def new_request_id(prefix: str) -> str:
    """An engine request's id in OpenAI's style, e.g. `chatcmpl-3f2a...`."""
    return new_id(prefix, "-")


def new_call_id() -> str:
    """A tool call's id, e.g. `call_3f2a...`."""
    return new_id("call")
