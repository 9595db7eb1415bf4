"""Rerank and score: the request and response shapes of `vllm serve`'s pooling endpoints.

`POST /v1/rerank` and `/rerank` take Jina's shape, `POST /v2/rerank` Cohere's v2 (the same
body: `query`, `documents`, `top_n`); each answers vLLM's `RerankResponse`, which both
clients read (`results` of `index` and `relevance_score`, sorted). `POST /v1/score` and
`/score` take text pairs, one against many or many against many, under any of the names
vLLM's `ScoreRequest` accepts (`text_1`/`text_2`, `queries`/`documents`,
`queries`/`items`, `data_1`/`data_2`), and answer vLLM's `ScoreResponse`. `POST /classify`
takes texts and answers vLLM's `ClassificationResponse`.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from schemas.common import RequestModel, ResponseModel


class TextPart(BaseModel):
    """A text part of vLLM's multimodal score input; other parts are refused."""

    model_config = ConfigDict(extra="ignore")

    type: Literal["text"]
    text: str


class DocumentObject(BaseModel):
    """A document as an object: Jina's and Cohere's v1 `{"text": ...}`, or vLLM's
    `{"content": [{"type": "text", "text": ...}]}`."""

    model_config = ConfigDict(extra="ignore")

    text: str | None = None
    content: list[TextPart] | None = None

    @model_validator(mode="after")
    def _one_text(self) -> DocumentObject:
        if (self.text is None) == (self.content is None):
            raise ValueError("a document object has 'text' or 'content' (text parts), not both")
        return self

    @property
    def as_text(self) -> str:
        return self.text if self.text is not None else "".join(p.text for p in self.content or [])


ScoreInput = str | DocumentObject


def text_of(item: ScoreInput) -> str:
    """The text of one query or document."""
    return item if isinstance(item, str) else item.as_text


class ScoringFields(RequestModel):
    """What vLLM's rerank and score requests share, of what this server acts on."""

    # Optional as in vLLM: left out, the server's pooling model answers.
    model: str | None = None
    user: str | None = None
    # Each text cut to this many tokens (-1: the model's context) instead of refused.
    truncate_prompt_tokens: Annotated[int, Field(ge=-1)] | None = None
    truncation_side: Literal["left", "right"] | None = None

    # Not a field: scores are always answered whole, never streamed.
    stream: ClassVar[bool] = False


class RerankRequest(ScoringFields):
    query: ScoreInput
    documents: ScoreInput | list[ScoreInput]
    # 0 (vLLM's default): every document; more than there are: every document.
    top_n: Annotated[int, Field(ge=0)] = 0
    # Jina's and Cohere v1's; vLLM always returns the documents, as its default here.
    return_documents: bool = True

    @property
    def document_list(self) -> list[ScoreInput]:
        return self.documents if isinstance(self.documents, list) else [self.documents]


# vLLM's names for the two sides of a score request, in the order it tries them.
SCORE_SIDES = (("queries", "documents"), ("queries", "items"), ("data_1", "data_2"))


class ScoreRequest(ScoringFields):
    text_1: ScoreInput | list[ScoreInput] | None = None
    text_2: ScoreInput | list[ScoreInput] | None = None

    @model_validator(mode="before")
    @classmethod
    def _sides(cls, data: object) -> object:
        """vLLM's other names for `text_1` and `text_2`, read as them."""
        if not isinstance(data, dict) or "text_1" in data:
            return data
        for first, second in SCORE_SIDES:
            if first in data and second in data:
                return {**data, "text_1": data[first], "text_2": data[second]}
        return data

    @model_validator(mode="after")
    def _both(self) -> ScoreRequest:
        if self.text_1 is None or self.text_2 is None:
            raise ValueError(
                "a score request has two sides: text_1 and text_2 (or queries and documents)"
            )
        return self

    @staticmethod
    def _listed(side: ScoreInput | list[ScoreInput] | None) -> list[ScoreInput]:
        if side is None:
            return []
        return side if isinstance(side, list) else [side]

    @property
    def first(self) -> list[ScoreInput]:
        return self._listed(self.text_1)

    @property
    def second(self) -> list[ScoreInput]:
        return self._listed(self.text_2)


class RerankDocument(ResponseModel):
    text: str


class RerankResult(ResponseModel):
    index: int
    document: RerankDocument | None = None
    relevance_score: float


class RerankUsage(ResponseModel):
    prompt_tokens: int
    total_tokens: int


class RerankResponse(ResponseModel):
    id: str
    model: str
    usage: RerankUsage
    results: list[RerankResult]


class ScoreData(ResponseModel):
    index: int
    object: Literal["score"] = "score"
    score: float


class ScoreUsage(ResponseModel):
    prompt_tokens: int
    total_tokens: int
    completion_tokens: int = 0


class ScoreResponse(ResponseModel):
    id: str
    object: Literal["list"] = "list"
    created: int
    model: str
    data: list[ScoreData]
    usage: ScoreUsage


class ClassificationRequest(ScoringFields):
    """vLLM's `/classify`: each input's probabilities over a sequence classifier's labels."""

    input: str | Annotated[list[str], Field(min_length=1)]

    @property
    def inputs(self) -> list[str]:
        return [self.input] if isinstance(self.input, str) else self.input


class ClassificationData(ResponseModel):
    index: int
    # The most probable label, by the model's `id2label`.
    label: str | None
    probs: list[float]
    num_classes: int


class ClassificationResponse(ResponseModel):
    id: str
    object: Literal["list"] = "list"
    created: int
    model: str
    data: list[ClassificationData]
    usage: ScoreUsage
