"""Where a parser's next marker can be: vLLM's parsers called only there.

vLLM's streaming parsers (tool calls, thinking) re-read the answer at every delta: a
hermes call costs 100-140 us of parsing a token, about ten plain tokens' whole cost. Yet
most deltas cannot change what the parser is doing: text before any marker, thinking
before its end, a call's argument text. The parser stays the authority on where calls and
thinking begin and end; what is learnt from it is only this: when it has just given back
a delta unchanged, as one kind (content, thinking, one call's arguments), a next delta
that cannot hold a marker would come back the same. Such a delta goes out as that kind
without the parser (`Markers.quiet`); the parser gets the text it missed with the next
delta that can hold a marker (one delta of several tokens, as it gets them under
`--stream-interval`), and what it gives back for that text, already sent, is dropped.

A delta is quiet when its text is plain (letters, digits, spaces, `_.,;!?-`: no
character that begins any family's marker, nor one a parser escapes or re-encodes, such
as quotes, brackets and newlines) and none of its ids is a marker token (a special token
whose text is not plain: the text of a special token may be left out of the delta).
The parsers that cannot take a delta of several tokens are named in `PER_TOKEN`: they
are fed every delta, as before.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# A character that may begin a marker, or that a parser may turn into something else.
_NOISY = re.compile(r"[^A-Za-z0-9 _.,;!?-]")

# vLLM's parsers (by name) that a delta passed over leaves wrong: InternLM2's tool parser
# keeps where it has read up to only when it is called, Granite's reads its markers as
# words (`Here is my response:`), which plain text holds, and Llama 3's JSON parser
# streams the difference between its last two readings, so the text it missed comes
# back again (a long argument went out twice). Fed every delta, as before (the property
# test `tests/unit/test_parser_gate.py` finds them).
PER_TOKEN: frozenset[str] = frozenset({"internlm", "granite", "llama3_json", "llama4_json"})


@dataclass(frozen=True, slots=True)
class Markers:
    """What can hold a model family's marker: any text that is not plain, and its marker
    tokens' ids. `gated` false: every delta goes to the parser (`PER_TOKEN`)."""

    ids: frozenset[int] = frozenset()
    gated: bool = True

    def quiet(self, text: str, token_ids: Sequence[int]) -> bool:
        """Whether the delta (`text`, its ids) can hold no marker: the parser may wait."""
        return (
            self.gated
            and bool(text)
            and _NOISY.search(text) is None
            and self.ids.isdisjoint(token_ids)
        )

    def __and__(self, other: Markers) -> Markers:
        """The markers of two parsers reading one delta after the other: quiet for both."""
        return Markers(self.ids | other.ids, self.gated and other.gated)


EVERY_DELTA = Markers(gated=False)


def markers_of(added: Mapping[str, int | None], parser: str) -> Markers:
    """The markers of a model whose vocabulary adds the tokens `added` (by text, with
    their ids), for vLLM's parser `parser`: the ids of the added tokens whose text is not
    plain (a plain one, such as a word the tokenizer adds, holds no marker any more than
    its text does)."""
    if parser in PER_TOKEN:
        return EVERY_DELTA
    ids = (i for token, i in added.items() if i is not None and _NOISY.search(token))
    return Markers(frozenset(ids))


def passed(text: str | None, sent: str) -> str | None:
    """`text` (what a parser gave back for the text it missed and the delta after it)
    without `sent`, its start that went out unparsed; None where it does not start so."""
    if text is None or not text.startswith(sent):
        return None
    return text[len(sent) :]
