"""Anthropic's SDK on the real engine: a second turn reads its prefix from the cache."""

from __future__ import annotations

import uuid

import anthropic
import pytest

from tests.integration.conftest import MODEL, SDK_TIMEOUT_S, Server

pytestmark = pytest.mark.integration


def test_the_second_turn_reads_the_prefix_cache(server: Server) -> None:
    # Unique to this run, so no earlier test's blocks match; a few hundred tokens long.
    system = f"Session {uuid.uuid4()}. " + "You answer questions about the weather. " * 40
    first = [{"role": "user", "content": "Is it sunny?"}]
    with anthropic.Anthropic(
        base_url=server.root, api_key="none", max_retries=0, timeout=SDK_TIMEOUT_S
    ) as sdk:
        answer = sdk.messages.create(model=MODEL, max_tokens=8, system=system, messages=first)
        assert answer.usage.cache_read_input_tokens == 0
        assert answer.usage.output_tokens <= 8
        turn = [
            *first,
            {"role": "assistant", "content": answer.content},
            {"role": "user", "content": "And tomorrow?"},
        ]
        with sdk.messages.stream(
            model=MODEL,
            max_tokens=8,
            system=[{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
            messages=turn,  # type: ignore[arg-type]
        ) as stream:
            second = stream.get_final_message()
        counted = sdk.messages.count_tokens(model=MODEL, system=system, messages=turn)  # type: ignore[arg-type]
    usage = second.usage
    assert usage.cache_read_input_tokens is not None
    assert usage.cache_read_input_tokens > 200
    # Anthropic's counts: the prompt is what was read from the cache plus the rest.
    assert usage.input_tokens + usage.cache_read_input_tokens == counted.input_tokens
    assert second.stop_reason in ("end_turn", "max_tokens")
