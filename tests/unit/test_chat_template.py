"""Rendering a conversation into prompt tokens with the fake (byte-level) tokenizer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from oai_server.engine.fake import FakeTokenizer
from oai_server.errors import InvalidRequestError, UnsupportedParameterError
from oai_server.generation.chat_template import load_template, render_prompt
from schemas.chat import CreateChatCompletionRequest

TOKENIZER = FakeTokenizer()


def request(messages: list[dict[str, Any]], **fields: Any) -> CreateChatCompletionRequest:
    body = json.dumps({"model": "m", "messages": messages, **fields}).encode()
    return CreateChatCompletionRequest.model_validate_json(body, strict=True)


def render(messages: list[dict[str, Any]], template: str | None = None, **fields: Any) -> str:
    return TOKENIZER.decode(render_prompt(request(messages, **fields), TOKENIZER, template))


def test_default_template_with_generation_prompt() -> None:
    text = render([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}])
    assert text == "<|system|>Be brief.\n<|user|>Hi\n<|assistant|>"


def test_prompt_tokens_are_the_tokenizer_encoding() -> None:
    req = request([{"role": "user", "content": "héllo"}])
    tokens = render_prompt(req, TOKENIZER, None)
    assert tokens == list("<|user|>héllo\n<|assistant|>".encode())


def test_text_parts_are_joined() -> None:
    parts = [{"type": "text", "text": "Hello, "}, {"type": "text", "text": "world"}]
    assert render([{"role": "user", "content": parts}]) == render(
        [{"role": "user", "content": "Hello, world"}]
    )


def test_image_part_renders_as_a_placeholder_before_the_text() -> None:
    image = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
    messages = [{"role": "user", "content": [{"type": "text", "text": "look"}, image]}]
    tokenizer = FakeTokenizer(images=True)  # a model that takes images
    text = tokenizer.decode(render_prompt(request(messages), tokenizer, None))
    assert text == "<|user|><image>\nlook\n<|assistant|>"


@pytest.mark.parametrize("index", [0, 2])
def test_audio_part_is_refused_naming_the_message(index: int) -> None:
    audio = {"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
    ]
    messages[index] = {"role": "user", "content": [{"type": "text", "text": "hear"}, audio]}
    with pytest.raises(UnsupportedParameterError) as info:
        render(messages)
    assert info.value.param == f"messages[{index}].content"
    assert info.value.status_code == 400
    assert "input_audio" in info.value.message


def test_continue_final_message_extends_the_assistant_turn() -> None:
    text = render(
        [{"role": "user", "content": "Count"}, {"role": "assistant", "content": "1, 2,"}],
        continue_final_message=True,
    )
    assert text == "<|user|>Count\n<|assistant|>1, 2,"


def test_continue_final_message_requires_a_final_assistant_message() -> None:
    with pytest.raises(InvalidRequestError) as info:
        render([{"role": "user", "content": "Count"}], continue_final_message=True)
    assert info.value.param == "continue_final_message"


def test_continue_final_message_conflicts_with_generation_prompt() -> None:
    with pytest.raises(InvalidRequestError) as info:
        render(
            [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hel"}],
            continue_final_message=True,
            add_generation_prompt=True,
        )
    assert info.value.param == "continue_final_message"


def test_add_generation_prompt_false() -> None:
    assert render([{"role": "user", "content": "Hi"}], add_generation_prompt=False) == (
        "<|user|>Hi\n"
    )


def test_custom_template_is_used() -> None:
    template = "{% for m in messages %}[{{ m.role | upper }}] {{ m.content }};{% endfor %}"
    text = render([{"role": "user", "content": "Hi"}], template)
    assert text == "[USER] Hi;"


def test_custom_template_loaded_from_file(tmp_path: Path) -> None:
    path = tmp_path / "template.jinja"
    path.write_text("{{ messages | length }} message(s)")
    assert load_template(None) is None
    assert render([{"role": "user", "content": "Hi"}], load_template(path)) == "1 message(s)"


def test_chat_template_kwargs_reach_the_template() -> None:
    template = "{% if enable_thinking %}think{% else %}fast{% endif %}"
    messages = [{"role": "user", "content": "Hi"}]
    assert render(messages, template, chat_template_kwargs={"enable_thinking": True}) == "think"
    assert render(messages, template) == "fast"


def test_tool_and_assistant_tool_call_fields_reach_the_template() -> None:
    template = (
        "{% for m in messages %}"
        "{{ m.role }}"
        "{% if m.tool_calls %}:{% for c in m.tool_calls %}"
        "{{ c.id }}/{{ c.type }}/{{ c.function.name }}({{ c.function.arguments }})"
        "{% endfor %}{% endif %}"
        "{% if m.tool_call_id %}<{{ m.tool_call_id }}>{% endif %}"
        "{% if m.name %}#{{ m.name }}{% endif %}"
        "={{ m.content }};"
        "{% endfor %}"
    )
    text = render(
        [
            {"role": "user", "content": "Weather in Paris?", "name": "ann"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        ],
        template,
    )
    assert text == (
        "user#ann=Weather in Paris?;"
        'assistant:call_1/function/get_weather({"city":"Paris"})=;'
        "tool<call_1>=sunny;"
    )


def test_template_errors_become_invalid_request() -> None:
    template = "{{ raise_exception('roles must alternate') }}"
    with pytest.raises(InvalidRequestError) as info:
        render([{"role": "user", "content": "Hi"}], template)
    assert info.value.param == "messages"
    assert info.value.status_code == 400
