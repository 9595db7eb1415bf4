"""Chat's token logprobs in the Responses API's two shapes.

The output text part carries `LogProb`s (with each token's bytes); the text delta and
done events carry the lighter `ResponseLogProb`s, as OpenAI streams them.
"""

from __future__ import annotations

from collections.abc import Sequence

from schemas.chat import ChatCompletionTokenLogprob
from schemas.response_events import ResponseLogProb, ResponseTopLogProb
from schemas.response_items import LogProb, TopLogProb


def part_logprobs(entries: Sequence[ChatCompletionTokenLogprob]) -> list[LogProb]:
    return [
        LogProb(
            token=e.token,
            logprob=e.logprob,
            bytes=list(e.bytes or ()),
            top_logprobs=[
                TopLogProb(token=t.token, logprob=t.logprob, bytes=list(t.bytes or ()))
                for t in e.top_logprobs
            ],
        )
        for e in entries
    ]


def event_logprobs(entries: Sequence[LogProb]) -> list[ResponseLogProb]:
    return [
        ResponseLogProb(
            token=e.token,
            logprob=e.logprob,
            top_logprobs=[
                ResponseTopLogProb(token=t.token, logprob=t.logprob) for t in e.top_logprobs
            ],
        )
        for e in entries
    ]
