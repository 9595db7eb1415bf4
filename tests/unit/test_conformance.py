"""The OpenAI-spec conformance checker bites: bad bodies fail, good ones pass."""

from __future__ import annotations

import copy
from collections.abc import Iterator

import pytest
from jsonschema import Draft202012Validator

from tests.conformance import (
    COMPLETION_STREAM_SCHEMA,
    check,
    load_schemas,
    schema_for,
    to_json_schema,
    validate,
)
from tests.unit.spec_examples import (
    CHAT_COMPLETION,
    CHUNKS,
    COMPLETION,
    ERROR,
    MODEL,
    RESPONSE_SCHEMAS,
    fails,
)

# --- schemas -------------------------------------------------------------------


def test_spec_examples_conform() -> None:
    validate("CreateChatCompletionResponse", CHAT_COMPLETION)
    for chunk in CHUNKS:
        validate("CreateChatCompletionStreamResponse", chunk)
    validate("CreateCompletionResponse", COMPLETION)
    validate("ListModelsResponse", {"object": "list", "data": [MODEL]})
    validate("Model", MODEL)
    validate("ErrorResponse", ERROR)
    validate(
        "ErrorResponse",
        {"error": {"message": "x", "type": "t", "param": "model", "code": "model_not_found"}},
    )


def test_rewritten_schemas_are_json_schema() -> None:
    schemas = load_schemas()
    for name in (*RESPONSE_SCHEMAS, COMPLETION_STREAM_SCHEMA):
        Draft202012Validator.check_schema(schemas[name])
    leftovers = {"nullable", "discriminator", "x-oaiMeta", "x-stainless-const"}

    def keywords(node: object) -> Iterator[str]:
        if isinstance(node, dict):
            for key, value in node.items():
                yield key
                yield from keywords(value)
        elif isinstance(node, list):
            for item in node:
                yield from keywords(item)

    # Property names may collide, so look only for keys that are never property names here.
    assert not leftovers & set(keywords(schemas))


def test_integer_error_code_fails() -> None:
    fails(
        "ErrorResponse",
        {"error": {"message": "x", "type": "t", "param": None, "code": 400}},
        "$.error.code",
        "400 is not of type 'string'",
    )


def test_error_without_param_fails() -> None:
    fails(
        "ErrorResponse",
        {"error": {"message": "x", "type": "t", "code": None}},
        "'param' is a required property",
    )


def test_missing_finish_reason_fails() -> None:
    body = copy.deepcopy(CHAT_COMPLETION)
    del body["choices"][0]["finish_reason"]
    fails(
        "CreateChatCompletionResponse", body, "$.choices[0]: 'finish_reason' is a required property"
    )


def test_unknown_finish_reason_fails() -> None:
    body = copy.deepcopy(CHAT_COMPLETION)
    body["choices"][0]["finish_reason"] = "eos"
    fails("CreateChatCompletionResponse", body, "$.choices[0].finish_reason", "'eos' is not one of")


def test_null_tool_calls_fails() -> None:
    # ChatCompletionMessageToolCalls is a plain array: omit it, never send null.
    body = copy.deepcopy(CHAT_COMPLETION)
    body["choices"][0]["message"]["tool_calls"] = None
    fails(
        "CreateChatCompletionResponse",
        body,
        "$.choices[0].message.tool_calls: None is not of type 'array'",
    )
    body["choices"][0]["message"]["tool_calls"] = [
        {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    ]
    validate("CreateChatCompletionResponse", body)


def test_message_content_must_be_present() -> None:
    body = copy.deepcopy(CHAT_COMPLETION)
    del body["choices"][0]["message"]["content"]
    fails("CreateChatCompletionResponse", body, "'content' is a required property")


def test_chunk_with_nulls_conforms() -> None:
    chunk = copy.deepcopy(CHUNKS[1])
    chunk["usage"] = None  # nullable $ref (OpenAPI 3.0 style, next to $ref)
    validate("CreateChatCompletionStreamResponse", chunk)


def test_chunk_nullable_fields_still_typed() -> None:
    chunk = copy.deepcopy(CHUNKS[1])
    chunk["choices"][0]["finish_reason"] = "eos"  # nullable enum: null yes, other strings no
    chunk["usage"] = {"prompt_tokens": 1}
    fails(
        "CreateChatCompletionStreamResponse",
        chunk,
        "$.choices[0].finish_reason",
        "$.usage",
        "'completion_tokens' is a required property",
    )


def test_usage_only_chunk_conforms() -> None:
    chunk = {
        **CHUNKS[0],
        "choices": [],
        "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
    }
    validate("CreateChatCompletionStreamResponse", chunk)


def test_completion_stream_chunk_may_have_null_finish_reason_and_usage() -> None:
    chunk = copy.deepcopy(COMPLETION)
    chunk["choices"][0]["finish_reason"] = None
    validate(COMPLETION_STREAM_SCHEMA, chunk)
    fails("CreateCompletionResponse", chunk, "$.choices[0].finish_reason")
    chunk["usage"] = None  # with stream_options.include_usage, per ChatCompletionStreamOptions
    validate(COMPLETION_STREAM_SCHEMA, chunk)
    fails("CreateCompletionResponse", chunk, "$.usage")
    chunk["choices"][0]["finish_reason"] = "tool_calls"
    chunk["usage"] = {"total_tokens": 1}
    fails(COMPLETION_STREAM_SCHEMA, chunk, "$.choices[0].finish_reason", "$.usage")


def test_model_must_be_an_object() -> None:
    # The spec's Model has properties but no "type: object".
    fails("Model", "m", "'m' is not of type 'object'")
    fails("ListModelsResponse", {"object": "list", "data": ["m"]}, "$.data[0]")


def test_model_requires_owned_by() -> None:
    fails(
        "Model", {"id": "m", "object": "model", "created": 1}, "'owned_by' is a required property"
    )


def test_unknown_schema_name() -> None:
    with pytest.raises(KeyError):
        check("NoSuchSchema", {})


def test_to_json_schema_rewrites_openapi_keywords() -> None:
    schema = to_json_schema(
        {
            "type": "object",
            "x-oaiMeta": {"name": "x"},
            "discriminator": {"propertyName": "kind"},
            "example": {"a": 1},
            "properties": {
                "nullable": {"type": "string", "enum": ["a"], "nullable": True, "description": "d"},
                "ref": {"$ref": "#/components/schemas/X", "nullable": True},
                "any": {"nullable": True, "description": "anything"},
                "never_null": {"type": "integer", "nullable": False},
                "untyped": {"properties": {"a": {}}},
                "combined": {"properties": {"a": {}}, "anyOf": [{"type": "object"}]},
            },
        }
    )
    assert schema == {
        "type": "object",
        "properties": {
            "nullable": {
                "description": "d",
                "anyOf": [{"type": "string", "enum": ["a"]}, {"type": "null"}],
            },
            "ref": {"anyOf": [{"$ref": "#/components/schemas/X"}, {"type": "null"}]},
            "any": {"description": "anything"},
            "never_null": {"type": "integer"},
            "untyped": {"properties": {"a": {}}, "type": "object"},
            "combined": {"properties": {"a": {}}, "anyOf": [{"type": "object"}]},
        },
    }


@pytest.mark.parametrize(
    ("method", "path", "status", "streamed", "expected"),
    [
        ("POST", "/v1/chat/completions", 200, False, "CreateChatCompletionResponse"),
        ("POST", "/v1/chat/completions", 200, True, "CreateChatCompletionStreamResponse"),
        ("POST", "/prefix/v1/chat/completions", 200, False, "CreateChatCompletionResponse"),
        (
            "POST",
            "http://127.0.0.1:8000/v1/chat/completions?x=1",
            200,
            False,
            "CreateChatCompletionResponse",
        ),
        ("POST", "/v1/completions", 200, False, "CreateCompletionResponse"),
        ("POST", "/v1/completions", 200, True, COMPLETION_STREAM_SCHEMA),
        ("GET", "/v1/models", 200, False, "ListModelsResponse"),
        ("GET", "/v1/models/org/model-7b", 200, False, "Model"),
        ("POST", "/v1/chat/completions", 400, False, "ErrorResponse"),
        ("GET", "/v1/models/nope", 404, False, "ErrorResponse"),
        ("POST", "/v1/chat/completions", 503, True, "ErrorResponse"),
        ("GET", "/health", 200, False, None),
        ("GET", "/metrics", 200, False, None),
        ("POST", "/tokenize", 200, False, None),
        ("GET", "/v1/chat/completions", 200, False, "ChatCompletionList"),
        ("GET", "/v1/chat/completions/chatcmpl-1", 200, False, "CreateChatCompletionResponse"),
        ("POST", "/v1/chat/completions/chatcmpl-1", 200, False, "CreateChatCompletionResponse"),
        ("DELETE", "/v1/chat/completions/chatcmpl-1", 200, False, "ChatCompletionDeleted"),
        ("GET", "/v1/chat/completions/c/messages", 200, False, "ChatCompletionMessageList"),
        ("PUT", "/v1/chat/completions", 200, False, None),
        ("DELETE", "/v1/models/m", 200, False, None),
    ],
)
def test_schema_for(
    method: str, path: str, status: int, streamed: bool, expected: str | None
) -> None:
    assert schema_for(method, path, status, streamed) == expected
