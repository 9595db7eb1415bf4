"""Rerank and score, as vLLM's scoring (`vllm/entrypoints/pooling/scoring/io_processor.py`):
on an embedding model, the cosine similarity of the two texts' vectors (its bi-encoder
scoring); on a cross-encoder, the classifier's one probability for the pair, encoded as
its tokenizer pairs two texts.

Every text is tokenized and checked before any reaches the engine, so a request is refused
whole (an empty text, a text over the model's context, too many documents) or scored whole.
Each text (a bi-encoder's query once) or pair is one engine request, all sent at once: a
list of a thousand documents is one batch to the engine, and each score keeps its input's
index.

The service has the embeddings service's shape (`prepare`, `start`, `complete`), so a
request takes the one answer path (`oai_server.http.answer`), the response cache's too,
and a batch line is answered by the same code.
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from oai_server.admission import Admission
from oai_server.engine.pooling import EmbeddingEngine
from oai_server.errors import InvalidRequestError
from oai_server.generation.offload import off_loop
from oai_server.generation.work_limits import WorkLimits
from oai_server.models import ModelRegistry
from oai_server.observability.context import current_request
from oai_server.observability.metrics import Metrics
from oai_server.services.events import EventStream
from schemas.common import ResponseModel
from schemas.rerank import (
    ClassificationData,
    ClassificationRequest,
    ClassificationResponse,
    RerankDocument,
    RerankRequest,
    RerankResponse,
    RerankResult,
    RerankUsage,
    ScoreData,
    ScoreInput,
    ScoreRequest,
    ScoreResponse,
    ScoreUsage,
    text_of,
)

ScoringRequest = RerankRequest | ScoreRequest | ClassificationRequest

# What a chat model asked to score is told it cannot do.
SERVES = "rerank and score (/v1/rerank, /v2/rerank, /v1/score)"


@dataclass(frozen=True)
class ScoreJob:
    """A validated request: its engine prompts in order. On an embedding model, the first
    side's texts then the second's; on a cross-encoder, one pair each, with where its
    second text begins."""

    req: ScoringRequest
    prompts: list[list[int]]
    # How many prompts are the first side's (0 on a cross-encoder: every prompt is a pair).
    first: int
    second_from: list[int | None] = field(default_factory=list)

    @property
    def prompt_tokens(self) -> int:
        return sum(len(p) for p in self.prompts)


@dataclass(frozen=True)
class ScoreCall:
    """A job admitted to the engine, under the id its engine requests share."""

    job: ScoreJob
    request_id: str


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """The cosine similarity of two vectors (0 when either is all zeros)."""
    norms = math.sqrt(math.fsum(x * x for x in a)) * math.sqrt(math.fsum(y * y for y in b))
    return math.fsum(x * y for x, y in zip(a, b, strict=True)) / norms if norms else 0.0


def _texts(req: ScoringRequest) -> list[tuple[str, str]]:
    """Every text of a request, the first side's first, each with the name its errors use."""
    first, second, first_param, second_param = _sides(req)
    named: list[tuple[str, str]] = []
    for items, param in ((first, first_param), (second, second_param)):
        listed = not isinstance(req, RerankRequest) or param == "documents"
        for i, item in enumerate(items):
            named.append((f"{param}[{i}]" if listed else param, text_of(item)))
    return named


def _check_text(text: str, where: str) -> None:
    if not text:
        raise InvalidRequestError(
            f"'{where}' is an empty string; every text must have text.", param=where
        )


def _cut(tokens: list[int], bound: int | None, side: str | None) -> list[int]:
    """`tokens` cut to `bound` from `side` (vLLM's `truncation_side`; right by default, as
    BERT's tokenizers truncate)."""
    if bound is None or len(tokens) <= bound:
        return tokens
    return tokens[len(tokens) - bound :] if side == "left" else tokens[:bound]


def _sides(req: ScoringRequest) -> tuple[list[ScoreInput], list[ScoreInput], str, str]:
    """Both sides of a request, and the parameter names its errors point at (a
    classification's inputs: its second side)."""
    if isinstance(req, ClassificationRequest):
        return [], list(req.inputs), "", "input"
    if isinstance(req, RerankRequest):
        return [req.query], req.document_list, "query", "documents"
    return req.first, req.second, "text_1", "text_2"


@dataclass
class ScoringService:
    """Serves `/v1/rerank`, `/v2/rerank` and `/v1/score` for one embedding model."""

    engine: EmbeddingEngine
    model_name: str
    max_documents: int
    limits: WorkLimits = field(default_factory=WorkLimits)
    # The core's admission step: the caller's token limit (unlimited by default).
    admission: Admission = field(default_factory=Admission)
    metrics: Metrics | None = None
    # Every model served, so a request naming another gets the error that says which.
    models: ModelRegistry | None = None

    async def prepare(self, req: ScoringRequest) -> ScoreJob:
        """Check the model, the lists' sizes, tokenize and check every text; a 4xx naming
        the first bad one."""
        if self.models is not None and req.model is not None:
            self.models.find(req.model, "embedding", wanted=SERVES)
        if isinstance(req, ClassificationRequest):
            return await self._prepare_classification(req)
        first, second, first_param, second_param = _sides(req)
        if not second:
            raise InvalidRequestError(f"'{second_param}' is empty.", param=second_param)
        if len(first) > 1 and len(first) != len(second):
            raise InvalidRequestError(
                f"'{first_param}' has {len(first)} texts and '{second_param}' {len(second)}: "
                "score one against many (1:N) or pairs (N:N).",
                param=first_param,
            )
        if len(second) > self.max_documents:
            raise InvalidRequestError(
                f"'{second_param}' has {len(second)} texts; this server scores at most "
                f"{self.max_documents} per request (--max-score-documents).",
                param=second_param,
                code="request_too_large",
            )
        bound = self._truncation(req)
        size = sum(len(text_of(item)) for item in first + second)
        if self.engine.model_info.task == "classify":
            self._check_cross_encoder()
            job = await off_loop(size, self._tokenize_pairs, req, bound)
        else:
            job = await off_loop(size, self._tokenize, req, bound)
        tokens = self.limits.max_request_tokens
        if tokens is not None and job.prompt_tokens > tokens:
            raise InvalidRequestError(
                f"This request's texts have {job.prompt_tokens} tokens in all; this server "
                f"takes at most {tokens} per request. Send fewer documents per request.",
                param=second_param,
                code="request_too_large",
            )
        return job

    def _truncation(self, req: ScoringRequest) -> int | None:
        """The tokens each text is cut to (None: none; a text too long is refused)."""
        asked, most = req.truncate_prompt_tokens, self.engine.model_info.max_model_len
        if asked is None:
            return None
        if asked > most:
            raise InvalidRequestError(
                f"'truncate_prompt_tokens' is {asked}; this model's context is {most} tokens.",
                param="truncate_prompt_tokens",
            )
        return most if asked == -1 else asked

    async def _prepare_classification(self, req: ClassificationRequest) -> ScoreJob:
        if self.engine.model_info.task != "classify":
            raise InvalidRequestError(
                f"The model '{self.model_name}' is an embedding model: it serves embeddings, "
                "rerank and score, not /classify (a sequence classification model does).",
                param="model",
            )
        if len(req.inputs) > self.max_documents:
            raise InvalidRequestError(
                f"'input' has {len(req.inputs)} texts; this server classifies at most "
                f"{self.max_documents} per request (--max-score-documents).",
                param="input",
                code="request_too_large",
            )
        bound = self._truncation(req)
        job = await off_loop(sum(map(len, req.inputs)), self._tokenize, req, bound)
        return ScoreJob(req, job.prompts, 0, [None] * len(job.prompts))

    def _check_cross_encoder(self) -> None:
        labels = self.engine.model_info.labels
        if len(labels) != 1:
            raise InvalidRequestError(
                f"The model '{self.model_name}' is a classifier of {len(labels)} labels, not a "
                "cross-encoder (one label): it serves /classify, not rerank and score.",
                param="model",
            )

    def _tokenize(self, req: ScoringRequest, bound: int | None) -> ScoreJob:
        """Each text on its own (an embedding model embeds each)."""
        prompts: list[list[int]] = []
        for where, text in _texts(req):
            tokens = _cut(self._encode(text, where), bound, req.truncation_side)
            self._check_length(len(tokens), where)
            prompts.append(tokens)
        return ScoreJob(req, prompts, len(_sides(req)[0]))

    def _tokenize_pairs(self, req: ScoringRequest, bound: int | None) -> ScoreJob:
        """Each pair as the model's tokenizer pairs two texts (a cross-encoder reads both);
        truncation cuts the pair, as vLLM's does."""
        texts = _texts(req)
        firsts = texts[: len(_sides(req)[0])]
        seconds = texts[len(firsts) :]
        for where, text in texts:
            _check_text(text, where)
        if len(firsts) == 1:
            firsts = firsts * len(seconds)
        prompts: list[list[int]] = []
        starts: list[int | None] = []
        for (_, first), (where, second) in zip(firsts, seconds, strict=True):
            tokens, start = self.engine.pair(first, second)
            if bound is not None and len(tokens) > bound:
                tokens = _cut(tokens, bound, req.truncation_side)
                start = None if start is None else min(start, len(tokens))
            self._check_length(len(tokens), where)
            prompts.append(tokens)
            starts.append(start)
        return ScoreJob(req, prompts, 0, starts)

    def _encode(self, text: str, where: str) -> list[int]:
        _check_text(text, where)
        return self.engine.tokenizer.encode(text)

    def _check_length(self, count: int, where: str) -> None:
        max_model_len = self.engine.model_info.max_model_len
        if count > max_model_len:
            raise InvalidRequestError(
                f"This model's maximum context length is {max_model_len} tokens, however "
                f"'{where}' has {count} tokens. Shorten it, or set 'truncate_prompt_tokens' "
                "to cut every text to that many tokens.",
                param=where,
                code="context_length_exceeded",
            )

    async def start(self, job: ScoreJob, request_id: str | None = None) -> ScoreCall:
        """Reserve the texts' tokens against the caller's limit (or refuse)."""
        await self.admission.admit_pooling(job.prompt_tokens, self.model_name)
        return ScoreCall(job, request_id or f"score-{uuid.uuid4().hex}")

    async def scores(self, call: ScoreCall) -> list[float]:
        """The score of each pair, in input order: every prompt sent at once."""
        job, engine = call.job, self.engine
        ids = [f"{call.request_id}-{i}" for i in range(len(job.prompts))]
        # gather cancels the others when one fails, and vLLM aborts a cancelled request.
        if not job.first:
            probabilities = await asyncio.gather(
                *(
                    engine.classify(i, prompt, start)
                    for i, prompt, start in zip(ids, job.prompts, job.second_from, strict=True)
                )
            )
            return [p[0] for p in probabilities]
        vectors = await asyncio.gather(
            *(engine.embed(i, prompt) for i, prompt in zip(ids, job.prompts, strict=True))
        )
        first, second = vectors[: job.first], vectors[job.first :]
        if len(first) == 1:
            first = first * len(second)
        return [cosine(a, b) for a, b in zip(first, second, strict=True)]

    async def complete(
        self, call: ScoreCall
    ) -> RerankResponse | ScoreResponse | ClassificationResponse:
        """Score the call's pairs; the answer in its request's shape."""
        job = call.job
        if isinstance(job.req, ClassificationRequest):
            return await self._classification(call)
        scores = await self.scores(call)
        self._count(job)
        tokens = job.prompt_tokens
        req = job.req
        if isinstance(req, ScoreRequest):
            return ScoreResponse(
                id=call.request_id,
                created=int(time.time()),
                model=self.model_name,
                data=[ScoreData(index=i, score=s) for i, s in enumerate(scores)],
                usage=ScoreUsage(prompt_tokens=tokens, total_tokens=tokens),
            )
        documents = req.document_list
        results = [
            RerankResult(
                index=i,
                relevance_score=score,
                **(
                    {"document": RerankDocument(text=text_of(documents[i]))}
                    if req.return_documents
                    else {}
                ),
            )
            for i, score in enumerate(scores)
        ]
        # Stable: equal scores keep their input order, as vLLM's sort does.
        results.sort(key=lambda r: r.relevance_score, reverse=True)
        if req.top_n:
            results = results[: req.top_n]
        return RerankResponse(
            id=call.request_id,
            model=self.model_name,
            usage=RerankUsage(prompt_tokens=tokens, total_tokens=tokens),
            results=results,
        )

    async def _classification(self, call: ScoreCall) -> ClassificationResponse:
        job, labels = call.job, self.engine.model_info.labels
        probabilities = await asyncio.gather(
            *(
                self.engine.classify(f"{call.request_id}-{i}", prompt)
                for i, prompt in enumerate(job.prompts)
            )
        )
        self._count(job)
        data = []
        for i, probs in enumerate(probabilities):
            best = max(range(len(probs)), key=probs.__getitem__)
            label = labels[best] if best < len(labels) else None
            data.append(
                ClassificationData(index=i, label=label, probs=probs, num_classes=len(probs))
            )
        tokens = job.prompt_tokens
        return ClassificationResponse(
            id=call.request_id,
            created=int(time.time()),
            model=self.model_name,
            data=data,
            usage=ScoreUsage(prompt_tokens=tokens, total_tokens=tokens),
        )

    def _count(self, job: ScoreJob) -> None:
        if self.metrics is None:
            return
        pairs = len(job.prompts) - job.first
        self.metrics.score_pairs.labels(self.model_name).inc(pairs)
        self.metrics.embedding_tokens.labels(self.model_name).inc(job.prompt_tokens)
        # OpenAI's Usage API has no rerank: its tokens are the embedding model's.
        self.metrics.usage.add(
            "embeddings", current_request.get(), self.model_name, "default", job.prompt_tokens
        )

    async def create(
        self, job: ScoreJob
    ) -> RerankResponse | ScoreResponse | ClassificationResponse:
        """`start`, then `complete`: the whole answer, away from HTTP (a batch line)."""
        return await self.complete(await self.start(job))

    def stream(self, call: ScoreCall) -> EventStream[ResponseModel]:
        """Never called: a score request is answered whole (its `stream` is False)."""
        raise TypeError("scores are answered whole")
