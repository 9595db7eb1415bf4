"""The official SDK's Files and Batch methods, end to end on the fake engine, on SQLite and
PostgreSQL: a batch's lines answered as the live endpoint answers them."""

from __future__ import annotations

import io

import openai
import pytest

from oai_server.engine.fake import FakeEngine
from tests.batch.helpers import chat_line, read_lines, upload, wait
from tests.conformance import validate
from tests.live import serve
from tests.store.conftest import KEYS, MODEL, make_app, sdk


def test_a_batch_of_chat_lines_answers_each_as_the_live_endpoint(store_url: str) -> None:
    engine = FakeEngine(reply_for=lambda prompt: f"echo {prompt[-40:]}")
    with serve(make_app(store_url, engine)) as base, sdk(base) as client:
        lines = [chat_line(f"req-{i}", f"question {i}", max_tokens=16) for i in range(5)]
        file_id = upload(client, lines)
        batch = client.batches.create(
            input_file_id=file_id,
            endpoint="/v1/chat/completions",
            completion_window="24h",
            metadata={"job": "eval"},
        )
        assert (batch.status, batch.metadata) == ("validating", {"job": "eval"})

        done = wait(client, batch.id)
        assert done.status == "completed"
        assert (done.request_counts.total, done.request_counts.completed) == (5, 5)
        assert done.request_counts.failed == 0
        assert done.error_file_id is None
        assert done.in_progress_at
        assert done.finalizing_at
        assert done.completed_at
        output = read_lines(client, done.output_file_id)
        assert [line["custom_id"] for line in output] == [f"req-{i}" for i in range(5)]
        for i, line in enumerate(output):
            assert line["error"] is None
            assert line["response"]["status_code"] == 200
            live = client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": f"question {i}"}], max_tokens=16
            )
            body = line["response"]["body"]
            validate("CreateChatCompletionResponse", body)
            assert body["choices"][0]["message"]["content"] == live.choices[0].message.content
            assert body["usage"] == live.usage.model_dump(exclude_none=True)
        produced = client.files.retrieve(done.output_file_id)
        assert (produced.purpose, produced.bytes) == (
            "batch_output",
            len(client.files.content(done.output_file_id).content),
        )


def test_files_list_get_content_delete(store_url: str) -> None:
    with serve(make_app(store_url)) as base, sdk(base) as client:
        first = upload(client, [chat_line("a", "one")])
        second = upload(client, [chat_line("b", "two")])
        assert [f.id for f in client.files.list().data] == [second, first]
        assert [f.id for f in client.files.list(limit=1, order="asc")] == [first, second]
        assert client.files.retrieve(first).filename == "input.jsonl"
        assert b'"custom_id": "a"' in client.files.content(first).content
        assert client.files.delete(first).deleted is True
        with pytest.raises(openai.NotFoundError):
            client.files.retrieve(first)
        with pytest.raises(openai.NotFoundError):
            client.batches.create(
                input_file_id=first, endpoint="/v1/chat/completions", completion_window="24h"
            )


def test_bad_uploads_and_batches_are_openai_errors(store_url: str) -> None:
    app = make_app(store_url, files_max_bytes=200)
    with serve(app) as base, sdk(base) as client:
        with pytest.raises(openai.BadRequestError, match="JSONL"):
            client.files.create(file=("x.jsonl", io.BytesIO(b"not json\n")), purpose="batch")
        with pytest.raises(openai.BadRequestError, match="purpose"):
            client.files.create(file=("x.jsonl", io.BytesIO(b"{}\n")), purpose="fine-tune")
        with pytest.raises(openai.APIStatusError) as too_big:
            client.files.create(file=("x.jsonl", io.BytesIO(b"{}\n" * 100)), purpose="batch")
        assert too_big.value.status_code == 413
        file_id = upload(client, [chat_line("a", "one")])
        with pytest.raises(openai.BadRequestError, match="endpoint"):
            client.batches.create(
                input_file_id=file_id, endpoint="/v1/nothing", completion_window="24h"
            )  # type: ignore[arg-type]
        with pytest.raises(openai.BadRequestError, match="completion_window"):
            client.batches.create(
                input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="1h"
            )  # type: ignore[arg-type]
        with pytest.raises(openai.NotFoundError):
            client.batches.retrieve("batch_missing")


def test_a_file_with_bad_lines_fails_the_batch_naming_each(store_url: str) -> None:
    with serve(make_app(store_url)) as base, sdk(base) as client:
        lines = [
            chat_line("ok", "fine"),
            {"method": "POST", "url": "/v1/chat/completions", "body": {}},
            chat_line("ok", "again"),
            {**chat_line("c", "x"), "url": "/v1/completions"},
            chat_line("d", "x", temperature="hot"),
            {**chat_line("e", "x"), "body": {"model": "no-such-model", "messages": []}},
        ]
        file_id = upload(client, lines)
        batch = client.batches.create(
            input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        failed = wait(client, batch.id)
        assert failed.status == "failed"
        assert failed.failed_at
        errors = [(e.line, e.code) for e in failed.errors.data]
        assert errors[:3] == [
            (2, "missing_required_parameter"),
            (3, "duplicate_custom_id"),
            (4, "invalid_url"),
        ]
        assert [line for line, _code in errors[3:]] == [5, 6]
        assert failed.output_file_id is None


def test_lines_the_engine_fails_are_error_lines(store_url: str) -> None:
    engine = FakeEngine(fail_at_step=1, fault=RuntimeError("boom"))
    with serve(make_app(store_url, engine)) as base, sdk(base) as client:
        file_id = upload(client, [chat_line("a", "one"), chat_line("b", "two")])
        batch = client.batches.create(
            input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        done = wait(client, batch.id)
        assert done.status == "completed"
        assert (done.request_counts.completed, done.request_counts.failed) == (0, 2)
        errors = read_lines(client, done.error_file_id)
        assert {line["custom_id"] for line in errors} == {"a", "b"}
        assert all(line["response"]["status_code"] >= 500 for line in errors)
        assert "boom" not in client.files.content(done.error_file_id).text


def test_keys_see_only_their_own_files_and_batches(store_url: str) -> None:
    app = make_app(store_url, api_key=KEYS)
    with serve(app) as base, sdk(base, "sk-alice") as alice, sdk(base, "sk-bob") as bob:
        file_id = upload(alice, [chat_line("a", "one")])
        batch = alice.batches.create(
            input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        for call in (
            lambda: bob.files.retrieve(file_id),
            lambda: bob.files.content(file_id),
            lambda: bob.files.delete(file_id),
            lambda: bob.batches.retrieve(batch.id),
            lambda: bob.batches.cancel(batch.id),
            lambda: bob.batches.create(
                input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h"
            ),
        ):
            with pytest.raises(openai.NotFoundError):
                call()
        assert bob.files.list().data == []
        assert bob.batches.list().data == []
        done = wait(alice, batch.id)
        with pytest.raises(openai.NotFoundError):
            bob.files.content(done.output_file_id)
        assert len(read_lines(alice, done.output_file_id)) == 1


def test_batches_list_newest_first_with_a_cursor(store_url: str) -> None:
    with serve(make_app(store_url)) as base, sdk(base) as client:
        file_id = upload(client, [chat_line("a", "one")])
        ids = [
            client.batches.create(
                input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h"
            ).id
            for _ in range(5)
        ]
        assert [b.id for b in client.batches.list(limit=2)] == ids[::-1]
        page = client.batches.list(limit=2, after=ids[2])
        assert ([b.id for b in page.data], page.has_more) == ([ids[1], ids[0]], False)
