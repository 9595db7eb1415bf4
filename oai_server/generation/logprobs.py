"""Engine logprobs in OpenAI's two shapes: chat's token list, completions' parallel arrays."""

from __future__ import annotations

from collections.abc import Sequence

from oai_server.engine.types import TokenLogprob
from schemas.chat import ChatCompletionTokenLogprob, ChoiceLogprobs, TopLogprob
from schemas.completions import CompletionLogprobs


def chat_logprobs(entries: Sequence[TokenLogprob]) -> ChoiceLogprobs:
    """`{"content": [...], "refusal": null}` for the given tokens."""
    return ChoiceLogprobs(
        content=[
            ChatCompletionTokenLogprob(
                token=e.token,
                logprob=e.logprob,
                bytes=list(e.token.encode()),
                top_logprobs=[
                    TopLogprob(token=t, logprob=lp, bytes=list(t.encode())) for t, lp in e.top
                ],
            )
            for e in entries
        ],
        refusal=None,
    )


def completion_logprobs(
    entries: Sequence[TokenLogprob | None], text_offset: int, unscored_token: str = ""
) -> CompletionLogprobs:
    """The parallel arrays for `entries`, whose first token starts at `text_offset`.

    A None entry is the prompt's first token under `echo`, which has no logprob
    (nothing precedes it); its text is `unscored_token`.
    """
    out = CompletionLogprobs(text_offset=[], token_logprobs=[], tokens=[], top_logprobs=[])
    offset = text_offset
    for e in entries:
        out.text_offset.append(offset)
        if e is None:
            out.tokens.append(unscored_token)
            out.token_logprobs.append(None)
            out.top_logprobs.append(None)
            offset += len(unscored_token)
            continue
        out.tokens.append(e.token)
        out.token_logprobs.append(e.logprob)
        # OpenAI always lists the chosen token too ("up to logprobs+1 elements").
        out.top_logprobs.append({**dict(e.top), e.token: e.logprob})
        offset += len(e.token)
    return out


def merge_completion_logprobs(into: CompletionLogprobs, more: CompletionLogprobs) -> None:
    """Append `more` to `into` (for the whole, non-streamed answer)."""
    into.text_offset += more.text_offset
    into.token_logprobs += more.token_logprobs
    into.tokens += more.tokens
    into.top_logprobs += more.top_logprobs
