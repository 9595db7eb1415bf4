"""What to send: random prompts of a given token length, or the chat set shipped in `data/`."""

from __future__ import annotations

import json
import logging
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.prompts import ExactPromptBuilder, HFTokenizer, chat_prompt_ids, load_tokenizer

logger = logging.getLogger(__name__)

CHAT_SET = Path(__file__).parent / "data" / "chat_set.jsonl"
# Without a tokenizer, random prompts are made of these words: about one token each for most
# tokenizers.
WORDS = [
    "time",
    "year",
    "people",
    "way",
    "day",
    "man",
    "thing",
    "woman",
    "life",
    "child",
    "world",
    "school",
    "state",
    "family",
    "student",
    "group",
    "country",
    "problem",
    "hand",
    "part",
    "place",
    "case",
    "week",
    "company",
    "system",
    "program",
    "question",
    "work",
    "government",
    "number",
    "night",
    "point",
    "home",
    "water",
    "room",
    "mother",
    "area",
    "money",
    "story",
    "fact",
    "month",
    "lot",
    "right",
    "study",
    "book",
    "eye",
    "job",
    "word",
    "business",
    "issue",
]


@dataclass
class RequestSpec:
    """One request: the text for the API in use and, when a tokenizer is known, its token ids."""

    prompt: str = ""
    messages: list[dict[str, str]] = field(default_factory=list)
    prompt_token_ids: list[int] | None = None
    max_tokens: int = 128
    ignore_eos: bool = True
    temperature: float | None = 0.0

    @property
    def input_tokens(self) -> int | None:
        return None if self.prompt_token_ids is None else len(self.prompt_token_ids)


@dataclass
class WorkloadConfig:
    """The workload settings of a run, recorded with its results."""

    dataset: str = (
        "random"  # "random", "chat-set", or the path of a JSONL file of {"messages": [...]}
    )
    input_len: int = 128
    output_len: int = 128
    ignore_eos: bool = True
    temperature: float | None = 0.0
    tokenizer: str | None = None
    seed: int = 0

    def describe(self) -> dict[str, Any]:
        """The settings as recorded in a result; input_len only counts for random prompts."""
        settings = asdict(self)
        if self.dataset != "random":
            del settings["input_len"]
        settings["exact_input_len"] = self.dataset == "random" and self.tokenizer is not None
        return settings


class Workload:
    """Builds the requests of runs; the tokenizer, if any, is loaded once and reused."""

    def __init__(self, config: WorkloadConfig, api: str) -> None:
        self.config = config
        self.api = api
        self.tokenizer: HFTokenizer | None = (
            load_tokenizer(config.tokenizer) if config.tokenizer else None
        )
        self._builder: ExactPromptBuilder | None = None
        if self.tokenizer is not None and config.dataset == "random":
            self._builder = ExactPromptBuilder(self.tokenizer, api)
        if self.tokenizer is None and config.dataset == "random":
            logger.warning(
                "no --tokenizer: random prompts are words, about (not exactly) %d tokens",
                config.input_len,
            )

    def requests(self, count: int, seed_offset: int = 0) -> list[RequestSpec]:
        """`count` requests; another `seed_offset` gives other prompts (no prefix-cache hits)."""
        rng = random.Random(self.config.seed * 1_000_003 + seed_offset)
        if self.config.dataset == "random":
            return [self._random(rng) for _ in range(count)]
        conversations = load_conversations(
            CHAT_SET if self.config.dataset == "chat-set" else Path(self.config.dataset)
        )
        rng.shuffle(conversations)
        return [self._conversation(conversations[i % len(conversations)]) for i in range(count)]

    def _spec(self, **kwargs: Any) -> RequestSpec:
        return RequestSpec(
            max_tokens=self.config.output_len,
            ignore_eos=self.config.ignore_eos,
            temperature=self.config.temperature,
            **kwargs,
        )

    def _random(self, rng: random.Random) -> RequestSpec:
        if self._builder is None:
            text = " ".join(rng.choice(WORDS) for _ in range(self.config.input_len))
            ids = None
        else:
            text, ids = self._builder.build(self.config.input_len, rng)
        return self._spec(
            prompt=text, messages=[{"role": "user", "content": text}], prompt_token_ids=ids
        )

    def _conversation(self, messages: list[dict[str, str]]) -> RequestSpec:
        prompt = flatten(messages)
        ids = None
        if self.tokenizer is not None:
            if self.api == "chat":
                ids = chat_prompt_ids(self.tokenizer, messages)
            else:
                ids = self.tokenizer.encode(prompt, add_special_tokens=True)
        return self._spec(prompt=prompt, messages=messages, prompt_token_ids=ids)


def flatten(messages: list[dict[str, str]]) -> str:
    """A conversation as plain text for the completions API, ending where the assistant answers."""
    lines = [f"{m['role'].capitalize()}: {m['content']}" for m in messages]
    return "\n".join([*lines, "Assistant:"])


def load_conversations(path: Path) -> list[list[dict[str, str]]]:
    """The conversations of a JSONL file, one {"messages": [{"role", "content"}, ...]} per line."""
    conversations = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            messages = json.loads(line).get("messages")
            if not messages or messages[-1].get("role") != "user":
                raise ValueError(f"{path}:{number}: expected messages ending with a user message")
            conversations.append(messages)
    return conversations
