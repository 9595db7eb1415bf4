"""What both vLLM adapters (chat and embeddings) keep of their `AsyncLLM`: the engine
itself, its tokenizer and its processes; ready or not, alive or not; and how it stops.

vllm is not imported here (only its types, for the checker): each adapter imports it in
its `start`, so that importing the server does not import the engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

from oai_server.engine.chat_content import flattened, has_parts
from oai_server.engine.parsing import HarmonyParsing, OutputParsing, ReasoningParsing
from oai_server.engine.protocol import Tokenizer
from oai_server.engine.token_bytes import longest_token_bytes
from oai_server.engine.vllm.watchdog import Watchdog
from oai_server.errors import EngineDeadError, EngineNotReadyError

if TYPE_CHECKING:
    from vllm.v1.engine.async_llm import AsyncLLM

logger = logging.getLogger(__name__)


class VLLMTokenizer(Tokenizer):
    """The engine's own Hugging Face tokenizer, so server and engine count alike."""

    def __init__(self, hf_tokenizer: Any, image_placeholder: str | None = None) -> None:
        self._tok = hf_tokenizer
        # What a string-content template gets for each image (the model's own token).
        self._image_placeholder = image_placeholder

    @property
    def backend(self) -> Any:
        """The Hugging Face tokenizer itself, for what only the vLLM adapters do with it."""
        return self._tok

    def encode(self, text: str, *, add_special_tokens: bool = True) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=add_special_tokens))

    def decode(self, token_ids: Sequence[int]) -> str:
        return str(self._tok.decode(list(token_ids)))

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
        if has_parts(messages) and self._image_placeholder is not None:
            messages = self._as_template_wants(messages, chat_template)
        return str(
            self._tok.apply_chat_template(
                messages,
                tools=tools,
                chat_template=chat_template,
                add_generation_prompt=add_generation_prompt,
                continue_final_message=continue_final_message,
                tokenize=False,
                **(template_kwargs or {}),
            )
        )

    def _as_template_wants(
        self, messages: list[dict[str, Any]], chat_template: str | None
    ) -> list[dict[str, Any]]:
        """Content lists as they are for a template that iterates them, else flattened:
        vLLM's own detection of the template's content format decides."""
        from vllm.renderers.hf import _detect_content_format

        template = chat_template or getattr(self._tok, "chat_template", None)
        if template and _detect_content_format(template, default="string") == "openai":
            return messages
        return flattened(messages, self._image_placeholder or "")

    def chat_template_source(self) -> str | None:
        template = getattr(self._tok, "chat_template", None)
        if isinstance(template, dict):  # named templates: the default one
            template = template.get("default") or next(iter(template.values()), None)
        return template if isinstance(template, str) else None

    def special_tokens(self) -> frozenset[str]:
        added = set(self._tok.get_added_vocab())
        return frozenset(added | set(getattr(self._tok, "all_special_tokens", ())))

    def output_parsing(self, tool_call_parser: str) -> OutputParsing:
        from oai_server.engine.vllm.parsing import VLLMOutputParsing

        return VLLMOutputParsing(tool_call_parser, self._tok)

    def reasoning_parsing(self, reasoning_parser: str) -> ReasoningParsing:
        from oai_server.engine.vllm.reasoning import VLLMReasoningParsing

        return VLLMReasoningParsing(reasoning_parser, self._tok)

    def harmony_parsing(self) -> HarmonyParsing:
        from oai_server.engine.vllm.harmony import VLLMHarmony

        return VLLMHarmony(self._tok)


class AsyncLLMHolder:
    """An `AsyncLLM` once started; `_what` names the engine in what a client is told."""

    _what = "engine"

    def __init__(self) -> None:
        self._llm: AsyncLLM | None = None
        self._tokenizer: VLLMTokenizer | None = None
        # The engine's processes (core, workers), noted once started: if the core is
        # killed its workers are orphaned, out of reach of a later look at our children.
        self._processes: list[Any] = []
        self._watchdog: Watchdog | None = None

    def _watch(self) -> set[int]:
        """Start this engine's watchdog, before the engine (see `watchdog`); the pids of
        the processes already running, the watchdog's own included (not the engine's)."""
        known = {p.pid for p in engine_processes()}
        self._watchdog = Watchdog.start(known)
        return known | {self._watchdog.pid}

    def _hold(self, llm: AsyncLLM, known: Collection[int], tokenizer: VLLMTokenizer) -> None:
        """Keep `llm` (started while the processes in `known` already ran) and its
        tokenizer: from here on the engine says it is ready."""
        self._tokenizer = tokenizer
        self._llm = llm
        self._processes = engine_processes(known)
        if self._watchdog is not None:
            self._watchdog.adopt(self._processes)

    async def stop(self) -> None:
        llm, self._llm = self._llm, None
        if llm is not None:
            # Its output handler first: vLLM's `shutdown` stops the core, then cancels
            # the handler, which meanwhile reads the closed core as dead and logs a
            # traceback, on a clean stop (seen on a loaded machine).
            handler: asyncio.Task[None] | None = getattr(llm, "output_handler", None)
            if handler is not None:
                handler.cancel()
                await asyncio.wait([handler])
            await asyncio.to_thread(llm.shutdown)
        reap(self._processes)
        self._processes = []
        watchdog, self._watchdog = self._watchdog, None
        if watchdog is not None:
            await asyncio.to_thread(watchdog.close)

    @property
    def tokenizer(self) -> VLLMTokenizer:
        if self._tokenizer is None:
            raise EngineNotReadyError(f"The {self._what} is still loading the model.")
        return self._tokenizer

    def _ready_llm(self) -> AsyncLLM:
        if self._llm is None:
            raise EngineNotReadyError(f"The {self._what} is still loading the model.")
        if self._llm.errored:
            raise EngineDeadError(f"The {self._what} has stopped; restart the server.")
        return self._llm

    async def check_health(self) -> None:
        self._ready_llm()

    def running_requests(self) -> int:
        return 0 if self._llm is None else self._llm.get_num_unfinished_requests()


def longest_token(tokenizer: VLLMTokenizer, vocab_size: int) -> int | None:
    """`longest_token_bytes`, or None (no bound: prompts are tokenized in full) where a
    tokenizer fails it: a start never fails for want of a shortcut."""
    began = time.monotonic()
    try:
        longest = longest_token_bytes(tokenizer, vocab_size)
    except Exception:  # whatever a tokenizer raises, the engine serves on
        logger.warning("no bound on prompt tokens for this tokenizer", exc_info=True)
        return None
    logger.debug("longest token: %s bytes (%.1f s)", longest, time.monotonic() - began)
    return longest


def engine_processes(known: Collection[int] = ()) -> list[Any]:
    """This process's descendants now but those in `known` (another engine's): the
    engine's core and workers, not Python's own helpers (multiprocessing's resource
    tracker). psutil comes with vLLM."""
    import psutil

    found = []
    for process in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if process.pid in known:
                continue
            if "resource_tracker" not in " ".join(process.cmdline()):
                found.append(process)
    return found


def _alive(process: Any) -> bool:
    import psutil

    try:
        return bool(process.is_running() and process.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def reap(processes: list[Any]) -> None:
    """Kill whatever of `processes` outlived the engine's shutdown (the workers of a
    core that was killed keep running otherwise, and hold the interpreter's exit)."""
    import psutil

    alive = [p for p in processes if _alive(p)]
    for process in alive:
        logger.warning("killing engine process %d left running", process.pid)
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(alive, timeout=5)
