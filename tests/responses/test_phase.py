"""`phase` on assistant messages: kept as sent, through the template, storage and
conversations, and sent back as it came (Codex resends it on every assistant message)."""

from __future__ import annotations

from pathlib import Path

from oai_server.engine.fake import FakeEngine
from tests.conformance import validating_client
from tests.live import serve
from tests.open_responses.schema import errors
from tests.responses.conftest import app_on, prompt_of
from tests.store.conftest import MODEL

# Shows each assistant message's phase, so the test can read it in the prompt.
PHASED = (
    "{% for m in messages %}<|{{ m.role }}|>{% if m.phase %}({{ m.phase }}){% endif %}"
    "{{ m.content }}\n{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
HISTORY = [
    {"type": "message", "role": "user", "content": "Fix the bug."},
    {"type": "message", "role": "assistant", "content": "Looking.", "phase": "commentary"},
    {"type": "message", "role": "assistant", "content": "Fixed.", "phase": "final_answer"},
    {"type": "message", "role": "user", "content": "Thanks."},
]


def test_phase_reaches_the_template_and_comes_back_from_storage(
    store_url: str, tmp_path: Path
) -> None:
    template = tmp_path / "phased.jinja"
    template.write_text(PHASED)
    engine = FakeEngine(reply="You're welcome.")
    with (
        serve(app_on(store_url, template, engine)) as base,
        validating_client(base_url=base) as http,
    ):
        first = http.post("/v1/responses", json={"model": MODEL, "input": HISTORY}).json()
        assert "<|assistant|>(commentary)Looking.\n<|assistant|>(final_answer)Fixed." in prompt_of(
            engine
        )

        items = http.get(f"/v1/responses/{first['id']}/input_items?order=asc").json()["data"]
        assert [item.get("phase") for item in items] == [None, "commentary", "final_answer", None]
        assert all(errors(item, "Message") == [] for item in items)

        # Rebuilt from the store: the phases are in the next turn's prompt too.
        http.post(
            "/v1/responses",
            json={"model": MODEL, "input": "Bye.", "previous_response_id": first["id"]},
        )
        assert "<|assistant|>(commentary)Looking." in prompt_of(engine)

        # A conversation keeps them the same way.
        conversation = http.post("/v1/conversations", json={"items": HISTORY[:3]}).json()
        listed = http.get(f"/v1/conversations/{conversation['id']}/items?order=asc").json()
        assert [item.get("phase") for item in listed["data"]] == [
            None,
            "commentary",
            "final_answer",
        ]
