"""Wire schemas: strict request parsing and exact response serialization."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from schemas.chat import (
    AssistantMessage,
    ChatCompletionChoice,
    ChatCompletionChunkChoice,
    ChatCompletionDelta,
    ChatCompletionMessage,
    CreateChatCompletionRequest,
    CreateChatCompletionResponse,
    CreateChatCompletionStreamResponse,
    DeveloperMessage,
    ImageContentPart,
    SystemMessage,
    TextContentPart,
    UserMessage,
)
from schemas.common import CompletionUsage, ErrorObject, ErrorResponse
from schemas.completions import CompletionChoice, CreateCompletionRequest, CreateCompletionResponse


def parse_chat(body: dict[str, Any]) -> CreateChatCompletionRequest:
    return CreateChatCompletionRequest.model_validate_json(json.dumps(body).encode(), strict=True)


def chat(**fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "Hi"}]}
    body.update(fields)
    return body


# --- requests ----------------------------------------------------------------

# The request bodies of the spec's chat examples (CreateChatCompletion x-oaiMeta), verbatim.
SPEC_DEFAULT = {
    "model": "VAR_chat_model_id",
    "messages": [
        {"role": "developer", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Hello!"},
    ],
}
SPEC_IMAGE_INPUT = {
    "model": "gpt-5.4",
    "messages": [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in this image?"},
                {
                    "type": "image_url",
                    "image_url": {
                        "url": "https://upload.wikimedia.org/wikipedia/commons/thumb/d/dd/"
                        "Gfp-wisconsin-madison-the-nature-boardwalk.jpg/"
                        "2560px-Gfp-wisconsin-madison-the-nature-boardwalk.jpg"
                    },
                },
            ],
        }
    ],
    "max_tokens": 300,
}


def test_spec_default_example_parses() -> None:
    req = parse_chat(SPEC_DEFAULT)
    assert req.model == "VAR_chat_model_id"
    assert isinstance(req.messages[0], DeveloperMessage)
    assert isinstance(req.messages[1], UserMessage)
    assert req.messages[1].content == "Hello!"
    assert req.stream is False


def test_spec_streaming_example_parses() -> None:
    assert parse_chat({**SPEC_DEFAULT, "stream": True}).stream is True


def test_spec_image_example_parses_into_typed_parts() -> None:
    req = parse_chat(SPEC_IMAGE_INPUT)
    content = req.messages[0].content
    assert isinstance(content, list)
    assert isinstance(content[0], TextContentPart)
    assert content[0].text == "What is in this image?"
    assert isinstance(content[1], ImageContentPart)
    assert content[1].image_url.url.startswith("https://")
    assert req.max_tokens == 300


def test_system_and_user_with_text_part_arrays() -> None:
    req = parse_chat(
        chat(
            messages=[
                {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "Hello, "},
                        {"type": "text", "text": "you"},
                    ],
                },
            ]
        )
    )
    system, user = req.messages
    assert isinstance(system, SystemMessage)
    assert isinstance(user, UserMessage)
    assert isinstance(user.content, list)
    assert [p.text for p in user.content if isinstance(p, TextContentPart)] == ["Hello, ", "you"]


def test_assistant_message_with_tool_calls_and_null_content() -> None:
    req = parse_chat(
        chat(
            messages=[
                {"role": "user", "content": "Weather?"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
            ]
        )
    )
    assistant = req.messages[1]
    assert isinstance(assistant, AssistantMessage)
    assert assistant.content is None
    assert assistant.tool_calls is not None
    assert assistant.tool_calls[0].function.name == "get_weather"


def test_unknown_fields_are_ignored() -> None:
    req = parse_chat(
        chat(
            future_feature={"nested": [1, 2]},
            messages=[{"role": "user", "content": "Hi", "unknown_message_field": 1}],
            stream_options={"include_usage": True, "new_option": "x"},
        )
    )
    assert req.messages[0].content == "Hi"
    assert req.stream_options is not None
    assert req.stream_options.include_usage is True
    assert "future_feature" not in req.model_dump()


def test_integer_temperature_is_a_number() -> None:
    # JSON has one number type: `1` is a valid float even in strict mode.
    assert parse_chat(chat(temperature=1, top_p=1, frequency_penalty=0)).temperature == 1.0


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        ({"max_tokens": "5"}, ("max_tokens",)),
        ({"temperature": "hot"}, ("temperature",)),
        ({"n": 0}, ("n",)),
        ({"n": 1.5}, ("n",)),
        ({"temperature": 3}, ("temperature",)),
        ({"top_p": 1.5}, ("top_p",)),
        ({"max_tokens": -1}, ("max_tokens",)),
        ({"stream": "true"}, ("stream",)),
        ({"stop": ["a", "b", "c", "d", "e"]}, ("stop",)),
        ({"messages": []}, ("messages",)),
        ({"messages": [{"role": "wizard", "content": "Hi"}]}, ("messages", 0)),
        ({"messages": [{"role": "user"}]}, ("messages", 0, "user", "content")),
        ({"messages": [{"role": "user", "content": 5}]}, ("messages", 0, "user", "content")),
        ({"model": 5}, ("model",)),
    ],
)
def test_wrong_types_and_values_are_errors(fields: dict[str, Any], where: tuple[Any, ...]) -> None:
    with pytest.raises(ValidationError) as info:
        parse_chat(chat(**fields))
    assert all(error["loc"][: len(where)] == where for error in info.value.errors())


def test_missing_model_and_messages_are_errors() -> None:
    with pytest.raises(ValidationError) as info:
        CreateChatCompletionRequest.model_validate_json(b"{}", strict=True)
    missing = {e["loc"][0] for e in info.value.errors() if e["type"] == "missing"}
    assert missing == {"model", "messages"}


def test_completion_request_prompt_forms() -> None:
    def parse(prompt: Any) -> Any:
        body = json.dumps({"model": "m", "prompt": prompt}).encode()
        return CreateCompletionRequest.model_validate_json(body, strict=True).prompt

    assert parse("Say") == "Say"
    assert parse(["a", "b"]) == ["a", "b"]
    assert parse([1, 2, 3]) == [1, 2, 3]
    assert parse([[1], [2, 3]]) == [[1], [2, 3]]
    with pytest.raises(ValidationError):
        parse([[]])
    with pytest.raises(ValidationError):
        parse(5)


# --- responses ---------------------------------------------------------------


def _response(**fields: Any) -> CreateChatCompletionResponse:
    choice = ChatCompletionChoice(
        index=0,
        message=ChatCompletionMessage(content=None, refusal=None),
        logprobs=None,
        finish_reason=None,
    )
    return CreateChatCompletionResponse(
        id="chatcmpl-1", created=1, model="m", choices=[choice], **fields
    )


def test_required_nullable_fields_are_sent_as_null() -> None:
    data = json.loads(_response().to_json())
    choice = data["choices"][0]
    assert choice["finish_reason"] is None
    assert choice["logprobs"] is None
    assert choice["message"] == {"role": "assistant", "content": None, "refusal": None}
    assert data["object"] == "chat.completion"


def test_optional_fields_are_absent_unless_set() -> None:
    data = json.loads(_response().to_json())
    for name in ("usage", "system_fingerprint", "service_tier"):
        assert name not in data
    assert "stop_reason" not in data["choices"][0]
    assert "annotations" not in data["choices"][0]["message"]


def test_optional_fields_appear_once_set() -> None:
    usage = CompletionUsage(prompt_tokens=3, completion_tokens=4, total_tokens=7)
    data = json.loads(_response(usage=usage, system_fingerprint="fp").to_json())
    assert data["usage"] == {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
    assert data["system_fingerprint"] == "fp"


def test_usage_null_only_when_set_explicitly() -> None:
    def chunk() -> CreateChatCompletionStreamResponse:
        return CreateChatCompletionStreamResponse(id="c", created=1, model="m", choices=[])

    assert "usage" not in json.loads(chunk().to_json())
    assigned = chunk()
    assigned.usage = None
    assert json.loads(assigned.to_json())["usage"] is None
    passed = CreateChatCompletionStreamResponse(
        id="c", created=1, model="m", choices=[], usage=None
    )
    assert json.loads(passed.to_json())["usage"] is None


def test_stream_delta_omits_absent_fields() -> None:
    def choice(delta: ChatCompletionDelta) -> dict[str, Any]:
        chunk = CreateChatCompletionStreamResponse(
            id="c",
            created=1,
            model="m",
            choices=[
                ChatCompletionChunkChoice(index=0, delta=delta, logprobs=None, finish_reason=None)
            ],
        )
        data: dict[str, Any] = json.loads(chunk.to_json())
        assert data["object"] == "chat.completion.chunk"
        return data["choices"][0]  # type: ignore[no-any-return]

    assert choice(ChatCompletionDelta())["delta"] == {}
    assert choice(ChatCompletionDelta(content="Hi"))["delta"] == {"content": "Hi"}
    assert choice(ChatCompletionDelta(role="assistant", content=""))["delta"] == {
        "role": "assistant",
        "content": "",
    }
    first = choice(ChatCompletionDelta(content="x"))
    assert first["finish_reason"] is None
    assert first["logprobs"] is None


def test_completion_choice_serialization() -> None:
    response = CreateCompletionResponse(
        id="cmpl-1",
        created=1,
        model="m",
        choices=[CompletionChoice(index=0, text="", logprobs=None, finish_reason=None)],
    )
    data = json.loads(response.to_json())
    assert data["object"] == "text_completion"
    assert data["choices"] == [{"index": 0, "text": "", "logprobs": None, "finish_reason": None}]
    assert "usage" not in data


def test_error_object_keeps_null_param_and_code() -> None:
    body = ErrorResponse(error=ErrorObject(message="m", type="t", param=None, code=None))
    assert json.loads(body.to_json()) == {
        "error": {"message": "m", "type": "t", "param": None, "code": None}
    }


def test_response_models_reject_required_fields_left_out() -> None:
    with pytest.raises(ValidationError):
        ChatCompletionMessage(content="x")  # type: ignore[call-arg]
