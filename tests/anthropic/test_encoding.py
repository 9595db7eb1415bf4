"""A text delta is spliced into a template, not built as a model: its bytes must be those
of the typed `content_block_delta`, whatever the text holds."""

from __future__ import annotations

import pytest

from oai_server.anthropic.sse import frame_of
from oai_server.anthropic.stream import text_delta
from oai_server.http.sse import frame
from oai_server.items.stream import TextAdded, TextItem


@pytest.mark.parametrize(
    "text", ["tok", ' "quoted" ', "line\nbreak\t", "é中😀", "\\", "</script>", "\x00", ""]
)
@pytest.mark.parametrize("index", [0, 3, 12])
def test_a_spliced_text_delta_is_the_typed_events_bytes(text: str, index: int) -> None:
    event = TextAdded(TextItem(index), text, ())
    assert frame_of(event) == frame(text_delta(event))
