"""`POST /v1/embeddings`: OpenAI's `CreateEmbeddingRequest` and `CreateEmbeddingResponse`."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field

from schemas.common import RequestModel, ResponseModel, TokenId

# At most 2048 inputs in one request, as OpenAI.
MAX_INPUTS = 2048

TokenIds = Annotated[list[TokenId], Field(min_length=1)]
EmbeddingInput = (
    str
    | Annotated[list[str], Field(min_length=1, max_length=MAX_INPUTS)]
    | Annotated[list[TokenId], Field(min_length=1, max_length=MAX_INPUTS)]
    | Annotated[list[TokenIds], Field(min_length=1, max_length=MAX_INPUTS)]
)


class CreateEmbeddingRequest(RequestModel):
    input: EmbeddingInput
    model: str
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: Annotated[int, Field(ge=1)] | None = None
    user: str | None = None

    # Not a field: embeddings are always answered whole, never streamed.
    stream: ClassVar[bool] = False


class Embedding(ResponseModel):
    object: Literal["embedding"] = "embedding"
    index: int
    # A list of floats, or with `encoding_format: base64` their little-endian float32 bytes.
    embedding: list[float] | str


class EmbeddingUsage(ResponseModel):
    prompt_tokens: int
    total_tokens: int


class CreateEmbeddingResponse(ResponseModel):
    object: Literal["list"] = "list"
    data: list[Embedding]
    model: str
    usage: EmbeddingUsage
