"""`/v1/embeddings`: validate the inputs, embed them on the embedding engine, answer as OpenAI.

Every input is checked before any reaches the engine, so a request is refused whole (an
empty string, an input over the model's context, too many tokens in all) or embedded whole.
The inputs go to the engine at once and are batched there.

The service has the chat service's shape (`prepare`, `start`, `complete`), so a request
takes the one answer path (`oai_server.http.answer`), through the response cache when
it is on: `start` reserves the tokens, `complete` runs the engine.
"""

from __future__ import annotations

import asyncio
import base64
import struct
import uuid
from dataclasses import dataclass, field

from oai_server.admission import Admission
from oai_server.engine.pooling import EmbeddingEngine
from oai_server.errors import InvalidRequestError
from oai_server.generation.offload import off_loop
from oai_server.generation.prompt_bound import tokens_at_least
from oai_server.generation.work_limits import WorkLimits
from oai_server.models import ModelRegistry
from oai_server.observability.context import current_request
from oai_server.observability.metrics import Metrics
from oai_server.services.events import EventStream
from schemas.common import ResponseModel
from schemas.embeddings import (
    CreateEmbeddingRequest,
    CreateEmbeddingResponse,
    Embedding,
    EmbeddingUsage,
)


@dataclass(frozen=True)
class EmbeddingJob:
    """A validated request: the token ids of each input, in order."""

    req: CreateEmbeddingRequest
    prompts: list[list[int]]

    @property
    def prompt_tokens(self) -> int:
        return sum(len(p) for p in self.prompts)


@dataclass(frozen=True)
class EmbeddingCall:
    """A job admitted to the engine, under the id its engine requests share."""

    job: EmbeddingJob
    request_id: str


def _inputs(req: CreateEmbeddingRequest) -> list[str | list[int]]:
    """The request's inputs as a list, each a string or a list of token ids."""
    value = req.input
    if isinstance(value, str):
        return [value]
    items: list[str | list[int]] = []
    for item in value:
        if isinstance(item, int):  # one list of token ids: a single input
            return [[int(token) for token in value if isinstance(token, int)]]
        items.append(item)
    return items


def _check_token_ids(token_ids: list[int], vocab_size: int, param: str) -> None:
    """Refuse ids the model does not have, saying the likely cause: OpenAI's token ids."""
    high = max(token_ids)
    if high >= vocab_size:
        raise InvalidRequestError(
            f"Token id {high} in '{param}' is out of vocabulary (size {vocab_size}). Token "
            "ids must be this model's own; a client that tokenizes with tiktoken sends "
            "OpenAI's. Send text instead (LangChain's OpenAIEmbeddings: "
            "check_embedding_ctx_length=False).",
            param=param,
        )


@dataclass
class EmbeddingService:
    """Serves `/v1/embeddings` for one embedding model."""

    engine: EmbeddingEngine
    model_name: str
    limits: WorkLimits = field(default_factory=WorkLimits)
    # The core's admission step: the caller's token limit (unlimited by default).
    admission: Admission = field(default_factory=Admission)
    metrics: Metrics | None = None
    # Every model served, so a request naming another gets the error that says which.
    models: ModelRegistry | None = None

    async def prepare(self, req: CreateEmbeddingRequest) -> EmbeddingJob:
        """Check the model, tokenize and check every input; a 4xx naming the first bad one."""
        if self.models is not None:
            self.models.find(req.model, "embedding")
        if self.engine.model_info.task != "embed":
            raise InvalidRequestError(
                f"The model '{self.model_name}' is a cross-encoder or classifier: it serves "
                "rerank, score and classify (/v1/rerank, /v1/score, /classify), not embeddings.",
                param="model",
            )
        self._check_dimensions(req.dimensions)
        inputs = _inputs(req)
        size = sum(len(item) for item in inputs if isinstance(item, str))
        job = EmbeddingJob(req, await off_loop(size, self._tokenize, req, inputs))
        self._check_total(job.prompt_tokens)
        return job

    def _tokenize(
        self, req: CreateEmbeddingRequest, inputs: list[str | list[int]]
    ) -> list[list[int]]:
        """The token ids of every input. An input surely past the context, or inputs surely
        past the work limit, are refused before any is tokenized (`tokens_at_least`)."""
        info, tokenizer = self.engine.model_info, self.engine.tokenizer
        params = [
            "input" if isinstance(req.input, str) else f"input[{i}]" for i in range(len(inputs))
        ]
        least: list[int] = []
        for param, item in zip(params, inputs, strict=True):
            if isinstance(item, str):
                if not item:
                    raise InvalidRequestError(
                        f"'{param}' is an empty string; every input must have text.", param=param
                    )
                count = tokens_at_least(item, info.longest_token_bytes, info.max_model_len + 1)
                self._check_length(count, param, at_least=True)
            else:
                _check_token_ids(item, info.vocab_size, param)
                count = len(item)
                self._check_length(count, param)
            least.append(count)
        self._check_total(sum(least), at_least=True)
        prompts: list[list[int]] = []
        for param, item in zip(params, inputs, strict=True):
            tokens = tokenizer.encode(item) if isinstance(item, str) else item
            self._check_length(len(tokens), param)
            prompts.append(tokens)
        return prompts

    def _check_length(self, count: int, param: str, *, at_least: bool = False) -> None:
        max_model_len = self.engine.model_info.max_model_len
        if count > max_model_len:
            raise InvalidRequestError(
                f"This model's maximum context length is {max_model_len} tokens, "
                f"however '{param}' has {'at least ' if at_least else ''}{count} tokens. "
                "Shorten it; inputs are never truncated.",
                param=param,
                code="context_length_exceeded",
            )

    def _check_total(self, tokens: int, *, at_least: bool = False) -> None:
        bound = self.limits.max_request_tokens
        if bound is not None and tokens > bound:
            raise InvalidRequestError(
                f"This request's inputs have {'at least ' if at_least else ''}{tokens} tokens "
                f"in all; this server takes at most {bound} per request. Send fewer inputs "
                "per request.",
                param="input",
                code="request_too_large",
            )

    def _check_dimensions(self, dimensions: int | None) -> None:
        if dimensions is None:
            return
        info = self.engine.model_info
        if not info.matryoshka:
            raise InvalidRequestError(
                f"The model '{self.model_name}' does not support 'dimensions': its vectors "
                f"cannot be shortened (they have {info.dimensions}).",
                param="dimensions",
            )
        if dimensions > info.dimensions:
            raise InvalidRequestError(
                f"'dimensions' must be at most {info.dimensions} for '{self.model_name}', "
                f"got {dimensions}.",
                param="dimensions",
            )

    async def start(self, job: EmbeddingJob, request_id: str | None = None) -> EmbeddingCall:
        """Reserve the inputs' tokens against the caller's limit (or refuse)."""
        await self.admission.admit_pooling(job.prompt_tokens, self.model_name)
        return EmbeddingCall(job, request_id or f"embd-{uuid.uuid4().hex}")

    async def complete(self, call: EmbeddingCall) -> CreateEmbeddingResponse:
        """Embed every input of the call at once; the answer in the request's encoding."""
        job = call.job
        # gather cancels the others when one fails, and vLLM aborts a cancelled request.
        vectors = await asyncio.gather(
            *(
                self.engine.embed(f"{call.request_id}-{i}", prompt, job.req.dimensions)
                for i, prompt in enumerate(job.prompts)
            )
        )
        if self.metrics is not None:
            self.metrics.embedding_inputs.labels(self.model_name).inc(len(job.prompts))
            self.metrics.embedding_tokens.labels(self.model_name).inc(job.prompt_tokens)
            self.metrics.usage.add(
                "embeddings", current_request.get(), self.model_name, "default", job.prompt_tokens
            )
        as_base64 = job.req.encoding_format == "base64"
        return CreateEmbeddingResponse(
            data=[
                Embedding(index=i, embedding=encode_base64(v) if as_base64 else v)
                for i, v in enumerate(vectors)
            ],
            model=self.model_name,
            usage=EmbeddingUsage(prompt_tokens=job.prompt_tokens, total_tokens=job.prompt_tokens),
        )

    async def create(self, job: EmbeddingJob) -> CreateEmbeddingResponse:
        """`start`, then `complete`: the whole answer, away from HTTP (a batch line)."""
        return await self.complete(await self.start(job))

    def stream(self, call: EmbeddingCall) -> EventStream[ResponseModel]:
        """Never called: an embedding request is answered whole (its `stream` is False)."""
        raise TypeError("embeddings are answered whole")


def encode_base64(vector: list[float]) -> str:
    """OpenAI's base64 form: the vector's little-endian float32 bytes."""
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
