"""The cache key: a prompt hashed as its text or as its ids, never confused."""

from __future__ import annotations

import struct

from oai_server.cache.key import cache_key


def test_a_text_prompt_and_ids_of_the_same_bytes_have_different_keys() -> None:
    ids = [104, 105]
    as_text = struct.pack("=2q", *ids).decode("latin-1")  # the very bytes the ids pack to
    assert cache_key("chat", None, [ids], {}) != cache_key("chat", None, [as_text], {})


def test_text_prompts_key_by_their_whole_text_and_order() -> None:
    keys = {
        cache_key("chat", None, prompts, {})
        for prompts in (["ab"], ["a", "b"], ["b", "a"], ["ab\ud800"], ["ab "])
    }
    assert len(keys) == 5
    assert cache_key("chat", None, ["ab"], {}) == cache_key("chat", None, ["ab"], {})
