"""What the chat and completions services share: checks, finish reasons, usage."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from oai_server.engine.types import FinishReason
from oai_server.errors import ModelNotFoundError, UnsupportedParameterError
from oai_server.generation import Usage
from schemas.chat import CreateChatCompletionRequest
from schemas.common import CompletionUsage, StreamOptions
from schemas.completions import CreateCompletionRequest


def check_model(requested: str, served: str) -> None:
    """Raise `ModelNotFoundError` unless `requested` is the model this server serves."""
    if requested != served:
        raise ModelNotFoundError(
            f"The model '{requested}' does not exist. This server serves '{served}'.",
            param="model",
        )


def _unsupported(param: str, what: str) -> UnsupportedParameterError:
    return UnsupportedParameterError(f"{what} is not supported by this server yet.", param=param)


def reject_unsupported(req: CreateChatCompletionRequest | CreateCompletionRequest) -> None:
    """Refuse fields that would change the result but are not implemented.

    Silently ignoring them would hand the client an answer it did not ask for.
    """
    if isinstance(req, CreateChatCompletionRequest):
        if req.tools:
            raise _unsupported("tools", "Tool calling ('tools')")
        if req.tool_choice not in (None, "none"):
            raise _unsupported("tool_choice", "'tool_choice' without tools")
        if req.functions or req.function_call not in (None, "none"):
            raise _unsupported("functions", "Function calling ('functions')")
        if req.logprobs or req.top_logprobs:
            raise _unsupported("logprobs", "'logprobs'")
        if (req.modalities and set(req.modalities) != {"text"}) or req.audio is not None:
            raise _unsupported("modalities", "Audio output")
        if req.prediction is not None:
            raise _unsupported("prediction", "Predicted outputs ('prediction')")
        if req.web_search_options is not None:
            raise _unsupported("web_search_options", "Web search")
    else:
        if req.logprobs is not None:
            raise _unsupported("logprobs", "'logprobs'")
        if req.echo:
            raise _unsupported("echo", "'echo'")
        if req.suffix:
            raise _unsupported("suffix", "'suffix' (insertion)")
        if req.best_of is not None and req.best_of > (req.n or 1):
            raise _unsupported("best_of", "'best_of' greater than 'n'")
    fmt = req.response_format
    fmt_type = fmt.get("type") if isinstance(fmt, dict) else getattr(fmt, "type", None)
    if fmt_type not in (None, "text"):
        raise _unsupported("response_format", f"response_format '{fmt_type}'")


def finish_reason(reason: FinishReason) -> Literal["stop", "length"]:
    """OpenAI's finish reason for an engine's (an abort only happens when we asked for it)."""
    return "length" if reason == "length" else "stop"


def usage_of(usage: Usage) -> CompletionUsage:
    return CompletionUsage(
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        total_tokens=usage.prompt_tokens + usage.completion_tokens,
    )


@dataclass(frozen=True)
class StreamSettings:
    include_usage: bool
    continuous_usage: bool

    @classmethod
    def of(cls, options: StreamOptions | None) -> StreamSettings:
        if options is None:
            return cls(False, False)
        include = bool(options.include_usage)
        return cls(include, include and bool(options.continuous_usage_stats))
