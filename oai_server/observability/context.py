"""One request's record, reachable from anywhere inside its handling.

The middleware opens a `RequestRecord` per HTTP request and puts it in a context
variable; the instrumented engine adds token counts and finish reasons to it as
steps arrive (in the request's own task or a child task, which sees the same
record). The access log, the token-limit settlement and the metrics read it at the end.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from oai_server.caller import caller


@dataclass
class RequestRecord:
    request_id: str
    # The request's ASGI scope, where AuthMiddleware puts the caller's key id.
    scope: Mapping[str, Any] = field(default_factory=dict)
    method: str = ""
    path: str = ""
    began: float = field(default_factory=time.perf_counter)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reasons: list[str] = field(default_factory=list)
    # Tokens reserved against the principal's token limit, and in which window.
    reserved_tokens: int = 0
    reserved_window: int | None = None
    # Prompt text, only when the access log is asked to carry it.
    prompt_text: str | None = None
    # The served model the request resolved to (its metrics' `model` label); "" before.
    model: str = ""

    @property
    def principal(self) -> str | None:
        return caller(self.scope)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


current_request: contextvars.ContextVar[RequestRecord | None] = contextvars.ContextVar(
    "oai_current_request", default=None
)
