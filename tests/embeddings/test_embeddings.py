"""`/v1/embeddings` through the OpenAI SDK and raw HTTP, on the fake engines."""

from __future__ import annotations

import asyncio
import base64
import math
import struct
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from oai_server.engine.fake.pooling import FakeEmbeddingEngine
from tests.embeddings.conftest import CHAT, EMBEDDING, embedding_app, sdk


async def test_every_input_form_embeds_each_input_in_order() -> None:
    async with embedding_app() as client:
        api = sdk(client)
        one = await api.embeddings.create(model=EMBEDDING, input="hello", encoding_format="float")
        texts = await api.embeddings.create(
            model=EMBEDDING, input=["hello", "world!"], encoding_format="float"
        )
        ids = await api.embeddings.create(
            model=EMBEDDING, input=list(b"hello"), encoding_format="float"
        )
        id_lists = await api.embeddings.create(
            model=EMBEDDING, input=[list(b"world!"), list(b"hello")], encoding_format="float"
        )
    assert one.model == EMBEDDING
    assert [d.index for d in texts.data] == [0, 1]
    # The fake tokenizer has one token per byte: "hello" and "world!" are 5 and 6 tokens.
    assert (one.usage.prompt_tokens, texts.usage.prompt_tokens) == (5, 11)
    assert texts.usage.total_tokens == 11
    # Text and its token ids are one input; equal inputs embed equally.
    assert one.data[0].embedding == texts.data[0].embedding == ids.data[0].embedding
    assert id_lists.data[0].embedding == texts.data[1].embedding
    assert id_lists.data[1].embedding == one.data[0].embedding
    assert texts.data[0].embedding != texts.data[1].embedding
    assert math.isclose(math.fsum(v * v for v in one.data[0].embedding), 1.0, rel_tol=1e-6)


def decoded(value: Any) -> list[float]:
    """OpenAI's base64 embedding: little-endian float32s."""
    raw = base64.b64decode(value)
    return list(struct.unpack(f"<{len(raw) // 4}f", raw))


async def test_base64_decodes_to_the_same_floats() -> None:
    async with embedding_app() as client:
        api = sdk(client)
        floats = await api.embeddings.create(
            model=EMBEDDING, input=["a", "bc"], encoding_format="float"
        )
        encoded = await api.embeddings.create(
            model=EMBEDDING, input=["a", "bc"], encoding_format="base64"
        )
        # Without encoding_format the SDK asks for base64 itself and decodes it.
        default = await api.embeddings.create(model=EMBEDDING, input=["a", "bc"])
        raw = await client.post(
            "/v1/embeddings",
            json={"model": EMBEDDING, "input": "a", "encoding_format": "base64"},
        )
    assert [decoded(d.embedding) for d in encoded.data] == [d.embedding for d in floats.data]
    assert [d.embedding for d in default.data] == [d.embedding for d in floats.data]
    assert isinstance(raw.json()["data"][0]["embedding"], str)


async def test_dimensions_shorten_a_matryoshka_model_and_renormalise() -> None:
    async with embedding_app(FakeEmbeddingEngine(dimensions=8, matryoshka=True)) as client:
        short = await sdk(client).embeddings.create(
            model=EMBEDDING, input="hello", dimensions=3, encoding_format="float"
        )
        r = await client.post(
            "/v1/embeddings", json={"model": EMBEDDING, "input": "hello", "dimensions": 9}
        )
    vector = short.data[0].embedding
    assert len(vector) == 3
    assert math.isclose(math.fsum(v * v for v in vector), 1.0, rel_tol=1e-6)
    assert r.status_code == 400
    assert r.json()["error"]["param"] == "dimensions"


@pytest.mark.parametrize(
    ("body", "param", "says"),
    [
        ({"input": ""}, "input", "empty string"),
        ({"input": ["fine", ""]}, "input[1]", "empty string"),
        ({"input": ["fine", "x" * 65]}, "input[1]", "maximum context length is 64 tokens"),
        ({"input": [[1, 2], [300]]}, "input[1]", "out of vocabulary"),
        ({"input": []}, None, ""),
        ({"input": ["a"] * 2049}, None, ""),
        ({"input": "a", "encoding_format": "int8"}, None, ""),
        ({"input": "a", "dimensions": 4}, "dimensions", "does not support 'dimensions'"),
        ({"input": "a", "dimensions": 0}, None, ""),
    ],
)
async def test_bad_inputs_get_a_400_naming_them(
    body: dict[str, Any], param: str | None, says: str
) -> None:
    async with embedding_app() as client:
        r = await client.post("/v1/embeddings", json={"model": EMBEDDING, **body})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["type"] == "invalid_request_error"
    if param is not None:
        assert error["param"] == param
    assert says in error["message"]


async def test_the_work_limit_bounds_the_tokens_of_all_inputs() -> None:
    async with embedding_app(max_request_tokens=10) as client:
        fits = await client.post("/v1/embeddings", json={"model": EMBEDDING, "input": ["a"] * 10})
        over = await client.post("/v1/embeddings", json={"model": EMBEDDING, "input": ["a"] * 11})
    assert fits.status_code == 200
    assert over.status_code == 400
    assert over.json()["error"]["code"] == "request_too_large"


async def test_each_model_refuses_the_others_work_and_says_which_does_what() -> None:
    async with embedding_app() as client:
        api = sdk(client)
        with pytest.raises(openai.BadRequestError) as chat_for_embeddings:
            await api.embeddings.create(model=CHAT, input="hi")
        with pytest.raises(openai.BadRequestError) as embeddings_for_chat:
            await api.chat.completions.create(
                model=EMBEDDING, messages=[{"role": "user", "content": "hi"}]
            )
        with pytest.raises(openai.BadRequestError):
            await api.completions.create(model=EMBEDDING, prompt="hi")
        with pytest.raises(openai.NotFoundError) as unknown:
            await api.embeddings.create(model="text-embedding-3-small", input="hi")
    assert f"'{CHAT}' is a chat model" in chat_for_embeddings.value.message
    assert f"use '{EMBEDDING}'" in chat_for_embeddings.value.message
    assert f"'{EMBEDDING}' is an embedding model" in embeddings_for_chat.value.message
    assert unknown.value.code == "model_not_found"
    assert "text-embedding-3-small" in unknown.value.message


async def test_models_lists_both_health_needs_both_and_metrics_name_the_model() -> None:
    embedder = FakeEmbeddingEngine()
    async with embedding_app(embedder) as client:
        listed = await sdk(client).models.list()
        one = await client.get(f"/v1/models/{EMBEDDING}")
        healthy = await client.get("/health")
        await client.post("/v1/embeddings", json={"model": EMBEDDING, "input": ["ab", "c"]})
        metrics = (await client.get("/metrics")).text
        embedder.kill()
        sick = await client.get("/health")
        dead = await client.post("/v1/embeddings", json={"model": EMBEDDING, "input": "a"})
    assert [m.id for m in listed.data] == [CHAT, EMBEDDING]
    assert f'oai_embedding_inputs_total{{model="{EMBEDDING}"}} 2.0' in metrics
    assert f'oai_embedding_tokens_total{{model="{EMBEDDING}"}} 3.0' in metrics
    assert one.json()["max_model_len"] == 64
    assert healthy.status_code == 200
    assert sick.status_code == 503
    assert dead.status_code == 503


async def test_a_models_file_names_the_embedding_model_in_answers_and_metrics(
    tmp_path: Path,
) -> None:
    """The models file's name for the embedding model is the one name the server uses."""
    models = tmp_path / "models.yaml"
    models.write_text("models:\n  - name: chat\n  - name: emb\n    kind: embedding\n")
    async with embedding_app(models_file=models) as client:
        answer = await sdk(client).embeddings.create(model="emb", input=["ab", "c"])
        listed = await sdk(client).models.list()
        metrics = (await client.get("/metrics")).text
    assert answer.model == "emb"
    assert [m.id for m in listed.data] == ["chat", "emb"]
    assert 'oai_embedding_inputs_total{model="emb"} 2.0' in metrics


async def test_embedding_tokens_count_against_the_token_rate_limit() -> None:
    # A window that cannot end between the two requests (windows are aligned to the clock).
    async with embedding_app(rate_limit_tpm=12, rate_limit_window=1e9) as client:
        first = await client.post("/v1/embeddings", json={"model": EMBEDDING, "input": "x" * 10})
        second = await client.post("/v1/embeddings", json={"model": EMBEDDING, "input": "x" * 10})
    assert first.status_code == 200
    assert second.status_code == 429


async def test_without_an_embedding_model_the_name_is_unknown() -> None:
    from oai_server.app import create_app
    from oai_server.engine.fake import FakeEngine
    from oai_server.settings import Settings

    app = create_app(Settings(), FakeEngine())
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://test") as client,
    ):
        r = await client.post("/v1/embeddings", json={"model": EMBEDDING, "input": "a"})
        listed = await client.get("/v1/models")
    assert r.status_code == 404
    assert [m["id"] for m in listed.json()["data"]] == [CHAT]


async def test_a_dead_embedding_engine_ends_the_process_after_chat_in_flight() -> None:
    """As a dead chat engine does, but the chat requests in flight first finish."""
    from oai_server.app import create_app
    from oai_server.engine.fake import FakeEngine
    from oai_server.lifecycle.state import EXIT_ENGINE_DEAD
    from oai_server.settings import Settings

    engine = FakeEngine(reply=" ".join(["word"] * 40), token_delay=0.05)
    embedder = FakeEmbeddingEngine()
    app = create_app(Settings(drain_timeout=10), engine, embedder=embedder)
    exited = asyncio.Event()
    app.state.server.lifecycle.request_exit = exited.set
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://test", timeout=30) as client,
    ):
        for _ in range(100):
            if (await client.get("/health")).status_code == 200:
                break
            await asyncio.sleep(0.01)
        body = {"model": CHAT, "messages": [{"role": "user", "content": "hi"}]}
        chatting = asyncio.create_task(client.post("/v1/chat/completions", json=body))
        # Killed once the chat runs (after a fixed pause a loaded machine may not have
        # started it, and a request arriving after the death is refused).
        async with asyncio.timeout(30):
            while not engine.running_requests():  # noqa: ASYNC110 - the fake engine's count
                await asyncio.sleep(0.01)
        embedder.kill()
        answered = await chatting
        assert not exited.is_set(), "the process ended before the chat answer did"
        await asyncio.wait_for(exited.wait(), 30)  # generous: it returns once set
    assert answered.status_code == 200
    assert answered.json()["choices"][0]["message"]["content"] == engine.reply
    assert app.state.server.lifecycle.exit_code == EXIT_ENGINE_DEAD
