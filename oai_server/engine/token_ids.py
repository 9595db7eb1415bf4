"""The token ids of one choice so far, as vLLM's streaming parsers read them, at O(1) a delta.

vLLM's reasoning and tool-call parsers take, at every delta, the ids before it and the ids
with it (`previous_token_ids`, `current_token_ids`) and look for a marker token in them
(`end_token_id in previous_token_ids`, `.count(start_id)`, `ids[-1]`). Fed a fresh list
each time, as `vllm serve` feeds them, both the copy and the scan grow with the answer: an
answer of n tokens costs O(n^2). Here the ids live in one growing list, each delta's view
of them is a `TokenIdsView` of a length (no copy), and each id's positions are indexed as
they come, so `in` and `count` cost the same at the thousandth token as at the first.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from typing import Any, overload


class TokenIds:
    """One choice's ids, appended to delta by delta; `view()` is them as they stand now."""

    __slots__ = ("_ids", "_positions")

    def __init__(self) -> None:
        self._ids: list[int] = []
        # Each id's positions, in order: where it first came, how often before a length.
        self._positions: dict[int, list[int]] = {}

    def extend(self, ids: Sequence[int]) -> None:
        positions, buffer = self._positions, self._ids
        at_end = len(buffer)
        for token in ids:
            at = positions.get(token)
            if at is None:
                positions[token] = [at_end]
            else:
                at.append(at_end)
            at_end += 1
        buffer += ids

    def view(self) -> TokenIdsView:
        """The ids so far: later `extend`s do not change what the view holds."""
        return TokenIdsView(self, len(self._ids))

    def __len__(self) -> int:
        return len(self._ids)


class TokenIdsView(Sequence[int]):
    """The first `length` ids of a `TokenIds`: a read-only sequence, as a list reads."""

    __slots__ = ("_length", "_owner")

    def __init__(self, owner: TokenIds, length: int) -> None:
        self._owner = owner
        self._length = length

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> list[int]: ...

    def __getitem__(self, index: int | slice) -> int | list[int]:
        ids = self._owner._ids
        if isinstance(index, slice):
            return ids[: self._length][index]
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError("token id index out of range")
        return ids[index]

    def __iter__(self) -> Iterator[int]:
        return islice(self._owner._ids, self._length)

    def __contains__(self, token: object) -> bool:
        at = self._owner._positions.get(token)  # type: ignore[call-overload]
        return at is not None and at[0] < self._length

    def count(self, token: Any) -> int:
        at = self._owner._positions.get(token)
        return 0 if at is None else bisect_left(at, self._length)

    def index(self, token: Any, start: int = 0, stop: int | None = None) -> int:
        return self[:].index(token, start, self._length if stop is None else stop)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TokenIdsView | list | tuple):
            return len(other) == self._length and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __add__(self, other: Iterable[int]) -> list[int]:
        return [*self, *other]

    def __repr__(self) -> str:
        return f"TokenIdsView({list(self)!r})"
