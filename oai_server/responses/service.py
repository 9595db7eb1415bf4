"""`/v1/responses`: a Responses request in, the chat service's generation, Responses events out.

`prepare` validates and rebuilds the context (from `previous_response_id` or a
conversation, on the store); `start` admits it to the engine, so refusals still get
their HTTP status; `events` streams it, storing the finished response (and growing its
conversation) just before the last event goes out; `complete` is the fold of those events.
"""

from __future__ import annotations

import base64
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from oai_server.errors import ContextLengthExceededError, InvalidRequestError, OpenAIError
from oai_server.ids import new_id
from oai_server.items.context import oldest_to_drop
from oai_server.responses import compaction
from oai_server.responses.items import image_files, seal_reasoning, to_context, to_items
from oai_server.responses.state import ResponseState, now_us
from oai_server.responses.stream import ResponseRun, RunEvent
from oai_server.responses.tools import (
    OfferedTools,
    echo_tool,
    echo_tool_choice,
    offered_tools,
)
from oai_server.responses.translate import (
    ENCRYPTED_REASONING,
    chat_request,
    reject_unsupported,
)
from oai_server.secret import ServerSecret
from oai_server.services.chat import ChatJob, ChatRequest, ChatService
from oai_server.services.common import response_usage
from oai_server.services.metadata import check_metadata
from schemas.response_events import ResponseLifecycleEvent
from schemas.response_items import CompactionItem, Item
from schemas.responses import (
    CompactedResponse,
    CompactRequest,
    ConversationId,
    ConversationRef,
    CreateResponse,
    InputTokensRequest,
    Response,
    ResponseUsage,
)

FINAL = frozenset({"completed", "incomplete", "failed", "cancelled"})

# Chat's parameter names, as the Responses request calls them.
_PARAMS = {
    "max_completion_tokens": "max_output_tokens",
    "response_format": "text.format",
    "response_format.json_schema.schema": "text.format.schema",
    "messages": "input",
}


def _renamed(exc: OpenAIError, tools: OfferedTools | None = None) -> OpenAIError:
    """`exc` naming the field as the Responses request calls it."""
    if exc.param is not None:
        head = exc.param.split("[", 1)[0]
        prefixes = [p for p in _PARAMS if exc.param.startswith(f"{p}.")]
        prefix = max(prefixes, key=len) if prefixes else None
        if exc.param in _PARAMS:
            exc.param = _PARAMS[exc.param]
        elif prefix is not None:  # a schema's keyword: `text.format.schema.properties...`
            exc.param = _PARAMS[prefix] + exc.param[len(prefix) :]
        elif head == "messages":
            exc.param = "input"
        elif head == "tools" and tools is not None:
            exc.param = tools.param(exc.param)
    return exc


def conversation_id(ref: str | ConversationRef | None) -> str | None:
    return ref.id if isinstance(ref, ConversationRef) else ref


@dataclass
class ResponseJob:
    req: CreateResponse
    inputs: list[Item]
    chat: ChatJob
    response: Response
    conversation: str | None
    created_at_us: int
    background: bool = False


@dataclass
class ResponsesService:
    chat: ChatService
    state: ResponseState | None  # None: no store configured
    # Seals reasoning for `include: ["reasoning.encrypted_content"]` and opens it sent back.
    secret: ServerSecret

    async def context(
        self, req: CreateResponse | InputTokensRequest
    ) -> tuple[list[Item], list[Item]]:
        """The remembered items before this request, and this request's new input items."""
        reject_unsupported(req)
        inputs = to_items(req.input, self.secret)
        earlier: list[Item] = []
        conversation = conversation_id(req.conversation)
        if self.state is not None and req.previous_response_id is not None:
            earlier = await self.state.previous_context(req.previous_response_id)
        elif self.state is not None and conversation is not None:
            earlier = await self.state.conversation_items(conversation)
        # An item sent back that the context already holds (a function call echoed
        # with its output) is not repeated.
        known = {item.id for item in earlier}
        return earlier, [item for item in inputs if item.id not in known]

    async def prepare_chat(
        self, req: CreateResponse | InputTokensRequest, items: Sequence[Item], *, load: bool = True
    ) -> ChatJob:
        """The chat job for `items`; with `truncation: auto`, the oldest items that do not
        fit the context window are dropped (`oldest_to_drop`: never the instructions).
        Without `load`, images are checked but not fetched or decoded (`ChatService.prepare`).
        A compaction item among `items` stands for the history before it (`compaction.opened`)."""
        items = compaction.opened(items, self.secret)
        files = await self._image_files(items)
        tools = offered_tools(req.tools)
        start = 0
        while True:
            try:
                return await self.chat.prepare(chat_request(req, items[start:], files), load=load)
            except ContextLengthExceededError as exc:
                dropped = oldest_to_drop(to_context(items[start:]))
                if req.truncation != "auto" or not dropped:
                    raise _renamed(exc) from None
                start += dropped
            except OpenAIError as exc:
                raise _renamed(exc, tools) from None

    async def _image_files(self, items: Sequence[Item]) -> dict[str, str]:
        """The images the items name by `file_id`, as `data:` URLs of the files' bytes
        (for this request only: the stored items keep the file id)."""
        found: dict[str, str] = {}
        for file_id in image_files(items):
            content = None if self.state is None else await self.state.file_content(file_id)
            if content is None:
                raise InvalidRequestError(
                    f"No file '{file_id}' was uploaded (or it is not yours): an "
                    "'input_image' by 'file_id' names a file uploaded to /v1/files.",
                    param="input",
                )
            encoded = base64.b64encode(content).decode()
            found[file_id] = f"data:application/octet-stream;base64,{encoded}"
        return found

    async def input_tokens(self, req: InputTokensRequest) -> int:
        """The tokens `req`'s input (with its context) would take, counted as the
        answer's `usage.input_tokens` would count them: its images' tokens too."""
        earlier, inputs = await self.context(req)
        job = await self.prepare_chat(req, [*earlier, *inputs])
        return await self.chat.count_prompt_tokens(job)

    async def prepare(self, req: CreateResponse, *, load: bool = True) -> ResponseJob:
        """Validate `req`, rebuild its context and render its prompt; 4xx on any refusal
        (without `load`, as a batch line is checked at creation: its images unfetched)."""
        check_metadata(req.metadata)
        earlier, inputs = await self.context(req)
        job = await self.prepare_chat(req, [*earlier, *inputs], load=load)
        # The usage so far (the prompt, nothing generated): Open Responses requires the field
        # on every response object, and OpenAI's spec does not let it be null.
        prompt = await self.chat.count_prompt_tokens(job) if load else len(job.prompt_token_ids)
        limit = compaction.threshold(req)
        if load and limit is not None and prompt > limit:
            # Compacted before the turn: the item joins this turn's input (and so the
            # chain and conversation it is stored in), and the model reads the summary.
            summarising = compaction.summarising(req.model, req.instructions, like=req)
            item, _ = await self._compaction(summarising, [*earlier, *inputs])
            inputs = [*inputs, item]
            job = await self.prepare_chat(req, [*earlier, *inputs])
            prompt = await self.chat.count_prompt_tokens(job)
        conversation = conversation_id(req.conversation)
        response = Response(
            id=new_id("resp"),
            created_at=int(time.time()),
            status="in_progress",
            completed_at=None,
            error=None,
            incomplete_details=None,
            instructions=req.instructions,
            max_output_tokens=req.max_output_tokens,
            model=req.model,
            output=[],
            parallel_tool_calls=req.parallel_tool_calls is not False,
            previous_response_id=req.previous_response_id,
            # The effort asked for; no summary is written (`summary: []` on every item).
            reasoning=None
            if req.reasoning is None
            else {"effort": req.reasoning.effort, "summary": None},
            store=req.store is not False,
            background=False,
            # What was sampled with: the request's values, else the model's own defaults.
            temperature=job.options.temperature,
            top_p=job.options.top_p,
            text=_echo_text(req),
            tool_choice=echo_tool_choice(req.tool_choice),
            tools=[echo_tool(t) for t in req.tools or ()],
            truncation=req.truncation or "disabled",
            metadata=dict(req.metadata or {}),
            conversation=ConversationId(id=conversation) if conversation else None,
            usage=ResponseUsage(input_tokens=prompt, output_tokens=0, total_tokens=prompt),
            # Echoed as the specs have them: null where the request did not set them, but
            # `top_logprobs`, an integer in Open Responses (0: none asked for).
            top_logprobs=req.top_logprobs or 0,
            max_tool_calls=req.max_tool_calls,
            safety_identifier=req.safety_identifier,
            prompt_cache_key=req.prompt_cache_key,
            prompt_cache_retention=req.prompt_cache_retention,
            presence_penalty=job.options.presence_penalty,
            frequency_penalty=job.options.frequency_penalty,
        )
        if req.user is not None:
            response.user = req.user
        if job.req.service_tier is not None:
            response.service_tier = job.req.service_tier  # the tier served
        return ResponseJob(req, inputs, job, response, conversation, now_us())

    async def compact(
        self, req: CompactRequest, for_caller: Callable[[CreateResponse], CreateResponse]
    ) -> CompactedResponse:
        """`POST /v1/responses/compact`: the history's user messages, then a compaction
        item standing for all of it (`compaction`); `usage` is the summarising pass's,
        which runs as `for_caller` shapes it (the caller's tier and prefix-cache salt)."""
        earlier: list[Item] = []
        if self.state is not None and req.previous_response_id is not None:
            earlier = await self.state.previous_context(req.previous_response_id)
        history = [*earlier, *to_items(req.input, self.secret)]
        if not history:
            raise InvalidRequestError("There is no history to compact.", param="input")
        summarising = for_caller(compaction.summarising(req.model, req.instructions))
        item, usage = await self._compaction(summarising, history)
        kept = compaction.user_messages(compaction.opened(history, self.secret))
        return CompactedResponse(
            id=new_id("resp"), created_at=int(time.time()), output=[*kept, item], usage=usage
        )

    async def _compaction(
        self, req: CreateResponse, history: Sequence[Item]
    ) -> tuple[CompactionItem, ResponseUsage]:
        """The model's summary of `history` (the summarising pass `req`), sealed; and what
        summarising it took."""
        job = await self.prepare_chat(req, [*history, compaction.instruction()])
        chat = await self.chat.start(job, new_id("resp"))
        answer = await self.chat.complete(chat)
        summary = answer.choices[0].message.content or ""
        usage = response_usage(chat.generation.usage)
        return compaction.compaction_item(summary, self.secret), usage

    async def start(self, job: ResponseJob, request_id: str | None = None) -> ChatRequest:
        """Admit `job` to the engine; returns once its first step (or refusal) is in.
        Its engine request's id is the response's (`request_id`, where the caller has it)."""
        try:
            return await self.chat.start(job.chat, request_id or job.response.id)
        except OpenAIError as exc:
            raise _renamed(exc) from None

    async def events(self, job: ResponseJob, chat: ChatRequest) -> AsyncIterator[RunEvent]:
        """The response's events; the finished response is stored before the last one."""
        run = self._run(job)
        async for event in run.events(self.chat, chat):
            if isinstance(event, ResponseLifecycleEvent) and run.response.status in FINAL:
                await self._remember(job, run.response)
            yield event

    async def complete(self, job: ResponseJob, chat: ChatRequest | None = None) -> Response:
        """The whole response: the last of its events. A failed generation raises.
        `chat`: its generation, if started already."""
        run = self._run(job)
        if chat is None:
            chat = await self.start(job)
        async for event in run.events(self.chat, chat):
            if isinstance(event, ResponseLifecycleEvent) and run.response.status in FINAL:
                if run.error is not None:
                    raise run.error
                await self._remember(job, run.response)
        return run.response

    def _run(self, job: ResponseJob) -> ResponseRun:
        tools = offered_tools(job.req.tools)
        if ENCRYPTED_REASONING not in (job.req.include or ()):
            return ResponseRun(job.response, tools)
        return ResponseRun(job.response, tools, seal=partial(seal_reasoning, self.secret))

    async def _remember(self, job: ResponseJob, response: Response) -> None:
        if self.state is not None and job.background:
            # Stored when it was queued: it is brought up to date, even when it failed.
            await self.state.finish(response)
            return
        if self.state is None or response.status == "failed":
            return
        if job.conversation is not None:
            await self.state.extend_conversation(job.conversation, [*job.inputs, *response.output])
        if response.store:
            self.state.record(response, job.inputs, job.created_at_us)


def _echo_text(req: CreateResponse) -> dict[str, Any]:
    text: dict[str, Any] = {"format": {"type": "text"}}
    if req.text is not None:
        text.update(req.text.model_dump(exclude_none=True, by_alias=True))
    return text
