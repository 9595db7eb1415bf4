"""What the services share: checks, finish reasons, and usage in each API's shape."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, assert_never

from oai_server.engine.types import FinishReason, StructuredOutput
from oai_server.errors import (
    GenerationAbortedError,
    GenerationFailedError,
    InvalidRequestError,
    ModelNotFoundError,
    UnsupportedParameterError,
)
from oai_server.generation.engine_request import Usage
from oai_server.models import ModelRegistry
from oai_server.observability.context import current_request
from oai_server.structured.limits import check_schema
from schemas.chat import CreateChatCompletionRequest
from schemas.common import (
    CompletionTokensDetails,
    CompletionUsage,
    PromptTokensDetails,
    ResponseFormat,
    StreamOptions,
)
from schemas.completions import CreateCompletionRequest
from schemas.realtime import InputTokenDetails, OutputTokenDetails
from schemas.realtime import Usage as RealtimeUsage
from schemas.responses import InputTokensDetails, OutputTokensDetails, ResponseUsage


@dataclass(frozen=True, slots=True)
class Target:
    """Where a request goes: the chat model whose engine answers, and the LoRA adapter
    it answers with (None: the model itself)."""

    model: str
    adapter: str | None = None

    @property
    def name(self) -> str:
        """The name the request resolved to: the adapter's, else the model's."""
        return self.adapter or self.model


def check_model(
    requested: str, served: str, param: str = "model", models: ModelRegistry | None = None
) -> Target:
    """The chat model (and adapter) `requested` names; `served` is the one model known
    when there is no registry.

    Raise `ModelNotFoundError` unless `requested` is a chat model this server serves or
    one of their adapters (a 400 when `models` serves it as another kind: an embedding
    model asked for chat). The request being handled is labelled with the name it
    resolved to (its metrics' `model`), whether the engine or the response cache answers."""
    target: Target | None = None
    if models is not None and (requested in models or requested != served):
        model = models.find(requested, "chat", param=param)
        if model.parent is not None:
            target = Target(model.parent, model.name)  # an adapter on its base's engine
        else:
            target = Target(model.alias_of or model.name)
    elif requested == served:
        target = Target(served)
    if target is not None:
        record = current_request.get()
        if record is not None:
            record.model = target.name
        return target
    raise ModelNotFoundError(
        f"The model '{requested}' does not exist. This server serves '{served}'.",
        param=param,
    )


def _unsupported(param: str, what: str) -> UnsupportedParameterError:
    return UnsupportedParameterError(f"{what} is not supported by this server yet.", param=param)


def reject_unsupported(req: CreateChatCompletionRequest | CreateCompletionRequest) -> None:
    """Refuse fields that would change the result but are not implemented.

    Silently ignoring them would hand the client an answer it did not ask for. What only
    speeds an answer up (`prediction`) or adds what this server has not got
    (`web_search_options`: no search runs, as a hosted tool is not offered) is accepted.
    """
    if isinstance(req, CreateChatCompletionRequest):
        if req.modalities and set(req.modalities) != {"text"}:
            raise _unsupported("modalities", "Audio output")
        if req.audio is not None:
            raise _unsupported("audio", "Audio output")
    elif req.suffix:
        raise UnsupportedParameterError(
            "'suffix' (fill-in-the-middle) is not supported by this model.", param="suffix"
        )


def structured_output(response_format: ResponseFormat | None) -> StructuredOutput | None:
    """The decoding constraint `response_format` asks for, if any."""
    if response_format is None or response_format.type == "text":
        return None
    if response_format.type == "json_object":
        return StructuredOutput(json_object=True)
    spec = response_format.json_schema or {}
    schema = spec.get("schema")
    if not isinstance(schema, dict):
        raise InvalidRequestError(
            "response_format 'json_schema' needs 'json_schema.schema', a JSON Schema object.",
            param="response_format.json_schema.schema",
        )
    check_schema(schema, "response_format.json_schema.schema")
    return StructuredOutput(json_schema=schema)


def finish_reason(reason: FinishReason) -> Literal["stop", "length"]:
    """OpenAI's finish reason for an engine's; a request the engine failed raises.

    Anything but an answer that ended normally must reach the client as an error, never
    as an ordinary answer cut short.
    """
    if reason == "stop":
        return "stop"
    if reason == "length":
        return "length"
    if reason == "repetition":
        # Only when repetition detection was asked for: the answer ended, by its own rule.
        return "stop"
    if reason == "abort":
        raise GenerationAbortedError(
            "The engine stopped this request before it finished; please retry."
        )
    if reason == "error":
        raise GenerationFailedError("The engine failed while generating this answer; retry.")
    assert_never(reason)


# One request's token counts in each API's shape: chat and completions, Realtime, Responses.


def usage_of(usage: Usage) -> CompletionUsage:
    out = CompletionUsage(
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        total_tokens=usage.total_tokens,
        prompt_tokens_details=PromptTokensDetails(cached_tokens=usage.cached_tokens),
    )
    if usage.reasoning_tokens is not None:
        # As vLLM with a reasoning parser: the details, with the thinking's tokens.
        out.completion_tokens_details = CompletionTokensDetails(
            reasoning_tokens=usage.reasoning_tokens
        )
    return out


def realtime_usage(usage: Usage) -> RealtimeUsage:
    """A Realtime response's usage: this server's tokens are all text."""
    return RealtimeUsage(
        total_tokens=usage.total_tokens,
        input_tokens=usage.prompt_tokens,
        output_tokens=usage.completion_tokens,
        input_token_details=InputTokenDetails(
            cached_tokens=usage.cached_tokens, text_tokens=usage.prompt_tokens
        ),
        output_token_details=OutputTokenDetails(text_tokens=usage.completion_tokens),
    )


def response_usage(usage: Usage) -> ResponseUsage:
    return ResponseUsage(
        input_tokens=usage.prompt_tokens,
        input_tokens_details=InputTokensDetails(cached_tokens=usage.cached_tokens),
        output_tokens=usage.completion_tokens,
        output_tokens_details=OutputTokensDetails(reasoning_tokens=usage.reasoning_tokens or 0),
        total_tokens=usage.total_tokens,
    )


# `--enable-force-include-usage`: what every stream asks for, as vLLM's
# `should_include_usage` has it (usage on each chunk and on a last chunk of its own).
FORCED_USAGE = StreamOptions(include_usage=True, continuous_usage_stats=True)


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
