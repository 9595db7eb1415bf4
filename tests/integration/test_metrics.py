"""What the real server tells dashboards and clients about its model: the served name,
never where the weights lie on the host."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.integration.conftest import MODEL, Server

pytestmark = pytest.mark.integration

# Where the embedded model's weights are converted and kept on a host.
HOST_PATHS = ("/root", "/home/", ".cache")


def test_vllm_series_carry_the_served_model_name(server: Server) -> None:
    text = httpx.get(f"{server.root}/metrics", timeout=10).text
    series = [line for line in text.splitlines() if line.startswith("vllm:")]
    assert len(series) > 10, text[:2000]
    for line in series:
        labels = re.search(r'model_name="([^"]*)"', line)
        assert labels is not None, line
        assert labels.group(1) == MODEL, line


@pytest.mark.parametrize("path", ["/metrics", "/v1/models"])
def test_no_host_path_is_shown(server: Server, path: str) -> None:
    text = httpx.get(f"{server.root}{path}", timeout=10).text
    for host_path in HOST_PATHS:
        assert host_path not in text, (host_path, text[:2000])
