"""`GET /v1/organization/usage/completions` and `.../embeddings`, for admin keys only."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence

from fastapi import APIRouter, Request, Response

from oai_server.caller import caller
from oai_server.errors import PermissionDeniedError
from oai_server.http.answer import json_response
from oai_server.resilience import Breaker
from oai_server.store.service import StoreService
from oai_server.usage.params import UsageQuery, page_token, usage_query
from oai_server.usage.records import UsageRecords, UsageTotal
from oai_server.usage.writer import UsageWriter
from schemas.usage import (
    UsageCompletionsResult,
    UsageEmbeddingsResult,
    UsageResponse,
    UsageTimeBucket,
)

Result = UsageCompletionsResult | UsageEmbeddingsResult
# A sum over up to a month of rows, asked by an admin, not a client waiting on an answer:
# longer than the store's read deadline, whose timeout would mark the store down for all.
READ_S = 10.0


def _completions(total: UsageTotal) -> UsageCompletionsResult:
    g = total.groups
    uncached = total.input_tokens - total.input_cached_tokens
    return UsageCompletionsResult(
        input_tokens=total.input_tokens,
        input_cached_tokens=total.input_cached_tokens,
        input_uncached_tokens=uncached,
        output_tokens=total.output_tokens,
        input_text_tokens=uncached,
        output_text_tokens=total.output_tokens,
        input_cached_text_tokens=total.input_cached_tokens,
        num_model_requests=total.num_model_requests,
        project_id=None,
        user_id=None,
        api_key_id=g.get("api_key_id") or None,
        model=g.get("model"),
        batch=None if g.get("batch") is None else bool(g["batch"]),
        service_tier=g.get("service_tier"),
    )


def _embeddings(total: UsageTotal) -> UsageEmbeddingsResult:
    return UsageEmbeddingsResult(
        input_tokens=total.input_tokens,
        num_model_requests=total.num_model_requests,
        project_id=None,
        user_id=None,
        api_key_id=total.groups.get("api_key_id") or None,
        model=total.groups.get("model"),
    )


def _page(query: UsageQuery, totals: Sequence[UsageTotal]) -> UsageResponse:
    result: Callable[[UsageTotal], Result] = (
        _completions if query.kind == "completions" else _embeddings
    )
    by_bucket: defaultdict[int, list[Result]] = defaultdict(list)
    for total in totals:
        by_bucket[total.bucket].append(result(total))
    last = min(query.first + query.limit, query.buckets)
    data = []
    for i in range(query.first, last):
        start = query.start_time + i * query.width
        end = min(start + query.width, query.end_time)
        results = by_bucket.get(i, [])
        data.append(UsageTimeBucket(start_time=start, end_time=end, results=results))
    more = last < query.buckets
    next_page = page_token(query.start_time + last * query.width) if more else None
    return UsageResponse(data=data, has_more=more, next_page=next_page)


def router(
    store: StoreService,
    records: UsageRecords,
    writer: UsageWriter,
    breaker: Breaker,
    admins: frozenset[str],
) -> APIRouter:
    """The routes, answering from `records` (after `writer` writes this replica's tallies)."""
    router = APIRouter()

    async def answer(kind: str, request: Request) -> Response:
        if caller(request.scope) not in admins:
            raise PermissionDeniedError(
                "The Usage API needs an admin key: one the server was given with --admin-api-key."
            )
        query = usage_query(kind, request.query_params)
        async with store.reading():
            await writer.flush()  # read-your-writes: this replica's tallies first
            totals = await breaker.call(records.totals(query), READ_S)
        return json_response(_page(query, totals))

    @router.get("/v1/organization/usage/completions")
    async def usage_completions(request: Request) -> Response:
        return await answer("completions", request)

    @router.get("/v1/organization/usage/embeddings")
    async def usage_embeddings(request: Request) -> Response:
        return await answer("embeddings", request)

    return router
