"""LangChain's `OpenAIEmbeddings` against `/v1/embeddings`, as documented and by default,
and OpenAI's input limit, on the fake engines."""

from __future__ import annotations

from pathlib import Path

import llama_index.core
import openai
import pytest
from langchain_openai import OpenAIEmbeddings

from tests.embeddings.conftest import EMBEDDING, embedding_app


async def test_langchain_as_documented_embeds_the_text() -> None:
    async with embedding_app() as client:
        langchain = OpenAIEmbeddings(
            model=EMBEDDING,
            base_url="http://test/v1",
            api_key="unused",  # type: ignore[arg-type]
            http_async_client=client,
            check_embedding_ctx_length=False,
        )
        vectors = await langchain.aembed_documents(["hello", "world!"])
        direct = await client.post("/v1/embeddings", json={"model": EMBEDDING, "input": "hello"})
    assert vectors[0] == direct.json()["data"][0]["embedding"]
    assert vectors[0] != vectors[1]


async def test_langchains_default_fails_saying_what_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    """By default LangChain sends tiktoken's (OpenAI's) token ids, not text."""
    # tiktoken's cl100k_base, as LlamaIndex ships it: no download needed.
    cache = Path(llama_index.core.__file__).parent / "_static" / "tiktoken_cache"
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    async with embedding_app() as client:
        langchain = OpenAIEmbeddings(
            model=EMBEDDING,
            base_url="http://test/v1",
            api_key="unused",  # type: ignore[arg-type]
            http_async_client=client,
            max_retries=0,
        )
        with pytest.raises(openai.BadRequestError) as refused:
            await langchain.aembed_documents(["What is the capital of France?"])
    assert "check_embedding_ctx_length=False" in refused.value.message
    assert refused.value.param == "input[0]"


async def test_up_to_2048_inputs_in_one_request() -> None:
    async with embedding_app() as client:
        inputs = [f"text {i}" for i in range(2048)]
        r = await client.post("/v1/embeddings", json={"model": EMBEDDING, "input": inputs})
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    assert [d["index"] for d in data] == list(range(2048))
    assert data[0]["embedding"] != data[1]["embedding"]
