"""oai-server on Ray Serve: the same app as autoscaled replicas behind Serve's proxy.

serve run oai_server/ray_serve/serve_config.yaml        # a local Ray, or RAY_ADDRESS's cluster
serve deploy oai_server/ray_serve/serve_config.yaml     # onto a running cluster (dashboard API)
serve run oai_server.ray_serve:build_app ray_max_replicas=4 model=Qwen/Qwen2.5-7B-Instruct

Each replica builds the whole app (settings, engines, services) and holds an engine per
model (the embedding model's too); the builder's arguments are the server's settings by
field name (`Settings`), the `ray_*` ones shaping the deployment (replicas, autoscaling
target, CPUs/GPUs per replica). Every response names its replica in an `x-replica` header.

Metrics: each replica's own `/metrics` registry is mirrored into Ray's metrics, exported
by every node's metrics agent as `ray_oai_*` with `application`, `deployment` and
`replica` labels. The cluster's waiting requests: `sum(ray_serve_deployment_queued_queries)`
(requests the proxies hold because every replica is at `ray_max_ongoing_requests`) plus
`sum(ray_serve_num_ongoing_requests_at_replicas)` (sent to replicas, running or queued in
their engines), and `sum(ray_oai_engine_running_requests)` for what the engines run now.
The autoscaler scales on the second, averaged per replica.

Needs the `ray` extra (`pip install 'oai-server[ray]'`).
"""

from __future__ import annotations

from oai_server.ray_serve.deployment import REPLICA_HEADER, build_app

__all__ = ["REPLICA_HEADER", "build_app"]
