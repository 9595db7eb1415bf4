"""Messages whose content is a list of parts (text and images), for templates that want a string.

The server hands a tokenizer's `apply_chat_template` OpenAI-shaped content lists where a
message carries an image (`{"type": "image"}` parts among `{"type": "text", ...}`).
Templates written for vision models iterate such lists and write their own image token;
a template that only reads `content` as a string gets each image's placeholder in front
of the text instead, as vLLM's chat parsing does (`_get_full_multimodal_text_prompt`).
"""

from __future__ import annotations

from typing import Any


def has_parts(messages: list[dict[str, Any]]) -> bool:
    """Whether any message's content is a list of parts."""
    return any(isinstance(m.get("content"), list) for m in messages)


def flattened(messages: list[dict[str, Any]], placeholder: str) -> list[dict[str, Any]]:
    """`messages` with each content list as one string: a `placeholder` line per image,
    then the text."""
    out = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            images = sum(1 for part in content if part.get("type") == "image")
            text = "".join(part.get("text", "") for part in content if part.get("type") == "text")
            message = {**message, "content": "\n".join([placeholder] * images + [text])}
        out.append(message)
    return out
