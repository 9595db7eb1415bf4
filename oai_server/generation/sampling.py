"""Map an OpenAI request's sampling fields onto the engine's `SamplingOptions`."""

from __future__ import annotations

from oai_server.engine.types import ImageInput, SamplingDefaults, SamplingOptions, StructuredOutput
from oai_server.errors import ContextLengthExceededError, InvalidRequestError
from oai_server.generation.service_tier import engine_priority
from schemas.common import GenerationRequest


def resolve_max_tokens(
    requested: int | None,
    prompt_tokens: int,
    max_model_len: int,
    *,
    prompt_param: str = "messages",
    max_tokens_param: str = "max_tokens",
    default: int | None = None,
    cap: int | None = None,
    strict: bool = False,
    at_least: bool = False,
) -> int:
    """The output budget: what was asked for, else the model's `default` (its generation
    config's `max_new_tokens`), never past `cap` (`--override-generation-config`'s
    `max_new_tokens`) nor past the room the context leaves, as `vllm serve` reckons it.

    A request for more than that room is answered up to the end of the context (its
    answer then ends for `length`): agents ask for 32,000 tokens, which fits the official
    APIs' contexts but few self-hosted ones. With `strict` it is refused instead, as
    OpenAI refuses it. A prompt that leaves no room at all is always refused
    (`ContextLengthExceededError`). With `at_least`, `prompt_tokens` is a lower bound (the
    prompt not yet tokenized), and the refusal says so.
    """
    room = max_model_len - prompt_tokens
    if room <= 0:
        raise ContextLengthExceededError(
            f"This model's maximum context length is {max_model_len} tokens. However, your "
            f"{prompt_param} resulted in {_counted(prompt_tokens, at_least)} tokens. "
            f"Please reduce the length of the {prompt_param}.",
            param=prompt_param,
            prompt_tokens=prompt_tokens,
            maximum=max_model_len,
        )
    if requested is not None and requested < 1:
        raise InvalidRequestError(
            f"'{max_tokens_param}' must be at least 1, got {requested}.", param=max_tokens_param
        )
    if strict and requested is not None and requested > room:
        raise ContextLengthExceededError(
            f"This model's maximum context length is {max_model_len} tokens. "
            f"However, you requested {_counted(prompt_tokens + requested, at_least)} tokens "
            f"({_counted(prompt_tokens, at_least)} in the {prompt_param}, "
            f"{requested} in the completion). "
            f"Please reduce the length of the {prompt_param} or completion.",
            param=prompt_param,
            prompt_tokens=prompt_tokens,
            max_tokens=requested,
            maximum=max_model_len,
        )
    asked = default if requested is None else requested
    return min(budget for budget in (room, asked, cap) if budget is not None)


def _counted(tokens: int, at_least: bool) -> str:
    return f"at least {tokens}" if at_least else str(tokens)


def _stop_strings(stop: str | list[str] | None) -> tuple[str, ...]:
    if stop is None:
        return ()
    return (stop,) if isinstance(stop, str) else tuple(stop)


def _logit_bias(bias: dict[str, float] | None) -> dict[int, float] | None:
    if not bias:
        return None
    # Ten digits hold every token id; a longer key is never read as a (huge) number.
    if not all(token.isascii() and token.isdigit() and len(token) <= 10 for token in bias):
        raise InvalidRequestError(
            "logit_bias keys must be token ids (integers as strings).", param="logit_bias"
        )
    return {int(token): value for token, value in bias.items()}


def _min_tokens(min_tokens: int | None, max_tokens: int) -> int:
    if min_tokens is not None and min_tokens > max_tokens:
        raise InvalidRequestError(
            f"'min_tokens' ({min_tokens}) must not exceed max_tokens ({max_tokens}).",
            param="min_tokens",
        )
    return min_tokens or 0


def _or(value: float | None, model_default: float | None, openai_default: float) -> float:
    """The request's value, else the model's, else OpenAI's."""
    if value is not None:
        return value
    return model_default if model_default is not None else openai_default


def build_options(
    req: GenerationRequest,
    *,
    max_tokens: int,
    defaults: SamplingDefaults,
    logprobs: int | None = None,
    prompt_logprobs: int | None = None,
    structured: StructuredOutput | None = None,
    n: int | None = None,
    adapter: str | None = None,
    model: str | None = None,
    images: tuple[ImageInput, ...] = (),
) -> SamplingOptions:
    """Sampling options for `req`. A field it leaves out (or sends as null) takes the model's
    own default from `defaults`, as `vllm serve` does, and OpenAI's where the model has none."""
    return SamplingOptions(
        max_tokens=max_tokens,
        n=n or req.n or 1,
        temperature=_or(req.temperature, defaults.temperature, 1.0),
        top_p=_or(req.top_p, defaults.top_p, 1.0),
        top_k=int(_or(req.top_k, defaults.top_k, 0)),
        min_p=_or(req.min_p, defaults.min_p, 0.0),
        seed=req.seed,
        stop=_stop_strings(req.stop),
        stop_token_ids=tuple(req.stop_token_ids or ()),
        presence_penalty=req.presence_penalty or 0.0,
        frequency_penalty=req.frequency_penalty or 0.0,
        repetition_penalty=_or(req.repetition_penalty, defaults.repetition_penalty, 1.0),
        min_tokens=_min_tokens(req.min_tokens, max_tokens),
        ignore_eos=bool(req.ignore_eos),
        skip_special_tokens=req.skip_special_tokens is not False,
        logit_bias=_logit_bias(req.logit_bias),
        logprobs=logprobs,
        prompt_logprobs=prompt_logprobs,
        structured=structured,
        priority=engine_priority(req),
        service_tier=req.service_tier or "default",
        cache_salt=req.cache_salt,
        adapter=adapter,
        model=model,
        images=images,
    )
