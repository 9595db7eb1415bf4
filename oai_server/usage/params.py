"""The Usage API's query parameters, read and checked: a bad one is a 400 naming it.

OpenAI's SDK sends a list as `group_by[]=model&group_by[]=api_key_id`; `group_by=model`
repeated, or comma-separated, is read the same.
"""

from __future__ import annotations

import base64
import binascii
import time
from dataclasses import dataclass

from starlette.datastructures import QueryParams

from oai_server.errors import InvalidRequestError, UnsupportedParameterError

WIDTHS = {"1m": 60, "1h": 3600, "1d": 86_400}
# Buckets per page by width: (default, most), as OpenAI's.
LIMITS = {"1m": (60, 1440), "1h": (24, 168), "1d": (7, 31)}
GROUPS = {
    "completions": ("project_id", "user_id", "api_key_id", "model", "batch", "service_tier"),
    "embeddings": ("project_id", "user_id", "api_key_id", "model"),
}
_PAGE = "page_"


@dataclass(frozen=True)
class UsageQuery:
    kind: str
    start_time: int
    end_time: int
    width: int
    limit: int
    # The index of the page's first bucket (0: the one starting at `start_time`).
    first: int
    group_by: tuple[str, ...]
    api_key_ids: tuple[str, ...]
    models: tuple[str, ...]
    batch: bool | None

    @property
    def buckets(self) -> int:
        """How many buckets the whole range has (the last may be shorter)."""
        return -(-(self.end_time - self.start_time) // self.width)


def _list(params: QueryParams, name: str) -> tuple[str, ...]:
    values = [*params.getlist(name), *params.getlist(name + "[]")]
    return tuple(v for value in values for v in value.split(",") if v)


def _int(params: QueryParams, name: str, default: int | None = None) -> int:
    value = params.get(name)
    if value is None:
        if default is None:
            raise InvalidRequestError(f"Missing required parameter: '{name}'.", param=name)
        return default
    try:
        return int(value)
    except ValueError:
        raise InvalidRequestError(
            f"'{name}' must be an integer (Unix seconds for times), got {value!r}.", param=name
        ) from None


def page_token(bucket_start: int) -> str:
    return _PAGE + base64.urlsafe_b64encode(str(bucket_start).encode()).decode()


def _first(page: str | None, start: int, width: int) -> int:
    if page is None:
        return 0
    try:
        if not page.startswith(_PAGE):
            raise ValueError(page)
        at = int(base64.urlsafe_b64decode(page.removeprefix(_PAGE).encode()))
    except (ValueError, binascii.Error):
        raise InvalidRequestError("'page' is not a page of this query.", param="page") from None
    if at < start or (at - start) % width:
        raise InvalidRequestError("'page' is not a page of this query.", param="page")
    return (at - start) // width


def usage_query(kind: str, params: QueryParams) -> UsageQuery:
    """The query `params` ask of `kind`'s usage (`completions` or `embeddings`)."""
    for name in ("project_ids", "user_ids"):
        if _list(params, name):
            raise UnsupportedParameterError(
                f"'{name}': this server has no projects or users; its usage is by API key "
                "('api_key_ids').",
                param=name,
            )
    start = _int(params, "start_time")
    end = _int(params, "end_time", int(time.time()) + 1)
    if start < 0 or end <= start:
        raise InvalidRequestError(
            "'start_time' must be at least 0 and before 'end_time'.", param="start_time"
        )
    width_name = params.get("bucket_width", "1d")
    if width_name not in WIDTHS:
        raise InvalidRequestError(
            f"'bucket_width' must be one of 1m, 1h, 1d; got {width_name!r}.", param="bucket_width"
        )
    default, most = LIMITS[width_name]
    limit = _int(params, "limit", default)
    if not 1 <= limit <= most:
        raise InvalidRequestError(
            f"'limit' must be between 1 and {most} for bucket_width {width_name}.", param="limit"
        )
    group_by = _list(params, "group_by")
    allowed = GROUPS[kind]
    for field in group_by:
        if field not in allowed:
            raise InvalidRequestError(
                f"'group_by' may name {', '.join(allowed)}; got {field!r}.", param="group_by"
            )
    batch = params.get("batch") if kind == "completions" else None
    if batch not in (None, "true", "false"):
        raise InvalidRequestError("'batch' must be true or false.", param="batch")
    width = WIDTHS[width_name]
    return UsageQuery(
        kind=kind,
        start_time=start,
        end_time=end,
        width=width,
        limit=limit,
        first=_first(params.get("page"), start, width),
        group_by=tuple(dict.fromkeys(group_by)),
        api_key_ids=_list(params, "api_key_ids"),
        models=_list(params, "models"),
        batch=None if batch is None else batch == "true",
    )
