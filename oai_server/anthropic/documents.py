"""Anthropic's text-bearing blocks as the text the model is shown.

A `document` whose source is text (`{"type": "text", "data"}`) or text blocks
(`{"type": "content", "content"}`), and a `search_result`, reach the prompt as their
title, context and text, one after the other. A PDF (a `base64`, `url` or `file` source)
has no text here to show: it is refused, never left out, as the answer would not have
read it.
"""

from __future__ import annotations

from typing import Any

from oai_server.errors import UnsupportedParameterError
from schemas.anthropic import DocumentBlockParam, SearchResultBlockParam


def _unreadable(param: str) -> UnsupportedParameterError:
    return UnsupportedParameterError(
        "Only text documents (a 'text' or 'content' source of text blocks) are supported; "
        "PDF documents are not.",
        param=param,
    )


def _source_text(source: dict[str, Any], param: str) -> str:
    kind = source.get("type")
    if kind == "text" and isinstance(source.get("data"), str):
        return str(source["data"])
    content = source.get("content")
    if kind == "content" and isinstance(content, str):
        return content
    if kind == "content" and isinstance(content, list):
        texts = [block.get("text") for block in content if isinstance(block, dict)]
        if len(texts) == len(content) and all(isinstance(text, str) for text in texts):
            return "\n".join(str(text) for text in texts)
    raise _unreadable(f"{param}.source")


def _joined(*parts: str | None) -> str:
    return "\n\n".join(part for part in parts if part)


def block_text(block: DocumentBlockParam | SearchResultBlockParam, param: str) -> str:
    """The text of a document or search result block, titled, as the model is shown it."""
    if isinstance(block, SearchResultBlockParam):
        return _joined(block.title, block.source, "\n".join(part.text for part in block.content))
    return _joined(block.title, block.context, _source_text(block.source, param))
