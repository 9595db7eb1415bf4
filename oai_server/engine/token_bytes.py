"""The most bytes of text one token stands for: what bounds a prompt's tokens untokenized.

A tokenizer that loses no text (its tokens spell the text out again, as byte-level BPE and
SentencePiece do) spends at least one token per `longest` bytes of it, `longest` being the
most bytes any one token of its vocabulary stands for (`oai_server.generation.prompt_bound`
refuses an oversized prompt by that bound). A tokenizer that drops or folds text
(lower-casing, accents stripped, whitespace dropped: BERT's WordPiece) gets no figure.

Worked out once per model as its engine starts, before it says it is ready: about a
second for 50,000 ids (a few on a loaded machine). Worked out on a first long prompt
instead, every prompt of megabytes in the seconds after a start was tokenized in full
(2.0-2.6 s each to refuse, four at once 6.6-10.9 s), a window an attacker can aim at.
"""

from __future__ import annotations

from oai_server.engine.protocol import Tokenizer

# Text a lossless tokenizer gives back unchanged: runs of spaces, tabs and newlines, a
# control character, capitals, punctuation that decoders "clean up" (" ." -> "."),
# decomposed and compatibility characters (NFC / NFKC fold them), a zero-width space
# and characters outside the BMP.
_PROBE = (
    "Mixed CASE  text,\tthen  spaces   and\n\nnewlines . , ! ? 's n't \x01 "
    "e\u0301 \ufb01 \uff21 \u200b \U0001f600 \u4e2d\u6587 caf\u00e9  "
)


def longest_token_bytes(tokenizer: Tokenizer, vocab_size: int) -> int | None:
    """The most UTF-8 bytes of text one token of `tokenizer` stands for; None when the
    tokenizer does not give its text back unchanged (no bound holds for it).

    Each id is decoded alone: a byte-level token holding part of a character decodes to
    U+FFFD, three bytes for at most three, so the figure errs only upwards. One more byte
    covers the space that SentencePiece decoders drop from a token that starts a text.
    Blocking (seconds): an engine calls it in the thread it starts in.
    """
    if tokenizer.decode(tokenizer.encode(_PROBE, add_special_tokens=False)) != _PROBE:
        return None
    return 1 + max(_decoded_bytes(tokenizer, i) for i in range(vocab_size))


def _decoded_bytes(tokenizer: Tokenizer, token_id: int) -> int:
    try:
        return len(tokenizer.decode([token_id]).encode("utf-8", "surrogatepass"))
    except (ValueError, OverflowError):
        # An id the tokenizer cannot even decode is one it never encodes text into.
        return 0
