"""The page's SSE reader and markdown renderer, run in the browser on awkward input."""

from __future__ import annotations

from playwright.sync_api import Page

from oai_server.engine.fake import FakeEngine
from tests.web.browser import open_page
from tests.web.conftest import Serve

READ = """async (pieces) => {
  const { readEvents } = await import(location.origin + '/ui/js/sse.js');
  const encoder = new TextEncoder();
  const body = new ReadableStream({
    start(controller) {
      for (const piece of pieces) controller.enqueue(encoder.encode(piece));
      controller.close();
    },
  });
  const events = [];
  for await (const data of readEvents(new Response(body))) events.push(data);
  return events;
}"""

RENDER = """async (source) => {
  const { renderMarkdown } = await import(location.origin + '/ui/js/markdown.js');
  const box = document.createElement('div');
  box.append(renderMarkdown(source));
  return box.innerHTML;
}"""


def test_events_are_cut_wherever_the_network_splits_them(page: Page, live: Serve) -> None:
    with live(FakeEngine()) as root:
        open_page(page, root)
        pieces = [
            'data: {"a"',
            ":1}\r\n\r\ndata: x\n",
            "\n: comment\n\nda",
            "ta: é\n\n",
            "data: [DONE]",
        ]
        assert page.evaluate(READ, pieces) == ['{"a":1}', "x", "é", "[DONE]"]
        multi = ["data: one\ndata: two\n\n"]
        assert page.evaluate(READ, multi) == ["one\ntwo"]


def test_markdown_edge_cases(page: Page, live: Serve) -> None:
    with live(FakeEngine()) as root:
        open_page(page, root)
        render = lambda source: page.evaluate(RENDER, source)  # noqa: E731
        # A reply still streaming: an unclosed fence is already a code block.
        assert (
            render("```js\nlet a = '<b>'")
            == "<pre><code data-lang=\"js\">let a = '&lt;b&gt;'</code></pre>"
        )
        assert render("snake_case_name and 2 * 3 * 4") == "<p>snake_case_name and 2 * 3 * 4</p>"
        assert (
            render("# Title\n\n> quoted *x*")
            == "<h3>Title</h3><blockquote><p>quoted <em>x</em></p></blockquote>"
        )
        assert render("3. three\n4. four") == '<ol start="3"><li>three</li><li>four</li></ol>'
        assert render("[x](data:text/html,hi)") == "<p>x</p>"
        assert render("a\\*b\\*") == "<p>a*b*</p>"
