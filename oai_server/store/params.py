"""A list's parameters from a query string (`after`, `limit`, `order`, `model`,
`metadata[k]=v`), and the list object that answers it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from starlette.datastructures import QueryParams

from oai_server.errors import InvalidRequestError
from oai_server.store.interface import CursorNotFoundError, ListQuery, Order

L = TypeVar("L")

DEFAULT_LIMIT = 20
MAX_LIMIT = 100


def _limit(raw: str | None) -> int:
    if raw is None:
        return DEFAULT_LIMIT
    if not raw.strip().isdigit() or not 1 <= int(raw) <= MAX_LIMIT:
        raise InvalidRequestError(
            f"Invalid 'limit': expected an integer from 1 to {MAX_LIMIT}, got '{raw}'.",
            param="limit",
            code="invalid_value",
        )
    return int(raw)


def _order(raw: str | None) -> Order:
    if raw is None or raw == "asc":
        return "asc"
    if raw == "desc":
        return "desc"
    raise InvalidRequestError(
        f"Invalid 'order': expected 'asc' or 'desc', got '{raw}'.",
        param="order",
        code="invalid_value",
    )


def _metadata(params: QueryParams) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for name, value in params.multi_items():
        if name.startswith("metadata[") and name.endswith("]"):
            pairs[name[len("metadata[") : -1]] = value
        elif name == "metadata":
            raise InvalidRequestError(
                "Filter by metadata as 'metadata[key]=value'.", param="metadata"
            )
    return pairs


def list_query(params: QueryParams, *, filters: bool) -> ListQuery:
    """The list a query string asks for; `filters`: whether `model` and `metadata` apply."""
    after = params.get("after")
    if after is not None and not after:
        raise InvalidRequestError("Invalid 'after': empty.", param="after")
    return ListQuery(
        after=after,
        limit=_limit(params.get("limit")),
        order=_order(params.get("order")),
        model=params.get("model") if filters else None,
        metadata=_metadata(params) if filters else {},
    )


def bad_cursor(exc: CursorNotFoundError) -> InvalidRequestError:
    """The 400 for an `after` cursor that names nothing in the list."""
    return InvalidRequestError(
        f"Invalid 'after': no {exc.what} with id '{exc.args[0]}' in this list.",
        param="after",
        code="invalid_value",
    )


def list_object(make: Callable[..., L], data: Sequence[Any], has_more: bool) -> L:
    """`make` (a list schema) of `data`: OpenAI's envelope, with the ids to page from."""
    return make(
        data=data,
        first_id=data[0].id if data else "",
        last_id=data[-1].id if data else "",
        has_more=has_more,
    )
