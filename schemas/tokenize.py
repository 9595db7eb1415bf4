"""`/tokenize` and `/detokenize`: vLLM's extension endpoints, in vLLM's shapes.

They are not part of OpenAI's API; tools built for vLLM call them to count tokens and
to turn ids back into text. vLLM's two tokenize forms, a `prompt` or chat `messages`,
are one request model here, told apart by which of the two is present.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from schemas.common import RequestModel, ResponseModel


class TokenizeRequest(RequestModel):
    # vLLM makes `model` optional: without it, the served model is meant.
    model: str | None = None
    prompt: str | None = None
    # Checked as chat messages when rendered, exactly as `/v1/chat/completions` checks them.
    messages: Annotated[list[dict[str, Any]], Field(min_length=1)] | None = None
    # Unset: true for a prompt, false for messages (the chat template writes its own).
    add_special_tokens: bool | None = None
    add_generation_prompt: bool | None = None
    continue_final_message: bool | None = None
    chat_template_kwargs: dict[str, Any] | None = None
    chat_template: str | None = None
    tools: list[dict[str, Any]] | None = None
    return_token_strs: bool | None = False


class TokenizeResponse(ResponseModel):
    count: int
    max_model_len: int
    tokens: list[int]
    # Always sent, null unless asked for, as vLLM sends it.
    token_strs: list[str] | None


class DetokenizeRequest(RequestModel):
    model: str | None = None
    tokens: list[Annotated[int, Field(ge=0)]]


class DetokenizeResponse(ResponseModel):
    prompt: str
