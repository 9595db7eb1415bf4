"""`/v1/embeddings` on the real embedded all-MiniLM-L6-v2, beside the chat model.

Real clients (the OpenAI SDK, LangChain, LlamaIndex) against the session's server; the
vectors are checked against the same model run outside the server (transformers, with
the model's own mean pooling and normalisation), and a small retrieval flow answers a
question from the document it retrieved.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import httpx
import openai
import pytest
from langchain_openai import OpenAIEmbeddings
from llama_index.embeddings.openai import OpenAIEmbedding
from llama_index.embeddings.openai_like import OpenAILikeEmbedding

from oai_server.models.embedded_embedding import locate_embedding_model
from tests.integration.conftest import EMBEDDING_MODEL, MODEL, Server

pytestmark = pytest.mark.integration

DOCUMENTS = [
    "Paris is the capital and largest city of France.",
    "The mitochondrion is the powerhouse of the cell.",
    "Mount Everest is the highest mountain above sea level.",
    "Photosynthesis turns light, water and carbon dioxide into sugar.",
    "The Great Wall of China is thousands of kilometres long.",
]


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = math.fsum(x * y for x, y in zip(a, b, strict=True))
    return dot / math.sqrt(math.fsum(x * x for x in a) * math.fsum(y * y for y in b))


@pytest.fixture
def client(server: Server, sdk_http: httpx.Client) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="unused", http_client=sdk_http)


def reference(texts: list[str]) -> list[list[float]]:
    """all-MiniLM-L6-v2 as sentence-transformers runs it: mean pooling, then unit length."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    directory = locate_embedding_model()
    tokenizer = AutoTokenizer.from_pretrained(directory)
    model = AutoModel.from_pretrained(directory, dtype=torch.float32).eval()
    batch = tokenizer(texts, padding=True, truncation=True, max_length=256, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    pooled = (hidden * mask).sum(1) / mask.sum(1)
    vectors: list[list[float]] = torch.nn.functional.normalize(pooled, dim=1).tolist()
    return vectors


def test_vectors_match_the_model_run_outside_the_server(client: openai.OpenAI) -> None:
    served = client.embeddings.create(model=EMBEDDING_MODEL, input=DOCUMENTS[:3])
    expected = reference(DOCUMENTS[:3])
    for got, want in zip(served.data, expected, strict=True):
        assert len(got.embedding) == 384
        assert cosine(got.embedding, want) >= 0.999


def test_every_input_form_and_both_encodings(client: openai.OpenAI) -> None:
    text = "The quick brown fox jumps over the lazy dog."
    floats = client.embeddings.create(model=EMBEDDING_MODEL, input=text, encoding_format="float")
    decoded = client.embeddings.create(model=EMBEDDING_MODEL, input=[text, "dog"])
    assert floats.data[0].embedding == decoded.data[0].embedding
    assert floats.usage.prompt_tokens == floats.usage.total_tokens > 10
    assert cosine(decoded.data[0].embedding, decoded.data[1].embedding) < 0.9


def test_token_ids_embed_as_their_text(client: openai.OpenAI) -> None:
    from transformers import AutoTokenizer

    text = "Embeddings from token ids"
    ids = AutoTokenizer.from_pretrained(locate_embedding_model()).encode(text)
    from_text = client.embeddings.create(model=EMBEDDING_MODEL, input=text)
    from_ids = client.embeddings.create(model=EMBEDDING_MODEL, input=ids)
    from_lists = client.embeddings.create(model=EMBEDDING_MODEL, input=[ids, ids])
    assert cosine(from_ids.data[0].embedding, from_text.data[0].embedding) >= 0.9999
    assert len(from_lists.data) == 2
    assert from_ids.usage.prompt_tokens == len(ids)


def test_bad_inputs_are_400s_naming_them(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as too_long:
        client.embeddings.create(model=EMBEDDING_MODEL, input=["fine", "word " * 300])
    assert too_long.value.param == "input[1]"
    assert "maximum context length is 256 tokens" in too_long.value.message
    with pytest.raises(openai.BadRequestError) as openai_ids:
        client.embeddings.create(model=EMBEDDING_MODEL, input=[100257, 12366])
    assert "check_embedding_ctx_length=False" in openai_ids.value.message
    with pytest.raises(openai.BadRequestError) as dimensions:
        client.embeddings.create(model=EMBEDDING_MODEL, input="a", dimensions=128)
    assert dimensions.value.param == "dimensions"
    with pytest.raises(openai.BadRequestError) as chat_model:
        client.embeddings.create(model=MODEL, input="a")
    assert EMBEDDING_MODEL in chat_model.value.message


def test_langchain_as_documented_and_llamaindex_agree(server: Server) -> None:
    langchain = OpenAIEmbeddings(
        model=EMBEDDING_MODEL,
        base_url=server.base_url,
        api_key="unused",  # type: ignore[arg-type]
        check_embedding_ctx_length=False,
    )
    llama = OpenAILikeEmbedding(
        model_name=EMBEDDING_MODEL, api_base=server.base_url, api_key="unused"
    )
    llama_openai = OpenAIEmbedding(
        model_name=EMBEDDING_MODEL, api_base=server.base_url, api_key="unused"
    )
    from_langchain = langchain.embed_documents(DOCUMENTS[:2])
    from_llama = llama.get_text_embedding_batch(DOCUMENTS[:2])
    query = llama_openai.get_query_embedding(DOCUMENTS[0])
    expected = reference(DOCUMENTS[:2])
    for vectors in (from_langchain, from_llama):
        for got, want in zip(vectors, expected, strict=True):
            assert cosine(got, want) >= 0.999
    assert cosine(query, expected[0]) >= 0.999


def test_retrieve_then_answer_on_one_server(client: openai.OpenAI) -> None:
    question = "What is the capital of France?"
    index = client.embeddings.create(model=EMBEDDING_MODEL, input=DOCUMENTS).data
    asked = client.embeddings.create(model=EMBEDDING_MODEL, input=question).data[0]
    scores = [cosine(asked.embedding, d.embedding) for d in index]
    best = DOCUMENTS[max(range(len(DOCUMENTS)), key=scores.__getitem__)]
    assert best == DOCUMENTS[0]
    answer = client.chat.completions.create(
        model=MODEL,
        messages=[
            {"role": "system", "content": f"Answer from this context: {best}"},
            {"role": "user", "content": question},
        ],
        temperature=0,
        max_tokens=24,
    )
    assert "Paris" in (answer.choices[0].message.content or "")
