"""The Open Responses compliance suite's image check (ported: `tests/open_responses`), on
the test VLM, with one request."""

from __future__ import annotations

import pytest

from tests.conformance import validating_client
from tests.integration.conftest import Server
from tests.open_responses.checks import create
from tests.vision.conftest import VLM
from tests.vision.images import RED, data_url

pytestmark = pytest.mark.integration


def test_image_input_on_a_vision_model(vlm_server: Server) -> None:
    content = [
        {"type": "input_text", "text": "What do you see in this image? Answer in one sentence."},
        {"type": "input_image", "image_url": data_url(RED)},
    ]
    # The test VLM's weights are random and would write to the cap: a forced call with
    # one of two words as its argument makes its answer end. (Not a `json_schema` text
    # format: the specs disagree on its echo, OpenAI's requires the schema, Open Responses'
    # has it null.)
    colour = {
        "type": "function",
        "name": "say_colour",
        "description": "The image's colour.",
        "parameters": {
            "type": "object",
            "properties": {"colour": {"enum": ["red", "blue"]}},
            "required": ["colour"],
            "additionalProperties": False,
        },
    }
    body = {
        "model": VLM,
        "input": [{"type": "message", "role": "user", "content": content}],
        "max_output_tokens": 64,
        "tools": [colour],
        "tool_choice": {"type": "function", "name": "say_colour"},
    }
    with validating_client(base_url=vlm_server.root, timeout=300) as client:
        response = create(client, body)
    assert response["output"]
    assert response["status"] == "completed"
