"""Compaction with the official SDK: `/v1/responses/compact`, the compaction item sent back,
and `context_management` compacting before a turn whose input passes its threshold."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai
import pytest

from oai_server.engine.fake import FakeEngine
from oai_server.responses.compaction import INSTRUCTION, SUMMARY_INTRO
from tests.live import serve
from tests.open_responses.schema import errors
from tests.responses.conftest import app_on, prompt_of
from tests.store.conftest import MODEL, sdk

SUMMARY = "The user is planning a trip to Paris in May."
QUESTIONS = ["Plan a trip.", "To Paris.", "In May.", "What should I pack?"]


def _compact(client: openai.OpenAI, **body: Any) -> dict[str, Any]:
    """The compacted response's JSON (the SDK's type takes the kept user messages for
    output messages, which their `input_text` parts are not)."""
    raw = client.responses.with_raw_response.compact(model=MODEL, **body)
    found: dict[str, Any] = raw.http_response.json()
    return found


def answer(prompt: str) -> str:
    """The summary when asked for one; else a long answer naming the turn it answers."""
    if INSTRUCTION in prompt:
        return SUMMARY
    return f"Answer {prompt.count('<|user|>')}: " + "lots of detail " * 20


def _turns(client: openai.OpenAI) -> str:
    """Three turns chained by `previous_response_id`; the last response's id."""
    previous = None
    for question in QUESTIONS[:3]:
        previous = client.responses.create(
            model=MODEL, input=question, previous_response_id=previous
        ).id
    assert previous is not None
    return previous


def test_a_chain_compacted_after_turn_three_answers_turn_four_on_a_shorter_prompt(
    store_url: str, template: Path
) -> None:
    engine = FakeEngine(reply_for=answer)
    with serve(app_on(store_url, template, engine)) as base, sdk(base) as client:
        third = _turns(client)
        whole = client.responses.create(
            model=MODEL, input=QUESTIONS[3], previous_response_id=third, store=False
        )
        whole_prompt = prompt_of(engine)

        compacted = _compact(client, previous_response_id=third)
        assert errors(compacted, "CompactResource") == []
        *kept, item = compacted["output"]
        assert [m["content"][0]["text"] for m in kept] == QUESTIONS[:3]
        assert item["type"] == "compaction"
        assert SUMMARY not in item["encrypted_content"]  # sealed, not readable
        assert compacted["usage"]["output_tokens"] == len(SUMMARY.split(" "))

        fourth = client.responses.create(
            model=MODEL,
            input=[*compacted["output"], {"role": "user", "content": QUESTIONS[3]}],
            store=False,
        )
        prompt = prompt_of(engine)
        assert fourth.output_text.startswith("Answer 4:")
        assert prompt == (
            "".join(f"<|user|>{q}\n" for q in QUESTIONS[:3])
            + f"<|assistant|>{SUMMARY_INTRO}{SUMMARY}\n<|user|>{QUESTIONS[3]}\n<|assistant|>"
        )
        # Shorter by the three answers, less the summary that stands for them
        # (the fake engine's tokens are the prompt's bytes).
        answers = [line for line in whole_prompt.split("\n") if line.startswith("<|assistant|>A")]
        summary_line = f"<|assistant|>{SUMMARY_INTRO}{SUMMARY}\n"
        saved = sum(len(a) + 1 for a in answers) - len(summary_line.encode())
        assert whole.usage is not None
        assert fourth.usage is not None
        assert whole.usage.input_tokens - fourth.usage.input_tokens == saved > 0


def test_an_altered_compaction_item_is_refused(store_url: str, template: Path) -> None:
    engine = FakeEngine(reply_for=answer)
    with serve(app_on(store_url, template, engine)) as base, sdk(base) as client:
        sealed = _compact(client, input="Plan a trip.")["output"][-1]["encrypted_content"]
        altered = {"type": "compaction", "encrypted_content": sealed[:-4] + "AAAA"}
        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(
                model=MODEL,
                input=[altered, {"role": "user", "content": "Go on."}],  # type: ignore[list-item]
            )
        assert isinstance(caught.value.body, dict)
        assert caught.value.body["param"] == "input[0].encrypted_content"


@pytest.mark.parametrize("threshold", [100_000, 300])
def test_context_management_compacts_before_a_turn_past_its_threshold(
    store_url: str, template: Path, threshold: int
) -> None:
    engine = FakeEngine(reply_for=answer)
    with serve(app_on(store_url, template, engine)) as base, sdk(base) as client:
        third = _turns(client)
        fourth = client.responses.create(
            model=MODEL,
            input=QUESTIONS[3],
            previous_response_id=third,
            context_management=[{"type": "compaction", "compact_threshold": threshold}],
        )
        prompt = prompt_of(engine)
        # The fourth turn's input, three long answers included, is some 1,100 tokens.
        compacts = threshold == 300
        assert (INSTRUCTION in prompt_of(engine, -2)) is compacts  # the summarising pass
        items = client.responses.input_items.list(fourth.id, order="asc").data
        assert (SUMMARY in prompt) is compacts
        assert ("Answer 1:" in prompt) is not compacts
        assert [i.type for i in items] == ["message", "compaction"] if compacts else ["message"]
        # The next turn of the chain starts from the compaction too.
        client.responses.create(model=MODEL, input="Thanks.", previous_response_id=fourth.id)
        assert ("Answer 1:" in prompt_of(engine)) is not compacts


def test_compact_summarises_in_the_caller_s_prefix_cache(store_url: str, template: Path) -> None:
    engine = FakeEngine(reply_for=answer)
    app = app_on(store_url, template, engine, api_key=["sk-a", "sk-b"])
    with serve(app) as base, sdk(base, "sk-a") as a, sdk(base, "sk-b") as b:
        _compact(a, input="Plan a trip.")
        a.responses.create(model=MODEL, input="Plan a trip.")
        _compact(b, input="Plan a trip.")
    by_a, turn_of_a, by_b = (call.options.cache_salt for call in engine.calls)
    # The summarising pass is salted with its key, as the key's own turns are.
    assert by_a is not None
    assert by_a == turn_of_a
    assert by_b not in (None, by_a)


def test_context_management_summarises_at_the_turn_s_tier_and_salt(
    store_url: str, template: Path
) -> None:
    engine = FakeEngine(reply_for=answer, scheduling_policy="priority")
    app = app_on(store_url, template, engine, api_key=["sk-a"], scheduling_policy="priority")
    with serve(app) as base, sdk(base, "sk-a") as client:
        third = _turns(client)
        client.responses.create(
            model=MODEL,
            input=QUESTIONS[3],
            previous_response_id=third,
            service_tier="priority",
            context_management=[{"type": "compaction", "compact_threshold": 300}],
        )
    summarising, turn = engine.calls[-2:]
    assert INSTRUCTION in prompt_of(engine, -2)
    assert summarising.options.priority == turn.options.priority == -1
    assert summarising.options.cache_salt == turn.options.cache_salt is not None


def test_context_management_s_summary_counts_against_the_token_limit(
    store_url: str, template: Path
) -> None:
    engine = FakeEngine(reply_for=answer)
    app = app_on(store_url, template, engine, rate_limit_tpm=10_000_000)
    with serve(app) as base, sdk(base) as client:

        def remaining() -> int:
            models = client.models.with_raw_response.list()
            return int(models.headers["x-ratelimit-remaining-tokens"])

        third = _turns(client)
        before = remaining()
        fourth = client.responses.create(
            model=MODEL,
            input=QUESTIONS[3],
            previous_response_id=third,
            context_management=[{"type": "compaction", "compact_threshold": 300}],
        )
        spent = before - remaining()
    summary_tokens = len(engine.calls[-2].prompt_token_ids) + len(SUMMARY.split(" "))
    assert fourth.usage is not None
    # The turn's `usage` is its own; the key pays for the summary too.
    assert spent == fourth.usage.total_tokens + summary_tokens
