"""oai-server on Ray Serve: the same app as autoscaled replicas behind Serve's proxy.

serve run oai_server/ray_serve/serve_config.yaml        # a local Ray, or RAY_ADDRESS's cluster
serve deploy oai_server/ray_serve/serve_config.yaml     # onto a running cluster
serve run oai_server.ray_serve:build_app ray_max_replicas=4 model=Qwen/Qwen2.5-7B-Instruct

Needs the `ray` extra (`pip install 'oai-server[ray]'`).
"""

from __future__ import annotations

from oai_server.ray_serve.deployment import REPLICA_HEADER, build_app

__all__ = ["REPLICA_HEADER", "build_app"]
