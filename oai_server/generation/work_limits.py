"""Bound the work one request may ask of the engine.

A request is admitted or refused as a whole, before any of it reaches the engine: a
`/v1/completions` batch of 20,000 prompts, or 128 choices of the whole context each,
would otherwise hold the engine (and everyone queued behind it) for minutes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from oai_server.engine.types import SamplingOptions
from oai_server.errors import InvalidRequestError
from oai_server.generation.sampling import resolve_max_tokens


@dataclass(frozen=True)
class WorkLimits:
    """The server's bounds on one request (`--max-request-tokens`, `--max-request-prompts`,
    `--strict-max-tokens`)."""

    # Prompt tokens plus every choice's `max_tokens`, over all prompts; None: no bound.
    max_request_tokens: int | None = None
    # Prompts in one `/v1/completions` batch.
    max_request_prompts: int = 1024
    # Refuse a max_tokens past the room the context leaves, rather than answer up to it.
    strict_max_tokens: bool = False

    def check_prompt_count(self, count: int) -> None:
        """Refuse a batch of more prompts than allowed, before tokenizing any of them."""
        if count > self.max_request_prompts:
            raise InvalidRequestError(
                f"'prompt' has {count} prompts; this server takes at most "
                f"{self.max_request_prompts} in one request.",
                param="prompt",
            )

    def check_work(
        self,
        prompts: Sequence[Sequence[int]],
        options: Sequence[SamplingOptions],
        *,
        prompt_param: str,
    ) -> None:
        """Refuse a request whose prompts and outputs together pass `max_request_tokens`."""
        if self.max_request_tokens is None:
            return
        total = sum(len(p) + o.n * o.max_tokens for p, o in zip(prompts, options, strict=True))
        self.check_total(total, param=prompt_param if len(prompts) > 1 else "max_tokens")

    def least_work(
        self,
        least: int,
        requested: int | None,
        samples: int,
        max_model_len: int,
        *,
        prompt_param: str,
        max_tokens_param: str = "max_tokens",
    ) -> int:
        """The fewest tokens a prompt of at least `least` tokens and its `samples` answers
        can come to, before it is tokenized: a prompt that cannot fit is refused here. An
        answer past the context's room is cut to it (unless strict), so a longer prompt can
        mean less work: the fewest is at the shortest prompt or at the longest that fits."""
        budget = resolve_max_tokens(
            requested,
            least,
            max_model_len,
            prompt_param=prompt_param,
            max_tokens_param=max_tokens_param,
            strict=self.strict_max_tokens,
            at_least=True,
        )
        total = least + samples * (0 if requested is None else budget)
        return total if self.strict_max_tokens else min(total, max_model_len)

    def check_total(self, total: int, *, param: str, at_least: bool = False) -> None:
        """Refuse a request of `total` tokens (prompts and outputs) past `max_request_tokens`;
        with `at_least`, `total` is a lower bound known before the prompts are tokenized."""
        if self.max_request_tokens is None or total <= self.max_request_tokens:
            return
        raise InvalidRequestError(
            f"This request asks for {'at least' if at_least else 'up to'} {total} tokens "
            "(prompt tokens, plus max_tokens for each of n choices, over every prompt); this "
            f"server takes at most {self.max_request_tokens} per request. Lower max_tokens "
            "or n, or send fewer prompts per request.",
            param=param,
            code="request_too_large",
        )


def check_token_ids(token_ids: Sequence[int], vocab_size: int, param: str) -> None:
    """Refuse token ids the model does not have."""
    if not token_ids:
        return
    low, high = min(token_ids), max(token_ids)
    if low < 0 or high >= vocab_size:
        bad = low if low < 0 else high
        raise InvalidRequestError(
            f"Token id {bad} in '{param}' is out of vocabulary (size {vocab_size}).",
            param=param,
        )


def check_options_token_ids(options: SamplingOptions, vocab_size: int) -> None:
    """The token ids in `logit_bias` must be the model's."""
    if options.logit_bias:
        check_token_ids(list(options.logit_bias), vocab_size, "logit_bias")
