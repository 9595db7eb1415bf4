"""Usage per key: what the Usage API and `/metrics` say adds up to what each answer's
`usage` said, per key and per model, across a restart, on SQLite and PostgreSQL."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
from fastapi import FastAPI
from prometheus_client import CollectorRegistry, generate_latest

from oai_server.app import create_app
from oai_server.engine.fake import FakeEmbeddingEngine, FakeEngine
from oai_server.engine.router import EngineRouter
from oai_server.observability import usage as usage_meter
from oai_server.observability.usage import Slot, Tally, UsageMeter
from oai_server.resilience import Breaker
from oai_server.settings import Settings
from oai_server.usage.records import UsageRecords
from oai_server.usage.writer import UsageWriter
from tests.batch.helpers import chat_line, read_lines, upload, wait
from tests.conformance import ValidatingTransport, checked_get
from tests.keys import served_key_id
from tests.live import serve
from tests.store.conftest import sdk

ADMIN, ALICE, BOB = "sk-admin", "sk-alice", "sk-bob"
MODELS = ("first", "second")
EMBEDDING = "all-minilm-l6-v2"


def make_app(store_url: str, **settings: Any) -> FastAPI:
    """Two chat models and an embedding model; two keys and an admin key."""
    engines = {
        "first": FakeEngine(reply="I am the first model."),
        "second": FakeEngine(reply="I am the second, and I say rather more than the first."),
    }
    return create_app(
        Settings(
            store_url=store_url,
            model=[f"{name}=org/{name}" for name in MODELS],
            api_key=[ALICE, BOB],
            admin_api_key=[ADMIN],
            response_cache="memory",
            **settings,
        ),
        EngineRouter(engines),
        embedder=FakeEmbeddingEngine(),
    )


@contextmanager
def admin(base: str) -> Iterator[openai.OpenAI]:
    """The official SDK's admin client (`client.admin.organization.usage`)."""
    with openai.OpenAI(
        base_url=f"{base}/v1",
        admin_api_key=ADMIN,
        max_retries=0,
        http_client=httpx.Client(transport=ValidatingTransport()),
    ) as client:
        yield client


# (api_key_id, model) -> [input_tokens, output_tokens, requests], as the answers said.
Totals = dict[tuple[str, str], Counter[str]]


def _count(totals: Totals, key: str, model: str, usage: Any, output: bool = True) -> None:
    seen = totals.setdefault((served_key_id(key), model), Counter())
    seen["input"] += usage.prompt_tokens
    seen["output"] += usage.completion_tokens if output else 0
    seen["requests"] += 1


def _use(base: str, totals: Totals, round_: int) -> None:
    """Each key asks each model, whole and streamed, completions and embeddings."""
    for key in (ALICE, BOB):
        with sdk(base, api_key=key) as client:
            for model in MODELS:
                text = f"Round {round_}: {key} asks {model} something"
                chat = client.chat.completions.create(
                    model=model, messages=[{"role": "user", "content": text}], store=False
                )
                _count(totals, key, model, chat.usage)
                stream = client.chat.completions.create(
                    model=model,
                    messages=[{"role": "user", "content": text + " at length"}],
                    stream=True,
                    stream_options={"include_usage": True},
                )
                _count(totals, key, model, [c for c in stream if c.usage][-1].usage)
                completion = client.completions.create(model=model, prompt=text, max_tokens=4)
                _count(totals, key, model, completion.usage)
                response = client.responses.create(model=model, input=text + " (Responses)")
                assert response.usage is not None
                _count_tokens(totals, key, model, response.usage)
                with anthropic.Anthropic(base_url=base, api_key=key, max_retries=0) as messages:
                    message = messages.messages.create(
                        model=model,
                        max_tokens=16,
                        messages=[{"role": "user", "content": text + " (Messages)"}],
                    )
                _count_tokens(totals, key, model, message.usage)
                # Not counted: a request refused before the engine, the cache's replay.
                with pytest.raises(openai.BadRequestError):
                    client.chat.completions.create(
                        model=model, messages=[{"role": "user", "content": text}], temperature=9
                    )
                cached = [{"role": "user", "content": text + " (cached)"}]
                for _ in range(2):
                    replayed = client.chat.completions.with_raw_response.create(
                        model=model, messages=cached, temperature=0
                    )
                    if replayed.headers["x-cache"] == "miss":
                        _count(totals, key, model, replayed.parse().usage)
            embedded = client.embeddings.create(model=EMBEDDING, input=[key, "two inputs"])
            _count(totals, key, EMBEDDING, embedded.usage, output=False)


def _count_tokens(totals: Totals, key: str, model: str, usage: Any) -> None:
    """A Responses or Anthropic answer's usage, counted as a chat answer's."""
    seen = totals.setdefault((served_key_id(key), model), Counter())
    seen["input"] += usage.input_tokens
    seen["output"] += usage.output_tokens
    seen["requests"] += 1


def _sum(results: Any, *fields: str) -> Totals:
    out: Totals = {}
    for result in results:
        group = tuple(getattr(result, f) for f in fields)
        seen = out.setdefault(group, Counter())  # type: ignore[arg-type]
        seen["input"] += result.input_tokens
        seen["output"] += getattr(result, "output_tokens", 0)
        seen["requests"] += result.num_model_requests
    return out


def _merged(totals: Totals, by: int | None) -> Totals:
    """`totals` by key (0), by model (1), or all in one (None)."""
    out: Totals = {}
    for group, seen in totals.items():
        merged = (group[by],) if by is not None else ()
        out.setdefault(merged, Counter()).update(seen)  # type: ignore[arg-type]
    return out


def test_usage_adds_up_per_key_and_model_across_a_restart(store_url: str) -> None:
    start = int(time.time()) - 60
    totals: Totals = {}
    with serve(make_app(store_url)) as base:
        _use(base, totals, 1)
    with serve(make_app(store_url)) as base:  # restarted: the first round is in the store
        _use(base, totals, 2)
        chat = {k: v for k, v in totals.items() if k[1] != EMBEDDING}
        embeddings = {k: v for k, v in totals.items() if k[1] == EMBEDDING}
        with admin(base) as client:
            usage = client.admin.organization.usage
            page = usage.completions(start_time=start, group_by=["api_key_id", "model"])
            assert len(page.data) == 1
            assert not page.has_more
            assert page.next_page is None
            results = page.data[0].results
            assert _sum(results, "api_key_id", "model") == chat
            assert all(r.batch is None and r.service_tier is None for r in results)
            for by, fields in ((0, ["api_key_id"]), (1, ["model"]), (None, [])):
                page = usage.completions(start_time=start, group_by=fields)  # type: ignore[arg-type]
                assert _sum(page.data[0].results, *fields) == _merged(chat, by)
            # Minute buckets: the same sums, wherever the minutes fell.
            minutes = usage.completions(start_time=start, bucket_width="1m", limit=10)
            in_minutes = [r for bucket in minutes.data for r in bucket.results]
            assert _sum(in_minutes) == _merged(chat, None)
            assert minutes.data[0].start_time == start
            page = usage.embeddings(start_time=start, group_by=["api_key_id", "model"])
            assert _sum(page.data[0].results, "api_key_id", "model") == embeddings
            only_bob = usage.completions(start_time=start, api_key_ids=[served_key_id(BOB)])
            assert _sum(only_bob.data[0].results) == _merged(
                {k: v for k, v in chat.items() if k[0] == served_key_id(BOB)}, None
            )
        # The counters count since this start: the second round only.
        second: Totals = {}
        with sdk(base, api_key=ALICE) as client:
            answer = client.chat.completions.create(
                model="second", messages=[{"role": "user", "content": "counted"}]
            )
            _count(second, ALICE, "second", answer.usage)
        metrics = checked_get(f"{base}/metrics", headers={"Authorization": f"Bearer {ALICE}"}).text
    for secret in (ADMIN, ALICE, BOB):
        assert secret not in metrics
    labels = (
        f'api_key_id="{served_key_id(ALICE)}",batch="false",model="second",service_tier="default"'
    )
    requests = _metric(metrics, f"oai_usage_requests_total{{{labels}}}")
    output = _metric(metrics, f'oai_usage_tokens_total{{{labels},type="output"}}')
    round_two = totals[(served_key_id(ALICE), "second")]
    assert requests == round_two["requests"] / 2 + 1
    assert output == round_two["output"] / 2 + second[(served_key_id(ALICE), "second")]["output"]


def _metric(page: str, series: str) -> float:
    for line in page.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    raise AssertionError(f"{series} not in /metrics")


def test_paging_walks_every_bucket_once() -> None:
    with serve(make_app("sqlite:///:memory:")) as base:
        totals: Totals = {}
        _use(base, totals, 1)
        start = int(time.time()) - 5 * 3600 + 30
        with admin(base) as client:
            usage = client.admin.organization.usage
            pages = [usage.completions(start_time=start, bucket_width="1h", limit=2)]
            while pages[-1].has_more:
                assert pages[-1].next_page is not None
                pages.append(
                    usage.completions(
                        start_time=start, bucket_width="1h", limit=2, page=pages[-1].next_page
                    )
                )
    buckets = [b for page in pages for b in page.data]
    assert [len(p.data) for p in pages] == [2, 2, 1]
    assert [b.start_time for b in buckets] == [start + i * 3600 for i in range(5)]
    assert buckets[-1].end_time <= int(time.time()) + 1
    results = [r for b in buckets for r in b.results]
    chat = {k: v for k, v in totals.items() if k[1] != EMBEDDING}
    assert _sum(results) == _merged(chat, None)
    assert all(not b.results for b in buckets[:-1])  # all of it happened just now


@pytest.mark.parametrize(
    ("query", "param"),
    [
        ("", "start_time"),
        ("start_time=soon", "start_time"),
        ("start_time=100&end_time=50", "start_time"),
        ("start_time=100&bucket_width=2h", "bucket_width"),
        ("start_time=100&bucket_width=1d&limit=32", "limit"),
        ("start_time=100&limit=0", "limit"),
        ("start_time=100&group_by[]=colour", "group_by"),
        ("start_time=100&group_by=batch&kind=embeddings", None),
        ("start_time=100&batch=maybe", "batch"),
        ("start_time=100&page=page_garbage", "page"),
        ("start_time=100&project_ids[]=proj_1", "project_ids"),
    ],
)
def test_bad_parameters_are_400s_and_other_keys_403s(query: str, param: str | None) -> None:
    with serve(make_app("sqlite:///:memory:")) as base:
        bearer = {"Authorization": f"Bearer {ADMIN}"}
        if param is None:  # batch is no group of embeddings
            got = checked_get(f"{base}/v1/organization/usage/embeddings?{query}", headers=bearer)
            assert got.status_code == 400
            assert got.json()["error"]["param"] == "group_by"
            return
        got = checked_get(f"{base}/v1/organization/usage/completions?{query}", headers=bearer)
        assert got.status_code == 400, got.text
        assert got.json()["error"]["param"] == param
        for key in (ALICE, BOB):
            with sdk(base, api_key=key) as client, pytest.raises(openai.PermissionDeniedError):
                client.get("/organization/usage/completions?start_time=100", cast_to=httpx.Response)
        assert checked_get(f"{base}/v1/organization/usage/embeddings").status_code == 401


def test_without_an_admin_key_configured_every_caller_gets_403() -> None:
    app = create_app(
        Settings(store_url="sqlite:///:memory:", api_key=[ALICE]), FakeEngine(reply="ok")
    )
    with serve(app) as base:
        for path in ("completions", "embeddings"):
            url = f"{base}/v1/organization/usage/{path}?start_time=100"
            got = checked_get(url, headers={"Authorization": f"Bearer {ALICE}"})
            assert got.status_code == 403, got.text
            assert got.json()["error"]["code"] == "insufficient_permissions"


class FlakyRecords(UsageRecords):
    """The usage table of a database that fails its first `failures` writes."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.written: dict[Slot, Tally] = {}

    async def add(self, tallies: Mapping[Slot, Tally]) -> None:
        if self.failures:
            self.failures -= 1
            raise ConnectionError("database went away")
        for slot, tally in tallies.items():
            self.written.setdefault(slot, Tally()).add(tally)


async def test_usage_waits_for_the_store_and_its_bound_drops_and_counts_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def probe() -> None:
        return None

    meter = UsageMeter()
    records = FlakyRecords(failures=2)
    writer = UsageWriter(meter, records, Breaker("test store", probe, errors_to_open=10))
    for output in (3, 4):
        meter.add("completions", None, "first", "default", 5, 1, output)
    await writer.flush()  # fails: kept for the next round
    meter.add("completions", None, "first", "default", 5, 0, 6)
    await writer.flush()  # fails again
    assert records.written == {}
    await writer.flush()
    (slot, tally), *others = records.written.items()
    assert not others
    assert slot[1] == ("completions", "", "first", "default", False)
    assert (tally.input_tokens, tally.cached_tokens, tally.output_tokens) == (15, 2, 13)
    assert tally.requests == 3
    # Beyond the bound, what the store has not taken is dropped, and counted.
    monkeypatch.setattr(usage_meter, "MAX_PENDING", 1)
    meter.add("completions", None, "first", "default", 1, 0, 1)
    meter.snapshot(now=0)
    meter.add("completions", None, "second", "default", 1, 0, 1)
    meter.snapshot(now=60)
    assert meter.dropped == 1
    assert "oai_usage_dropped_requests_total 1.0" in _rendered(meter)


def _rendered(meter: UsageMeter) -> str:
    registry = CollectorRegistry()
    registry.register(meter)
    return generate_latest(registry).decode()


def test_batch_lines_are_their_owners_usage_marked_batch(tmp_path: Path) -> None:
    app = make_app(f"sqlite:///{tmp_path / 'store.db'}")
    with serve(app) as base, sdk(base, api_key=BOB) as client:
        start = int(time.time()) - 60
        lines = [chat_line(f"req-{i}", f"question {i}", model="second") for i in range(3)]
        batch = client.batches.create(
            input_file_id=upload(client, lines),
            endpoint="/v1/chat/completions",
            completion_window="24h",
        )
        done = wait(client, batch.id)
        assert done.output_file_id is not None
        output = read_lines(client, done.output_file_id)
        live = client.chat.completions.create(
            model="second", messages=[{"role": "user", "content": "live"}]
        )
        assert live.usage is not None
        with admin(base) as admin_client:
            page = admin_client.admin.organization.usage.completions(
                start_time=start, group_by=["api_key_id", "batch"]
            )
    by_batch = {r.batch: r for r in page.data[0].results}
    assert {r.api_key_id for r in by_batch.values()} == {served_key_id(BOB)}
    assert by_batch[True].num_model_requests == 3
    usages = [line["response"]["body"]["usage"] for line in output]
    assert by_batch[True].input_tokens == sum(u["prompt_tokens"] for u in usages)
    assert by_batch[True].output_tokens == sum(u["completion_tokens"] for u in usages)
    assert by_batch[False].num_model_requests == 1
    assert by_batch[False].output_tokens == live.usage.completion_tokens


def test_while_the_database_is_down_the_usage_api_answers_503_with_retry_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def gone(*_args: Any) -> Any:
        raise ConnectionError("database went away")

    app = make_app(f"sqlite:///{tmp_path / 'store.db'}")
    start = int(time.time()) - 60
    with serve(app) as base, sdk(base, api_key=ALICE) as client:
        monkeypatch.setattr(UsageRecords, "add", gone)
        monkeypatch.setattr(UsageRecords, "totals", gone)
        # The answers themselves neither wait nor fail for it.
        chat = client.chat.completions.create(
            model="first", messages=[{"role": "user", "content": "Hello"}], store=False
        )
        assert chat.choices[0].message.content == "I am the first model."
        url = f"{base}/v1/organization/usage/completions?start_time={start}"
        refused = checked_get(url, headers={"Authorization": f"Bearer {ADMIN}"})
        assert refused.status_code == 503, refused.text
        assert refused.json()["error"]["code"] == "store_unavailable"
        assert int(refused.headers["Retry-After"]) >= 1
        monkeypatch.undo()
        # Back: the tallies that waited are written, and the read answers them.
        with admin(base) as usage:
            deadline = time.monotonic() + 10
            while True:
                try:
                    page = usage.admin.organization.usage.completions(start_time=start)
                    break
                except openai.InternalServerError:
                    assert time.monotonic() < deadline
                    time.sleep(0.2)
        assert sum(r.num_model_requests for b in page.data for r in b.results) == 1
