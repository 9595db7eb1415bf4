"""How many tokens a text has at least, known without tokenizing it.

A prompt that cannot fit the context is refused; tokenizing all of it first would cost
seconds for a prompt of megabytes (the body limit allows 4 MiB), to learn only that it is
too long. The bound here is exact, not an estimate: a tokenizer that loses no text (its
tokens spell the text out again, as byte-level BPE and SentencePiece do) spends at least
one token per `longest` bytes of it, `longest` being the most bytes any one token of its
vocabulary stands for. So a text of B bytes has at least ceil(B / longest) tokens.

A tokenizer that drops or folds text (lower-casing, accents stripped, whitespace dropped:
BERT's WordPiece) gets no bound (0): its prompts are tokenized in full, off the event loop.
"""

from __future__ import annotations

import threading
import weakref

from oai_server.engine.protocol import Tokenizer
from oai_server.generation.offload import in_pool

# Text a lossless tokenizer gives back unchanged: runs of spaces, tabs and newlines, a
# control character, capitals, punctuation that decoders "clean up" (" ." -> "."),
# decomposed and compatibility characters (NFC / NFKC fold them), a zero-width space
# and characters outside the BMP.
_PROBE = (
    "Mixed CASE  text,\tthen  spaces   and\n\nnewlines . , ! ? 's n't \x01 "
    "e\u0301 \ufb01 \uff21 \u200b \U0001f600 \u4e2d\u6587 caf\u00e9  "
)

_longest: weakref.WeakKeyDictionary[Tokenizer, int | None] = weakref.WeakKeyDictionary()
_lock = threading.Lock()
# Tokenizers whose longest token is being worked out in the pool; a lock of its own, as
# `_lock` is held for the seconds of that work and this one is taken on the event loop.
_pending: weakref.WeakSet[Tokenizer] = weakref.WeakSet()
_pending_lock = threading.Lock()


def longest_token_bytes(tokenizer: Tokenizer, vocab_size: int) -> int | None:
    """The most UTF-8 bytes of text one token of `tokenizer` stands for; None when the
    tokenizer does not give its text back unchanged (no bound holds for it).

    Each id is decoded alone: a byte-level token holding part of a character decodes to
    U+FFFD, three bytes for at most three, so the figure errs only upwards. One more byte
    covers the space that SentencePiece decoders drop from a token that starts a text.
    Worked out once per tokenizer: about a second for 50,000 ids (a few seconds on a
    loaded machine), so never on the event loop (`tokens_at_least` has it worked out in
    the prompt pool).
    """
    with _lock:
        if tokenizer in _longest:
            return _longest[tokenizer]
        longest: int | None = None
        if tokenizer.decode(tokenizer.encode(_PROBE, add_special_tokens=False)) == _PROBE:
            longest = 1 + max(_decoded_bytes(tokenizer, i) for i in range(vocab_size))
        _longest[tokenizer] = longest
        return longest


def _work_out(tokenizer: Tokenizer, vocab_size: int) -> None:
    """Have the pool work out `tokenizer`'s longest token, once."""
    with _pending_lock:
        if tokenizer in _pending:
            return
        _pending.add(tokenizer)
    in_pool(longest_token_bytes, tokenizer, vocab_size)


def _decoded_bytes(tokenizer: Tokenizer, token_id: int) -> int:
    try:
        return len(tokenizer.decode([token_id]).encode("utf-8", "surrogatepass"))
    except (ValueError, OverflowError):
        # An id the tokenizer cannot even decode is one it never encodes text into.
        return 0


def tokens_at_least(text: str, tokenizer: Tokenizer, vocab_size: int, limit: int) -> int:
    """A lower bound on `len(tokenizer.encode(text))`, to compare with `limit` tokens.

    A text too short to reach `limit` at four bytes a character gets 0 at once, so the
    vocabulary is read only for prompts long enough to be refused by the bound. Until the
    tokenizer's longest token is known (worked out in the pool on its first long prompt,
    which is tokenized in full meanwhile), the bound is 0 too.
    """
    if 4 * len(text) < limit:
        return 0
    longest = _longest.get(tokenizer, 0)
    if longest == 0:
        _work_out(tokenizer, vocab_size)
    if not longest:
        return 0
    return -(-len(text.encode("utf-8", "surrogatepass")) // longest)
