"""What the real server tells dashboards and clients about its model: the served name,
never where the weights lie on the host."""

from __future__ import annotations

import re

import httpx
import pytest

from oai_server.settings import EMBEDDED_EMBEDDING_MODEL_NAME as EMBEDDING_MODEL
from tests.conformance import validating_client
from tests.integration.conftest import MODEL, Server

pytestmark = pytest.mark.integration

# Where the embedded model's weights are converted and kept on a host.
HOST_PATHS = ("/root", "/home/", ".cache")


def test_vllm_series_carry_the_served_model_name(server: Server) -> None:
    body = {"model": EMBEDDING_MODEL, "input": "a line to embed"}
    with validating_client(timeout=60) as http:
        assert http.post(f"{server.base_url}/embeddings", json=body).status_code == 200
    text = httpx.get(f"{server.root}/metrics", timeout=10).text
    series = [line for line in text.splitlines() if line.startswith("vllm:")]
    # vLLM's *_info series describe the engine's configuration and carry no model label
    # (as under `vllm serve`); every other series names the model it measures.
    measured = [line for line in series if not line.split("{")[0].endswith("_info")]
    assert len(measured) > 10, text[:2000]
    named = set()
    for line in measured:
        labels = re.search(r'model_name="([^"]*)"', line)
        assert labels is not None, line
        named.add(labels.group(1))
    # The chat engine's, under its served name. The embedding engine keeps no vLLM logger
    # (creating one takes every vllm:* series already registered off /metrics): its
    # figures are the oai_embedding_* series, labelled with its served name.
    assert named == {MODEL}, named
    assert f'model="{EMBEDDING_MODEL}"' in text, text[:2000]


@pytest.mark.parametrize("path", ["/metrics", "/v1/models"])
def test_no_host_path_is_shown(server: Server, path: str) -> None:
    text = httpx.get(f"{server.root}{path}", timeout=10).text
    for host_path in HOST_PATHS:
        assert host_path not in text, (host_path, text[:2000])
