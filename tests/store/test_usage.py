"""Usage per key: what the Usage API and `/metrics` say adds up to what each answer's
`usage` said, per key and per model, across a restart, on SQLite and PostgreSQL."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import openai
import pytest
from fastapi import FastAPI

from oai_server.app import create_app
from oai_server.auth import key_id
from oai_server.engine.fake import FakeEmbeddingEngine, FakeEngine
from oai_server.engine.router import EngineRouter
from oai_server.settings import Settings
from tests.conformance import ValidatingTransport
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
    seen = totals.setdefault((key_id(key), model), Counter())
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
            embedded = client.embeddings.create(model=EMBEDDING, input=[key, "two inputs"])
            _count(totals, key, EMBEDDING, embedded.usage, output=False)


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
            only_bob = usage.completions(start_time=start, api_key_ids=[key_id(BOB)])
            assert _sum(only_bob.data[0].results) == _merged(
                {k: v for k, v in chat.items() if k[0] == key_id(BOB)}, None
            )
        # The counters count since this start: the second round only.
        second: Totals = {}
        with sdk(base, api_key=ALICE) as client:
            answer = client.chat.completions.create(
                model="second", messages=[{"role": "user", "content": "counted"}]
            )
            _count(second, ALICE, "second", answer.usage)
        metrics = httpx.get(f"{base}/metrics", headers={"Authorization": f"Bearer {ALICE}"}).text
    for secret in (ADMIN, ALICE, BOB):
        assert secret not in metrics
    labels = f'api_key_id="{key_id(ALICE)}",batch="false",model="second",service_tier="default"'
    requests = _metric(metrics, f"oai_usage_requests_total{{{labels}}}")
    output = _metric(metrics, f'oai_usage_tokens_total{{{labels},type="output"}}')
    round_two = totals[(key_id(ALICE), "second")]
    assert requests == round_two["requests"] / 2 + 1
    assert output == round_two["output"] / 2 + second[(key_id(ALICE), "second")]["output"]


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
            got = httpx.get(f"{base}/v1/organization/usage/embeddings?{query}", headers=bearer)
            assert got.status_code == 400
            assert got.json()["error"]["param"] == "group_by"
            return
        got = httpx.get(f"{base}/v1/organization/usage/completions?{query}", headers=bearer)
        assert got.status_code == 400, got.text
        assert got.json()["error"]["param"] == param
        for key in (ALICE, BOB):
            with sdk(base, api_key=key) as client, pytest.raises(openai.PermissionDeniedError):
                client.get("/organization/usage/completions?start_time=100", cast_to=httpx.Response)
        assert httpx.get(f"{base}/v1/organization/usage/embeddings").status_code == 401
