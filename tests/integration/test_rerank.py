"""Rerank on the session's server: the embedded embedding model against its own
`/v1/embeddings` vectors, and the clients a RAG pipeline reranks with (Cohere's SDK,
LangChain's `CohereRerank`, LlamaIndex's `JinaRerank`) with a base URL."""

from __future__ import annotations

import math
from typing import Any

import cohere
import httpx
import pytest
from langchain_cohere import CohereRerank
from langchain_core.documents import Document
from llama_index.core.schema import NodeWithScore, TextNode
from llama_index.postprocessor.jinaai_rerank import JinaRerank

from tests.integration.conftest import EMBEDDING_MODEL, Server

pytestmark = pytest.mark.integration

QUERY = "What is the capital of France?"
DOCUMENTS = [
    "Paris is the capital and largest city of France.",
    "The mitochondrion is the powerhouse of the cell.",
    "Mount Everest is the highest mountain above sea level.",
    "France's capital has been Paris since the tenth century.",
]


def post(server: Server, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{server.root}{path}", json=body, timeout=120)


def cosine(a: list[float], b: list[float]) -> float:
    dot = math.fsum(x * y for x, y in zip(a, b, strict=True))
    return dot / math.sqrt(math.fsum(x * x for x in a) * math.fsum(y * y for y in b))


def test_embedding_model_rerank_is_the_cosine_order_of_its_embeddings(server: Server) -> None:
    reply = post(
        server, "/v1/rerank", {"model": EMBEDDING_MODEL, "query": QUERY, "documents": DOCUMENTS}
    )
    vectors = post(
        server, "/v1/embeddings", {"model": EMBEDDING_MODEL, "input": [QUERY, *DOCUMENTS]}
    )
    query, *docs = [item["embedding"] for item in vectors.json()["data"]]
    cosines = [cosine(query, doc) for doc in docs]
    results = reply.json()["results"]
    assert [r["index"] for r in results] == sorted(range(len(docs)), key=lambda i: -cosines[i])
    for result in results:
        assert result["relevance_score"] == pytest.approx(cosines[result["index"]], abs=1e-5)
    # And it ranks by meaning: both Paris sentences above the rest.
    assert {r["index"] for r in results[:2]} == {0, 3}


def cohere_client(server: Server, http: httpx.Client) -> cohere.ClientV2:
    """Cohere's v2 client on `http`, which the test closes (one of its own would be left
    open, and its socket's ResourceWarning would fail a later test)."""
    return cohere.ClientV2(api_key="unused", base_url=server.root, httpx_client=http)


def test_the_cohere_sdk_reranks_on_the_embedded_embedding_model(server: Server) -> None:
    with httpx.Client(timeout=120) as http:
        client = cohere_client(server, http)
        reply = client.rerank(model=EMBEDDING_MODEL, query=QUERY, documents=DOCUMENTS, top_n=2)
    assert {r.index for r in reply.results} == {0, 3}
    assert reply.results[0].relevance_score >= reply.results[1].relevance_score


def test_langchains_cohere_rerank_compresses_retrieved_documents(server: Server) -> None:
    documents = [Document(page_content=text) for text in DOCUMENTS]
    with httpx.Client(timeout=120) as http:
        reranker = CohereRerank(client=cohere_client(server, http), model=EMBEDDING_MODEL, top_n=2)
        kept = reranker.compress_documents(documents, QUERY)
    assert [d.page_content for d in kept] in (
        [DOCUMENTS[0], DOCUMENTS[3]],
        [DOCUMENTS[3], DOCUMENTS[0]],
    )
    assert all("relevance_score" in d.metadata for d in kept)


def test_llamaindexs_jina_rerank_keeps_the_relevant_nodes(server: Server) -> None:
    rerank = JinaRerank(
        base_url=f"{server.root}/v1", api_key="unused", model=EMBEDDING_MODEL, top_n=2
    )
    nodes = [NodeWithScore(node=TextNode(text=text)) for text in DOCUMENTS]
    try:
        kept = rerank.postprocess_nodes(nodes, query_str=QUERY)
    finally:
        # Its requests.Session is never closed by it: an unclosed socket otherwise.
        rerank._session.close()
    assert {n.node.get_content() for n in kept} == {DOCUMENTS[0], DOCUMENTS[3]}
