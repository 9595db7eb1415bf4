"""`/tokenize` and `/detokenize`: a served chat model's tokenizer, as vLLM exposes it."""

from __future__ import annotations

from dataclasses import dataclass, field

from oai_server.dialects.model import ModelDialects
from oai_server.dialects.tool_calls.plan import template_tool
from oai_server.engine.protocol import Engine
from oai_server.errors import InvalidRequestError, UnsupportedParameterError
from oai_server.generation.chat_template import image_refs, render_prompt
from oai_server.generation.offload import off_loop
from oai_server.models import ModelRegistry
from oai_server.services.common import Target, check_model
from schemas.chat import CreateChatCompletionRequest
from schemas.tokenize import (
    DetokenizeRequest,
    DetokenizeResponse,
    TokenizeRequest,
    TokenizeResponse,
)


@dataclass
class TokenizeService:
    """Serves `/tokenize` and `/detokenize` with the tokenizer of the model a request names
    (the first chat model when it names none)."""

    engine: Engine
    model_name: str
    chat_template: str | None = None
    models: ModelRegistry | None = None
    # Each model's dialect (the chat service's): a gpt-oss prompt is harmony's.
    dialects: ModelDialects | None = None
    _dialects: ModelDialects = field(init=False)

    def __post_init__(self) -> None:
        self._dialects = self.dialects or ModelDialects(self.engine)

    def _target(self, model: str | None) -> Target:
        if model is None:
            return Target(self.model_name)
        return check_model(model, self.model_name, models=self.models)

    async def tokenize(self, req: TokenizeRequest) -> TokenizeResponse:
        """The token ids of a prompt, or of a conversation rendered as chat completions would:
        off the event loop when it is long (`off_loop`)."""
        target = self._target(req.model)
        engine = self.engine.serving(target.model)
        size = len(req.prompt or "") + sum(len(str(m.get("content"))) for m in req.messages or ())
        return await off_loop(size, self._tokenize, req, engine, target)

    def _tokenize(self, req: TokenizeRequest, engine: Engine, target: Target) -> TokenizeResponse:
        tokenizer = engine.tokenizer
        if req.messages is not None:
            if req.prompt is not None:
                raise InvalidRequestError(
                    "Give either 'prompt' or 'messages', not both.", param="prompt"
                )
            tokens = self._chat_tokens(req, engine, target)
        elif req.prompt is not None:
            add_special = req.add_special_tokens is not False
            tokens = tokenizer.encode(req.prompt, add_special_tokens=add_special)
        else:
            raise InvalidRequestError(
                "Missing required parameter: 'prompt' or 'messages'.",
                param="prompt",
                code="missing_required_parameter",
            )
        return TokenizeResponse(
            count=len(tokens),
            max_model_len=engine.model_info.max_model_len,
            tokens=tokens,
            # One id at a time: the text each token stands for (a lone byte of a
            # multi-byte character shows as U+FFFD).
            token_strs=[tokenizer.decode([t]) for t in tokens] if req.return_token_strs else None,
        )

    def _chat_tokens(self, req: TokenizeRequest, engine: Engine, target: Target) -> list[int]:
        if req.chat_template is not None:
            raise UnsupportedParameterError(
                "A per-request 'chat_template' is not accepted; the server's template is used.",
                param="chat_template",
            )
        if req.add_special_tokens:
            raise UnsupportedParameterError(
                "'add_special_tokens' with 'messages' is not supported: the chat template "
                "writes the special tokens the model expects.",
                param="add_special_tokens",
            )
        # Validated as a chat completion request, so a conversation counts here exactly
        # as it does in `usage.prompt_tokens`, and is refused for the same reasons.
        chat = CreateChatCompletionRequest.model_validate(
            {
                "model": target.name,
                "messages": req.messages,
                "tools": req.tools,
                "add_generation_prompt": req.add_generation_prompt,
                "continue_final_message": req.continue_final_message,
                "chat_template_kwargs": req.chat_template_kwargs,
            },
            strict=True,
        )
        refs = image_refs(chat)
        if refs:
            raise UnsupportedParameterError(
                "/tokenize counts text only; an image's tokens are counted in a chat "
                "completion's usage.prompt_tokens.",
                param=refs[0].param,
            )
        harmony = self._dialects.of(target.model).harmony
        if harmony is not None:  # gpt-oss: rendered with harmony, as its chat completions are
            return harmony.render(chat).prompt_token_ids
        # As vLLM does, tools are shown to the template whatever a later tool_choice would be.
        tools = [template_tool(t) for t in chat.tools] if chat.tools else None
        template = self.chat_template if target.model == self.model_name else None
        return render_prompt(chat, engine.tokenizer, template, tools)

    async def detokenize(self, req: DetokenizeRequest) -> DetokenizeResponse:
        """The text that `req.tokens` stand for, off the event loop when they are many."""
        return await off_loop(len(req.tokens), self._detokenize, req)

    def _detokenize(self, req: DetokenizeRequest) -> DetokenizeResponse:
        engine = self.engine.serving(self._target(req.model).model)
        vocab_size = engine.model_info.vocab_size
        unknown = [t for t in req.tokens if not 0 <= t < vocab_size]
        if unknown:
            # The tokenizer would quietly decode them as "".
            raise InvalidRequestError(
                f"Token id {unknown[0]} is out of vocabulary (size {vocab_size}).", param="tokens"
            )
        return DetokenizeResponse(prompt=engine.tokenizer.decode(req.tokens))
