"""How many tokens a text has at least, known without tokenizing it.

A prompt that cannot fit the context is refused; tokenizing all of it first would cost
seconds for a prompt of megabytes (the body limit allows 4 MiB), to learn only that it is
too long. The bound here is exact, not an estimate: a text of B bytes has at least
ceil(B / longest) tokens, `longest` being the most bytes one token of the model's
vocabulary stands for (`ModelInfo.longest_token_bytes`, worked out as its engine starts:
`oai_server.engine.token_bytes`). A tokenizer that drops or folds text gets no bound (0):
its prompts are tokenized in full, off the event loop.
"""

from __future__ import annotations


def tokens_at_least(text: str, longest: int | None, limit: int) -> int:
    """A lower bound on the tokens of `text`, to compare with `limit` tokens, for a model
    whose longest token is `longest` bytes (None: no bound, 0).

    A text too short to reach `limit` at four bytes a character gets 0 at once, so only
    prompts long enough to be refused by the bound are encoded to UTF-8 to count.
    """
    if longest is None or 4 * len(text) < limit:
        return 0
    return -(-len(text.encode("utf-8", "surrogatepass")) // longest)
