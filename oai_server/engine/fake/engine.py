"""A scripted engine with the same interface as the vLLM adapter.

Used by the unit tests (deterministic output, injected failures, a record of calls
and aborts) and by the benchmarks to measure the web layer alone (zero-cost tokens).
Its tokenizer is byte-level: one token per UTF-8 byte of the text.
"""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import jinja2.sandbox

from oai_server.engine.chat_content import flattened, has_parts
from oai_server.engine.parsing import HarmonyParsing, ReasoningParsing
from oai_server.engine.protocol import Engine, Tokenizer, check_priority
from oai_server.engine.settings import SchedulingPolicy
from oai_server.engine.token_bytes import longest_token_bytes
from oai_server.engine.types import (
    ChoiceDelta,
    FinishReason,
    GenerationStep,
    ImageInput,
    ModelInfo,
    SamplingDefaults,
    SamplingOptions,
)
from oai_server.errors import EngineDeadError, EngineNotReadyError, ModelNotFoundError

# What an image part renders as, for the fake's string-content template.
IMAGE_PLACEHOLDER = "<image>"

# vLLM's default block size: its prefix cache reuses whole blocks of tokens.
CACHE_BLOCK_TOKENS = 16

DEFAULT_TEMPLATE = (
    "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


@functools.lru_cache(maxsize=8)
def _compile(source: str) -> jinja2.Template:
    # Compiled once, as transformers caches the real tokenizers' templates.
    return jinja2.sandbox.ImmutableSandboxedEnvironment().from_string(source)


class FakeTokenizer(Tokenizer):
    """One token per byte, and one per added token (`added`, ids from 256 on, as a model
    family's special tokens); a tiny Jinja chat template (`template`, else `DEFAULT_TEMPLATE`)."""

    def __init__(
        self, template: str | None = None, added: Sequence[str] = (), images: bool = False
    ) -> None:
        self.given = template
        self.given_added = tuple(added)
        self.template = template or DEFAULT_TEMPLATE
        # (Built only for added tokens: the hot-path test counts the fake's calls too.)
        self.added = {token: 256 + i for i, token in enumerate(added)} if added else {}
        self._split = re.compile("(" + "|".join(map(re.escape, added)) + ")") if added else None
        # Whether image parts are rendered (as `IMAGE_PLACEHOLDER`): the engine takes images.
        self.images = images

    def encode(self, text: str, *, add_special_tokens: bool = True) -> list[int]:
        if self._split is None:
            return list(text.encode())
        ids: list[int] = []
        for part in self._split.split(text):
            token = self.added.get(part)
            ids += [token] if token is not None else list(part.encode())
        return ids

    def decode(self, token_ids: Sequence[int]) -> str:
        if not self.added:
            return bytes(token_ids).decode(errors="replace")
        names = {i: token for token, i in self.added.items()}
        out, run = "", bytearray()
        for i in token_ids:
            if i in names:
                out += run.decode(errors="replace") + names[i]
                run = bytearray()
            else:
                run.append(i)
        return out + run.decode(errors="replace")

    def get_vocab(self) -> dict[str, int]:
        """Token strings to ids, as a Hugging Face tokenizer gives them."""
        return {chr(i): i for i in range(256)} | self.added

    def convert_tokens_to_ids(self, token: str) -> int | None:
        return self.get_vocab().get(token)

    def chat_template_source(self) -> str | None:
        return self.template

    # vLLM's own reasoning and harmony parsers read these bytes (and added tokens) as they
    # read a Hugging Face tokenizer, so the tests drive the parsers the server serves.
    def reasoning_parsing(self, reasoning_parser: str) -> ReasoningParsing:
        from oai_server.engine.vllm.reasoning import VLLMReasoningParsing

        return VLLMReasoningParsing(reasoning_parser, self)

    def harmony_parsing(self) -> HarmonyParsing:
        from oai_server.engine.vllm.harmony import VLLMHarmony

        return VLLMHarmony(self)

    def apply_chat_template(
        self,
        messages: list[dict[str, Any]],
        *,
        add_generation_prompt: bool,
        continue_final_message: bool = False,
        chat_template: str | None = None,
        tools: list[dict[str, Any]] | None = None,
        template_kwargs: dict[str, Any] | None = None,
    ) -> str:
        if self.images and has_parts(messages):
            messages = flattened(messages, IMAGE_PLACEHOLDER)
        rendered = _compile(chat_template or self.template).render(
            messages=messages,
            add_generation_prompt=add_generation_prompt,
            tools=tools,
            **(template_kwargs or {}),
        )
        if continue_final_message:
            rendered = rendered.rstrip("\n")
        return rendered


@dataclass
class Call:
    request_id: str
    prompt_token_ids: list[int]
    options: SamplingOptions


@dataclass
class FakeEngine(Engine):
    """Replies with `reply` split into `tokens` (words by default), one per step.

    `prefill_delay` seconds pass before the first step (a request queued or in
    prefill), `token_delay` seconds between steps; `fail_at_step` makes step k raise
    `fault` (by default `EngineDeadError`, and the engine stays dead); `finish_reason`
    replaces the reason the last step reports (say, vLLM's "error"); with `ignore_eos`
    the reply repeats until `max_tokens`; `reply_for`, if given, makes the reply from
    the rendered prompt (so concurrent requests can be told apart); with `prefix_cache`,
    steps report the prompt tokens an earlier prompt shared, as vLLM's cache does;
    `scheduling_policy` decides, as on the real engine, whether a `priority` is allowed.
    """

    reply: str = "Hello! How can I help you today?"
    tokens: list[str] | None = None
    token_delay: float = 0.0
    prefill_delay: float = 0.0
    fail_at_step: int | None = None
    fault: Exception | None = None
    finish_reason: FinishReason | None = None
    reply_for: Callable[[str], str] | None = None
    max_model_len: int = 2048
    # The model's own sampling defaults, as if read from its generation_config.json.
    sampling_defaults: SamplingDefaults = field(default_factory=SamplingDefaults)
    start_delay: float = 0.0
    scheduling_policy: SchedulingPolicy = "fcfs"
    # Report prompt tokens an earlier call shared as cached (off: the benchmarks' floor
    # must not pay for comparing every prompt with every earlier one).
    prefix_cache: bool = False
    # LoRA adapters served, {name: path}; a request to one is answered "[name] " + reply.
    adapters: dict[str, str] = field(default_factory=dict)
    # Raised by `load_adapter` (say, the error for weights of another model's shape).
    adapter_fault: Exception | None = None
    # The model's own chat template (None: `DEFAULT_TEMPLATE`), as a tokenizer carries it.
    chat_template: str | None = None
    # Images a prompt may carry (0: a text-only model), and the prompt tokens each adds.
    image_limit: int = 0
    image_tokens: int = 0
    # The longest image side its "processor" takes (None: images are kept as decoded).
    image_max_side: int | None = None
    # Special tokens the tokenizer adds to its bytes (a family's `<think>`...): with any,
    # each step reports its tokens' ids.
    added_tokens: tuple[str, ...] = ()
    # A real tokenizer in place of the byte-level one (say, the embedded model's with a
    # family's special tokens added, for vLLM's tool-call parsers), and the model's
    # architectures as its config would name them.
    model_tokenizer: Tokenizer | None = None
    architectures: tuple[str, ...] = ()
    calls: list[Call] = field(default_factory=list)
    aborted: list[str] = field(default_factory=list)
    _ready: bool = False
    _dead: bool = False
    _longest: int | None = None
    _running: set[str] = field(default_factory=set)
    _tokenizer: FakeTokenizer | None = field(default=None, repr=False, compare=False)
    # `tokens`' ids, with the list they are of: encoded once, not per request (the floor
    # counted a scripted answer's encoding, 256 tokenizer calls a request, as the server's).
    _tokens_ids: tuple[list[str], list[Sequence[int]]] | None = field(
        default=None, repr=False, compare=False
    )

    async def start(self) -> None:
        await asyncio.sleep(self.start_delay)
        # As the real engine: worked out before the engine says it is ready.
        self._longest = longest_token_bytes(self.tokenizer, self.model_info.vocab_size)
        self._ready = True

    async def stop(self) -> None:
        self._ready = False

    @property
    def model_info(self) -> ModelInfo:
        return ModelInfo(
            max_model_len=self.max_model_len,
            source="fake",
            vocab_size=256 + len(self.added_tokens) if self.added_tokens else 256,
            sampling_defaults=self.sampling_defaults,
            image_limit=self.image_limit,
            image_max_side=self.image_max_side,
            architectures=self.architectures,
            longest_token_bytes=self._longest,
        )

    @property
    def tokenizer(self) -> Tokenizer:
        if self.model_tokenizer is not None:
            return self.model_tokenizer
        # One tokenizer while its template and images stay, as a real engine holds its
        # own (one tokenizer for the life of the engine, not one per request).
        tokenizer = self._tokenizer
        images = self.image_limit > 0
        if (
            tokenizer is None
            or tokenizer.given is not self.chat_template
            or tokenizer.images != images
            or tokenizer.given_added != self.added_tokens
        ):
            tokenizer = self._tokenizer = FakeTokenizer(
                self.chat_template, self.added_tokens, images=images
            )
        return tokenizer

    def kill(self) -> None:
        """Make the engine behave as if its core process died."""
        self._dead = True

    async def check_health(self) -> None:
        if self._dead:
            raise EngineDeadError("The engine has stopped; restart the server.")
        if not self._ready:
            raise EngineNotReadyError("The engine is still loading the model.")

    def running_requests(self) -> int:
        return len(self._running)

    async def count_prompt_tokens(
        self, prompt_token_ids: list[int], images: Sequence[ImageInput]
    ) -> int:
        # As `generate` counts them: `image_tokens` for each image.
        return len(prompt_token_ids) + self.image_tokens * len(images)

    async def load_adapter(self, name: str, path: str) -> None:
        if self.adapter_fault is not None:
            raise self.adapter_fault
        self.adapters[name] = path

    async def unload_adapter(self, name: str) -> None:
        self.adapters.pop(name, None)

    async def abort(self, request_id: str) -> None:
        if request_id in self._running:
            self._running.discard(request_id)
            self.aborted.append(request_id)

    def _prefix_cached(self, prompt: list[int], salt: str | None) -> int:
        """Like vLLM's prefix cache: whole blocks of the longest prefix an earlier prompt
        shared under the same salt, never the last token (the engine recomputes it for the
        first output)."""
        if not self.prefix_cache:
            return 0
        best = 0
        for call in self.calls:
            if call.options.cache_salt != salt:
                continue
            earlier = call.prompt_token_ids
            same = next(
                (i for i, (a, b) in enumerate(zip(earlier, prompt, strict=False)) if a != b),
                min(len(earlier), len(prompt)),
            )
            best = max(best, same)
        best = min(best, len(prompt) - 1)
        return best - best % CACHE_BLOCK_TOKENS

    def _pieces(self, prompt_token_ids: list[int], adapter: str | None) -> list[str]:
        if self.tokens is not None:
            return self.tokens
        reply = self.reply
        if self.reply_for is not None:
            reply = self.reply_for(FakeTokenizer().decode(prompt_token_ids))
        if adapter is not None:
            reply = f"[{adapter}] {reply}"
        words = reply.split(" ")
        return [w if i == 0 else " " + w for i, w in enumerate(words)]

    async def generate(
        self, request_id: str, prompt_token_ids: list[int], options: SamplingOptions
    ) -> AsyncIterator[GenerationStep]:
        await self.check_health()
        check_priority(options, self.scheduling_policy)
        if options.adapter is not None and options.adapter not in self.adapters:
            raise ModelNotFoundError(f"The model '{options.adapter}' does not exist.")
        cached = self._prefix_cached(prompt_token_ids, options.cache_salt)
        self.calls.append(Call(request_id, list(prompt_token_ids), options))
        self._running.add(request_id)
        pieces = self._pieces(prompt_token_ids, options.adapter)
        texts = [""] * options.n
        done = [False] * options.n
        try:
            if self.prefill_delay:
                await asyncio.sleep(self.prefill_delay)
            queue_time: float | None = self.prefill_delay
            # Read once: the benchmarks' floor counts this loop as the web layer's cost.
            prompt_tokens, token_delay, fail_at = (
                len(prompt_token_ids)
                + (self.image_tokens * len(options.images) if options.images else 0),
                self.token_delay,
                self.fail_at_step,
            )
            running, choices = self._running, range(options.n)
            end, end_reason = _end(len(pieces), options)
            # One choice and no stop strings (most requests): nothing to track per step,
            # and a step between the first and the last is the same as every other step of
            # its piece, so it is built once (a reader never changes a step).
            single, count = options.n == 1 and not options.stop, len(pieces)
            tokenizer = self.model_tokenizer
            if tokenizer is None and self.added_tokens:
                tokenizer = self.tokenizer
            if tokenizer is None:
                ids: list[Sequence[int]] = [()] * count
            elif pieces is self.tokens:
                if self._tokens_ids is None or self._tokens_ids[0] is not pieces:
                    self._tokens_ids = (pieces, self._piece_ids(tokenizer, pieces))
                ids = self._tokens_ids[1]
            else:
                ids = self._piece_ids(tokenizer, pieces)
            middle = (
                [
                    GenerationStep(
                        prompt_tokens, [ChoiceDelta(0, p, 1, token_ids=i)], False, cached
                    )
                    for p, i in zip(pieces[:end], ids, strict=False)  # `step % count` < `end`
                ]
                if single
                else []
            )
            for k, built in enumerate(middle if ids else ()):
                built.choices[0].token_ids = ids[k]
            for step in range(options.max_tokens):
                if token_delay:
                    await asyncio.sleep(token_delay)
                if fail_at is not None and step >= fail_at:
                    if self.fault is not None:
                        raise self.fault
                    self._dead = True
                    raise EngineDeadError("The engine failed while generating.")
                if request_id not in running:
                    return
                if single and step and step + 1 < end:
                    out = middle[step % count]
                elif single:
                    k = step % count
                    delta = ChoiceDelta(0, pieces[k], 1, token_ids=ids[k])
                    if step + 1 >= end:
                        delta.finish_reason, done[0] = end_reason, True
                    out = GenerationStep(prompt_tokens, [delta], done[0], cached, None, queue_time)
                else:
                    out = GenerationStep(prompt_tokens, [], False, cached, None, queue_time)
                    for i in choices:
                        if not done[i]:
                            delta = self._advance(i, step, pieces, texts, done, options)
                            if ids:
                                delta.token_ids = ids[step % count]
                            out.choices.append(delta)
                            if not done[i] and step + 1 >= end:
                                delta.finish_reason, done[i] = end_reason, True
                    out.finished = all(done)
                queue_time = None
                if out.finished and self.finish_reason is not None:
                    for choice in out.choices:
                        choice.finish_reason = self.finish_reason
                yield out
                if out.finished:
                    return
        except (GeneratorExit, asyncio.CancelledError):
            # Like vLLM's AsyncLLM: a consumer that stops early aborts the request.
            if not all(done):
                await self.abort(request_id)
            raise
        finally:
            self._running.discard(request_id)

    @staticmethod
    def _piece_ids(tokenizer: Tokenizer, pieces: list[str]) -> list[Sequence[int]]:
        """Each piece's token ids (asked for only where a real tokenizer stands in or the
        tokenizer has added tokens: the benchmarks' floor must not pay for encoding)."""
        return [tokenizer.encode(p, add_special_tokens=False) for p in pieces]

    @staticmethod
    def _advance(
        i: int,
        step: int,
        pieces: list[str],
        texts: list[str],
        done: list[bool],
        options: SamplingOptions,
    ) -> ChoiceDelta:
        piece = pieces[step % len(pieces)]
        delta = ChoiceDelta(i, piece, 1)
        if options.stop:
            # Only stop strings need the text so far (kept per choice, not per step).
            before = texts[i]
            texts[i] += piece
            for stop in options.stop:
                at = texts[i].find(stop)
                if at != -1:
                    delta.text = texts[i][len(before) : at] if at >= len(before) else ""
                    delta.finish_reason, delta.stop_reason = "stop", stop
                    done[i] = True
                    return delta
        return delta


def _end(count: int, options: SamplingOptions) -> tuple[int, FinishReason]:
    """After how many steps a reply of `count` pieces ends, and why: the length limit
    first, then the end of the reply (unless `ignore_eos` repeats it)."""
    if options.ignore_eos or count >= options.max_tokens:
        return options.max_tokens, "length"
    return count, "stop"
