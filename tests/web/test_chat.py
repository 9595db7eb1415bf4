"""The chat page in a real browser against a real uvicorn and the scripted engine."""

from __future__ import annotations

import re
import time

from playwright.sync_api import Page, expect

from oai_server.engine.fake import FakeEngine
from tests.web.browser import open_page, send, wait_reply
from tests.web.conftest import Serve

WORDS = " ".join(f"word{i}" for i in range(20))

# Records the reply's text each time the DOM under the list changes.
WATCH_REPLY = """() => {
  window.seen = [];
  window.sawTyping = false;
  new MutationObserver(() => {
    if (document.querySelector('.msg.assistant .typing')) window.sawTyping = true;
    const reply = document.querySelector('.msg.assistant:last-child .content');
    if (reply) window.seen.push(reply.textContent);
  }).observe(document.getElementById('messages'),
             {subtree: true, childList: true, characterData: true});
}"""


def test_tokens_appear_as_they_arrive_with_figures_under_the_reply(page: Page, live: Serve) -> None:
    # 2 s for the 20 words: the page paints once per animation frame, and a loaded machine
    # draws frames slowly; five updates must fit in the reply's time.
    engine = FakeEngine(reply=WORDS, token_delay=0.1)
    with live(engine) as root:
        open_page(page, root)
        page.evaluate(WATCH_REPLY)
        send(page, "Count for me")
        text = wait_reply(page)
        assert text == WORDS
        seen = [t for t in page.evaluate("window.seen") if t]
        partial = {t for t in seen if t != WORDS and WORDS.startswith(t)}
        assert len(partial) >= 5, f"only {len(partial)} updates before the end"
        assert page.evaluate("window.sawTyping")
        figures = page.inner_text(".msg.assistant .stats")
        assert re.search(r"TTFT (\d+ ms|\d+\.\d\d s)", figures)  # a second or more: in s
        assert re.search(r"total \d", figures)
        assert "20 tokens" in figures
        assert re.search(r"\d+\.\d tok/s", figures)
        # The streaming reply was announced to screen readers, politely.
        assert page.get_attribute("#live", "aria-live") == "polite"
        assert WORDS in page.inner_text("#live")


def test_enter_sends_and_shift_enter_adds_a_line(page: Page, live: Serve) -> None:
    engine = FakeEngine(reply="ok")
    with live(engine) as root:
        open_page(page, root)
        page.focus("#prompt")
        page.keyboard.type("first line")
        page.keyboard.press("Shift+Enter")
        page.keyboard.type("second line")
        assert page.locator(".msg").count() == 0
        page.keyboard.press("Enter")
        wait_reply(page)
        assert page.inner_text(".msg.user .content") == "first line\nsecond line"
        assert page.input_value("#prompt") == ""
        sent = engine.tokenizer.decode(engine.calls[0].prompt_token_ids)
        assert "first line\nsecond line" in sent


def test_stop_aborts_the_engine_request(page: Page, live: Serve) -> None:
    engine = FakeEngine(reply=WORDS, token_delay=0.2)
    with live(engine) as root:
        open_page(page, root)
        send(page, "Talk for a while")
        page.wait_for_function(
            "() => document.querySelector('.msg.assistant .content').textContent.length > 0"
        )
        page.click("#stop")
        # Generous for a loaded machine (the loop ends when the abort lands); the 20 words
        # take 4 s, and only a request still running is recorded as aborted.
        deadline = time.monotonic() + 30
        while not engine.aborted and time.monotonic() < deadline:
            time.sleep(0.02)
        assert engine.aborted == [engine.calls[0].request_id]
        expect(page.locator(".msg.assistant .note")).to_have_text("Stopped.")
        expect(page.locator("#send")).to_be_visible()
        assert page.inner_text(".msg.assistant .content") != WORDS


def test_settings_reach_the_request(page: Page, live: Serve) -> None:
    engine = FakeEngine(reply=WORDS)
    with live(engine) as root:
        open_page(page, root)
        page.click("#settings summary")
        page.fill("#system-prompt", "You are terse.")
        page.fill("#temperature", "0.3")
        page.fill("#max-tokens", "5")
        page.focus("#prompt")  # the fields save on change
        send(page, "hi")
        assert wait_reply(page) == "word0 word1 word2 word3 word4"
        call = engine.calls[0]
        assert call.options.max_tokens == 5
        assert call.options.temperature == 0.3
        assert "<|system|>You are terse." in engine.tokenizer.decode(call.prompt_token_ids)


def test_a_reload_keeps_the_conversations(page: Page, live: Serve) -> None:
    engine = FakeEngine(reply="Remembered.")
    with live(engine) as root:
        open_page(page, root)
        send(page, "Keep this")
        wait_reply(page)
        page.reload()
        open_page(page, root)
        expect(page.locator(".msg.user .content")).to_have_text("Keep this")
        expect(page.locator(".msg.assistant .content")).to_have_text("Remembered.")
        page.click("#new-chat")
        expect(page.locator(".msg")).to_have_count(0)
        send(page, "Another")
        wait_reply(page)
        titles = page.locator("#conversations .conv")
        expect(titles).to_have_text(["Another", "Keep this"])
        titles.nth(1).click()
        expect(page.locator(".msg.user .content")).to_have_text("Keep this")
        # The next turn sends the whole conversation.
        send(page, "And this")
        wait_reply(page)
        prompt = engine.tokenizer.decode(engine.calls[-1].prompt_token_ids)
        for turn in ("Keep this", "Remembered.", "And this"):
            assert turn in prompt


def test_copy_and_regenerate(page: Page, live: Serve) -> None:
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    engine = FakeEngine(reply="Copy me.")
    with live(engine) as root:
        open_page(page, root)
        send(page, "Say it")
        wait_reply(page)
        page.click(".msg.assistant button[data-action=copy]")
        expect(page.locator(".msg.assistant button[data-action=copy]")).to_have_text("Copied")
        assert page.evaluate("navigator.clipboard.readText()") == "Copy me."
        page.click(".msg.assistant button[data-action=regenerate]")
        page.wait_for_function(
            "() => document.querySelectorAll('.msg.assistant .stats').length === 1"
        )
        wait_reply(page)
        assert len(engine.calls) == 2
        assert engine.calls[0].prompt_token_ids == engine.calls[1].prompt_token_ids
        expect(page.locator(".msg")).to_have_count(2)


def test_a_401_asks_for_the_key_and_then_works(page: Page, live: Serve) -> None:
    engine = FakeEngine(reply="Authorized.")
    with live(engine, api_key="k") as root:
        page.goto(root + "/")
        dialog = page.locator("#key-dialog")
        expect(dialog).to_be_visible()
        expect(page.locator("#key-reason")).to_contain_text("API key")
        page.fill("#key-input", "wrong")
        page.click("#key-ok")
        expect(dialog).to_be_visible()  # asked again
        page.fill("#key-input", "k")
        page.press("#key-input", "Enter")  # the keyboard alone will do
        expect(dialog).to_be_hidden()
        page.wait_for_function("() => document.querySelector('#model').options.length > 0")
        send(page, "Let me in")
        assert wait_reply(page) == "Authorized."
        page.click("#settings summary")
        assert page.input_value("#api-key") == "k"


def test_an_error_in_the_stream_is_shown(page: Page, live: Serve) -> None:
    engine = FakeEngine(reply=WORDS, fail_at_step=3, token_delay=0.01)
    with live(engine) as root:
        open_page(page, root)
        send(page, "Break")
        error = page.locator(".msg.assistant .error")
        expect(error).to_contain_text("The engine failed while generating.")
        assert page.inner_text(".msg.assistant .content") == "word0 word1 word2"


def test_an_http_error_is_shown_from_its_envelope(page: Page, live: Serve) -> None:
    with live(FakeEngine()) as root:
        open_page(page, root)
        page.click("#settings summary")
        page.fill("#temperature", "5")
        page.focus("#prompt")
        send(page, "Too hot")
        error = page.locator(".msg.assistant .error")
        expect(error).to_contain_text("Error 400")
        expect(error).to_contain_text("temperature")
        assert page.inner_text(".msg.assistant .content") == ""


def test_every_control_is_labelled_and_the_keyboard_alone_works(page: Page, live: Serve) -> None:
    with live(FakeEngine(reply="Done.")) as root:
        open_page(page, root)
        unlabelled = page.evaluate(
            """() => [...document.querySelectorAll('input, select, textarea, button')]
              .filter((el) => !(el.labels && el.labels.length) && !el.getAttribute('aria-label')
                              && !el.textContent.trim())
              .map((el) => el.id || el.outerHTML)"""
        )
        assert unlabelled == []
        # Tab from the top reaches the sidebar, the settings, the model and the message box.
        reached = []
        page.focus("body")
        for _ in range(12):
            page.keyboard.press("Tab")
            reached.append(page.evaluate("() => document.activeElement.id"))
        for control in ("new-chat", "model", "prompt", "send"):
            assert control in reached
        page.focus("#prompt")
        page.keyboard.type("Hello")
        page.keyboard.press("Enter")
        wait_reply(page)
        page.keyboard.press("Shift+Tab")  # from the box back into the list: the reply's buttons
        page.keyboard.press("Shift+Tab")
        focused = page.evaluate("() => document.activeElement.dataset.action || ''")
        assert focused in ("copy", "regenerate")
