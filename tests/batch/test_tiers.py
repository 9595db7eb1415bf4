"""Batch lines are shaped as their owner's live requests (tier echoed, prefix cache salted)
and always run at the engine's lowest priority."""

from __future__ import annotations

from oai_server.engine.fake import FakeEngine
from oai_server.generation.service_tier import BATCH_PRIORITY
from tests.batch.helpers import chat_line, read_lines, upload, wait
from tests.keys import served_key_id
from tests.live import serve
from tests.store.conftest import make_app, sdk

ALLOWED, OTHER = "sk-allowed", "sk-other"


def test_lines_echo_their_owners_tier_and_run_last(store_url: str) -> None:
    engine = FakeEngine(scheduling_policy="priority")
    app = make_app(
        store_url,
        engine,
        scheduling_policy="priority",
        api_key=[ALLOWED, OTHER],
        service_tier_priority_keys=[served_key_id(ALLOWED)],
    )
    with serve(app) as base, sdk(base, ALLOWED) as allowed, sdk(base, OTHER) as other:
        tiers = {}
        for key, client in (("allowed", allowed), ("other", other)):
            lines = [
                chat_line("fast", "q", max_tokens=2, service_tier="priority"),
                chat_line("flex", "q", max_tokens=2, service_tier="flex"),
            ]
            batch = client.batches.create(
                input_file_id=upload(client, lines),
                endpoint="/v1/chat/completions",
                completion_window="24h",
            )
            done = wait(client, batch.id)
            assert done.status == "completed"
            for line in read_lines(client, done.output_file_id):
                tiers[key, line["custom_id"]] = line["response"]["body"]["service_tier"]
        # A vLLM priority below 0 is refused to the other key, as the live endpoint does.
        refused = other.batches.create(
            input_file_id=upload(other, [chat_line("jump", "q", max_tokens=2, priority=-1)]),
            endpoint="/v1/chat/completions",
            completion_window="24h",
        )
        failed = wait(other, refused.id)
        assert failed.status == "failed"
        assert failed.errors is not None
        assert failed.errors.data[0].param == "priority"
    assert tiers == {
        ("allowed", "fast"): "priority",
        ("allowed", "flex"): "flex",
        ("other", "fast"): "default",
        ("other", "flex"): "flex",
    }
    assert {call.options.priority for call in engine.calls} == {BATCH_PRIORITY}
    assert {call.options.cache_salt for call in engine.calls} == {
        served_key_id(ALLOWED),
        served_key_id(OTHER),
    }
