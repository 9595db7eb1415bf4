"""Every error of `/v1/messages` in Anthropic's envelope, type and status, as its SDK reads them."""

from __future__ import annotations

import json

import anthropic
import httpx
import pytest
from starlette.exceptions import HTTPException

from oai_server.anthropic.errors import ERROR_SHAPE
from oai_server.engine.fake import FakeEngine
from oai_server.error_responses import ERROR_SHAPES, error_response
from oai_server.errors import EngineOverloadedError
from tests.anthropic.conftest import KEY, MODEL, client, server

HELLO = [{"role": "user", "content": "Hello?"}]


def _error(exc: anthropic.APIStatusError) -> tuple[int, str]:
    body = exc.response.json()
    assert body["type"] == "error"
    assert set(body["error"]) == {"type", "message"}
    assert body["error"]["message"]
    return exc.status_code, body["error"]["type"]


def test_invalid_requests_are_400s() -> None:
    with server(FakeEngine()) as root:
        wrong_type = httpx.post(
            f"{root}/v1/messages", json={"model": MODEL, "max_tokens": "5", "messages": HELLO}
        )
        missing = httpx.post(f"{root}/v1/messages", json={"model": MODEL, "messages": HELLO})
        over_budget = httpx.post(
            f"{root}/v1/messages",
            json={
                "model": MODEL,
                "max_tokens": 1024,
                "thinking": {"type": "enabled", "budget_tokens": 1024},
                "messages": HELLO,
            },
        )
        with pytest.raises(anthropic.BadRequestError) as image:
            client(root).messages.create(
                model=MODEL,
                max_tokens=8,
                messages=[
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "image",
                                "source": {"type": "base64", "media_type": "image/png", "data": ""},
                            }
                        ],
                    }
                ],
            )
    for response in (wrong_type, missing, over_budget):
        assert response.status_code == 400
        assert response.json()["error"]["type"] == "invalid_request_error"
    # Anthropic's errors have no `param`: each message names the field instead.
    assert "'max_tokens'" in wrong_type.json()["error"]["message"]
    assert "'max_tokens'" in missing.json()["error"]["message"]
    assert "thinking.budget_tokens" in over_budget.json()["error"]["message"]
    assert _error(image.value) == (400, "invalid_request_error")
    assert "does not take images" in image.value.message


def test_keys_as_x_api_key_or_bearer_and_a_wrong_one_is_401() -> None:
    with server(FakeEngine(reply="ok"), api_key=[KEY]) as root:
        by_header = client(root).messages.create(model=MODEL, max_tokens=4, messages=HELLO)
        by_bearer = client(root, api_key=None, auth_token=KEY).messages.create(
            model=MODEL, max_tokens=4, messages=HELLO
        )
        with pytest.raises(anthropic.AuthenticationError) as refused:
            client(root, api_key="sk-wrong").messages.create(
                model=MODEL, max_tokens=4, messages=HELLO
            )
        openai_shape = httpx.post(f"{root}/v1/chat/completions", json={})
    assert by_header.content[0].type == "text"
    assert by_bearer.content[0].type == "text"
    assert _error(refused.value) == (401, "authentication_error")
    assert openai_shape.json()["error"]["type"] == "invalid_request_error"  # OpenAI's routes


def test_unknown_model_is_404_on_both_routes() -> None:
    with server(FakeEngine()) as root:
        sdk = client(root)
        with pytest.raises(anthropic.NotFoundError) as created:
            sdk.messages.create(model="claude-nope", max_tokens=4, messages=HELLO)
        with pytest.raises(anthropic.NotFoundError) as counted:
            sdk.messages.count_tokens(model="claude-nope", messages=HELLO)
    assert _error(created.value) == (404, "not_found_error")
    assert _error(counted.value) == (404, "not_found_error")


def test_too_large_is_413() -> None:
    with (
        server(FakeEngine(), max_request_bytes=1024) as root,
        pytest.raises(anthropic.APIStatusError) as refused,
    ):
        client(root).messages.create(
            model=MODEL, max_tokens=4, messages=[{"role": "user", "content": "x" * 2000}]
        )
    assert _error(refused.value) == (413, "request_too_large")


def test_over_the_rate_limit_is_429() -> None:
    with server(FakeEngine(), api_key=[KEY], rate_limit_rpm=1) as root:
        sdk = client(root)
        sdk.messages.create(model=MODEL, max_tokens=4, messages=HELLO)
        with pytest.raises(anthropic.RateLimitError) as refused:
            sdk.messages.create(model=MODEL, max_tokens=4, messages=HELLO)
    assert _error(refused.value) == (429, "rate_limit_error")
    assert refused.value.response.headers["retry-after"]


def test_an_engine_failure_is_500_and_load_shedding_529() -> None:
    failing = FakeEngine(fail_at_step=0, fault=RuntimeError("boom"))
    with server(failing) as root, pytest.raises(anthropic.InternalServerError) as failed:
        client(root).messages.create(model=MODEL, max_tokens=4, messages=HELLO)
    assert _error(failed.value) == (500, "api_error")
    busy = FakeEngine(fail_at_step=0, fault=EngineOverloadedError("The engine is full."))
    with server(busy) as root, pytest.raises(anthropic.OverloadedError) as shed:
        client(root).messages.create(model=MODEL, max_tokens=4, messages=HELLO)
    assert _error(shed.value) == (529, "overloaded_error")


def test_a_failure_after_the_stream_started_is_an_error_event() -> None:
    engine = FakeEngine(reply="one two three", fail_at_step=2, fault=RuntimeError("boom"))
    body = {"model": MODEL, "max_tokens": 16, "messages": HELLO, "stream": True}
    with server(engine) as root:
        with httpx.stream("POST", f"{root}/v1/messages", json=body) as response:
            lines = [line for line in response.iter_lines() if line]
        with (
            pytest.raises(anthropic.APIStatusError) as raised,
            client(root).messages.stream(model=MODEL, max_tokens=16, messages=HELLO) as stream,
        ):
            stream.get_final_message()
    assert response.status_code == 200
    assert lines[-2] == "event: error"
    assert json.loads(lines[-1].removeprefix("data: "))["error"]["type"] == "api_error"
    assert raised.value.body == {"type": "error", "error": json.loads(lines[-1][6:])["error"]}


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, "invalid_request_error"),
        (401, "authentication_error"),
        (403, "permission_error"),
        (404, "not_found_error"),
        (413, "request_too_large"),
        (429, "rate_limit_error"),
        (500, "api_error"),
    ],
)
def test_each_status_has_anthropics_type(status: int, kind: str) -> None:
    """Statuses the server does not reach through a client here (403: no route refuses a
    key's permission yet) still come out typed, from the one error function, on a path the
    feature registered its envelope for."""
    scope = {"type": "http", "path": "/v1/messages", ERROR_SHAPES: [ERROR_SHAPE]}
    response = error_response(HTTPException(status, "refused"), scope)
    assert response.status_code == status
    body = json.loads(response.body)
    assert (body["type"], set(body["error"]), body["error"]["type"]) == (
        "error",
        {"type", "message"},
        kind,
    )
