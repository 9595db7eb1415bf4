"""Batch lines on `/v1/responses`: each answered by the live route's service (its body the
live answer, stored as the owner's, its context the owner's), refused as the live route
refuses, and run at the engine's lowest priority."""

from __future__ import annotations

from typing import Any

import httpx

from oai_server.engine.fake import FakeEngine
from oai_server.generation.service_tier import BATCH_PRIORITY
from tests.batch.helpers import read_lines, upload, wait
from tests.conformance import validate
from tests.live import serve
from tests.store.conftest import KEYS, MODEL, make_app, sdk

# What differs between two answers to the same request: their ids and clocks.
VARYING = {"id", "created_at", "completed_at"}


def response_line(custom_id: str, **body: Any) -> dict[str, Any]:
    return {
        "custom_id": custom_id,
        "method": "POST",
        "url": "/v1/responses",
        "body": {"model": MODEL, "max_output_tokens": 16, **body},
    }


def _steady(value: Any) -> Any:
    """`value` without the fields that differ from one answer to the next."""
    if isinstance(value, dict):
        return {k: _steady(v) for k, v in value.items() if k not in VARYING}
    if isinstance(value, list):
        return [_steady(v) for v in value]
    return value


def test_response_lines_answer_as_the_live_endpoint(store_url: str) -> None:
    engine = FakeEngine(reply_for=lambda p: "You are Ada." if "Ada" in p else f"echo {p[-40:]}")
    with serve(make_app(store_url, engine)) as base, sdk(base) as client:
        earlier = client.responses.create(model=MODEL, input="I am Ada.", max_output_tokens=16)
        lines = [
            response_line("plain", input="question one"),
            response_line(
                "instructed",
                instructions="Answer in one word.",
                input=[{"role": "user", "content": "question two"}],
            ),
            response_line("follow", input="Who am I?", previous_response_id=earlier.id),
        ]
        batch = client.batches.create(
            input_file_id=upload(client, lines), endpoint="/v1/responses", completion_window="24h"
        )
        done = wait(client, batch.id)
        assert (done.status, done.request_counts.completed) == ("completed", 3)
        output = read_lines(client, done.output_file_id)
        assert [line["custom_id"] for line in output] == ["plain", "instructed", "follow"]
        texts = []
        for line, asked in zip(output, lines, strict=True):
            assert line["response"]["status_code"] == 200
            body = line["response"]["body"]
            validate("Response", body)
            live = httpx.post(f"{base}/v1/responses", json=asked["body"])
            assert _steady(body) == _steady(live.json())
            # Stored, as the live answer is: retrievable, and a later turn may follow it.
            texts.append(client.responses.retrieve(body["id"]).output_text)
        # The follow-up's context is the owner's earlier turn, read from the store.
        assert texts[2] == "You are Ada."
        assert texts[0].startswith("echo")


def test_response_lines_run_at_the_lowest_priority(store_url: str) -> None:
    engine = FakeEngine(scheduling_policy="priority")
    app = make_app(store_url, engine, scheduling_policy="priority")
    with serve(app) as base, sdk(base) as client:
        lines = [response_line("a", input="one", service_tier="priority")]
        batch = client.batches.create(
            input_file_id=upload(client, lines), endpoint="/v1/responses", completion_window="24h"
        )
        done = wait(client, batch.id)
        [line] = read_lines(client, done.output_file_id)
    assert line["response"]["body"]["service_tier"] == "priority"  # the tier, as echoed live
    assert [call.options.priority for call in engine.calls] == [BATCH_PRIORITY]


def test_response_lines_the_live_route_refuses_fail_the_batch(store_url: str) -> None:
    with (
        serve(make_app(store_url, api_key=KEYS)) as base,
        sdk(base, "sk-alice") as alice,
        sdk(base, "sk-bob") as bob,
    ):
        alices = alice.responses.create(model=MODEL, input="mine", max_output_tokens=4).id
        refused = {
            "model": {"model": "no-such-model", "input": "x"},
            "others": {"input": "x", "previous_response_id": alices},
            "tool": {
                "input": "x",
                "tools": [{"type": "web_search"}],
                "tool_choice": {"type": "web_search_preview"},
            },
            "empty": {"input": []},
        }
        lines = [response_line("ok", input="fine")]
        lines += [response_line(name, **body) for name, body in refused.items()]
        lines.append(response_line("later", input="x", background=True))
        batch = bob.batches.create(
            input_file_id=upload(bob, lines), endpoint="/v1/responses", completion_window="24h"
        )
        failed = wait(bob, batch.id)
        assert failed.status == "failed"
        assert failed.output_file_id is None
        errors = {error.line: error for error in failed.errors.data}
        assert sorted(errors) == [2, 3, 4, 5, 6]
        for line, body in enumerate(refused.values(), 2):
            live = httpx.post(
                f"{base}/v1/responses",
                json=response_line("", **body)["body"],
                headers={"Authorization": "Bearer sk-bob"},
            )
            assert live.status_code in (400, 404)
            error = live.json()["error"]
            # A batch error always has a code; a live error without one is a plain refusal.
            code = error["code"] or "invalid_request"
            assert (errors[line].code, errors[line].param) == (code, error["param"])
            assert errors[line].message == error["message"]
        # Answered live it would be a background response; in a batch there is none to poll.
        assert errors[6].param == "background"
