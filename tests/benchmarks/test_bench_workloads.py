"""Workloads: exact prompt lengths under a real (tiny, trained here) tokenizer, and the chat set."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.prompts import load_tokenizer, prompt_ids
from benchmarks.workloads import CHAT_SET, Workload, WorkloadConfig, flatten, load_conversations

CHAT_TEMPLATE = (
    "{% for m in messages %}<s>{{ m.role }}: {{ m.content }}</s>{% endfor %}"
    "{% if add_generation_prompt %}<s>assistant: {% endif %}"
)


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A byte-level BPE tokenizer with a BOS token and a chat template, saved as a model dir."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(CHAT_SET.read_text(encoding="utf-8").splitlines(), trainer)
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", 0)]
    )
    fast = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>"
    )
    fast.chat_template = CHAT_TEMPLATE
    directory = tmp_path_factory.mktemp("tokenizer")
    fast.save_pretrained(directory)
    return directory


@pytest.mark.parametrize("api", ["completions", "chat"])
@pytest.mark.parametrize("length", [12, 64, 300])
def test_random_prompts_have_exactly_the_requested_length(
    tokenizer_dir: Path, api: str, length: int
) -> None:
    config = WorkloadConfig(input_len=length, output_len=5, tokenizer=str(tokenizer_dir), seed=3)
    workload = Workload(config, api)
    tokenizer = load_tokenizer(str(tokenizer_dir))
    specs = workload.requests(20)
    for spec in specs:
        assert spec.input_tokens == length
        assert len(prompt_ids(tokenizer, api, spec.prompt)) == length
        assert spec.messages == [{"role": "user", "content": spec.prompt}]
        assert spec.max_tokens == 5
        assert spec.ignore_eos
    if length >= 64:  # a few tokens of text may come out the same twice
        assert len({spec.prompt for spec in specs}) == len(specs)


def test_seed_offsets_give_other_prompts(tokenizer_dir: Path) -> None:
    workload = Workload(WorkloadConfig(input_len=32, tokenizer=str(tokenizer_dir)), "completions")
    assert workload.requests(3) == workload.requests(3)
    assert workload.requests(3) != workload.requests(3, seed_offset=1)


def test_too_short_for_the_chat_template(tokenizer_dir: Path) -> None:
    workload = Workload(WorkloadConfig(input_len=3, tokenizer=str(tokenizer_dir)), "chat")
    with pytest.raises(ValueError, match="no room"):
        workload.requests(1)


def test_without_a_tokenizer_prompts_are_words() -> None:
    spec = Workload(WorkloadConfig(input_len=50), "completions").requests(1)[0]
    assert len(spec.prompt.split()) == 50
    assert spec.input_tokens is None


def test_the_chat_set() -> None:
    conversations = load_conversations(CHAT_SET)
    assert len(conversations) >= 40
    for messages in conversations:
        assert messages[-1]["role"] == "user"
        assert {m["role"] for m in messages} <= {"system", "user", "assistant"}
    assert sum(len(m) > 1 for m in conversations) >= 20  # most are multi-turn


def test_chat_set_requests_cycle_and_carry_token_ids(tokenizer_dir: Path) -> None:
    config = WorkloadConfig(dataset="chat-set", output_len=32, tokenizer=str(tokenizer_dir))
    specs = Workload(config, "chat").requests(100)
    assert len(specs) == 100
    assert all(spec.messages and spec.input_tokens for spec in specs)
    assert len({spec.prompt for spec in specs}) == len(load_conversations(CHAT_SET))
    assert config.describe()["exact_input_len"] is False
    assert "input_len" not in config.describe()


def test_flatten() -> None:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert flatten(messages) == "System: Be brief.\nUser: Hi\nAssistant:"


def test_a_dataset_file_must_end_with_user_messages(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"messages": [{"role": "assistant", "content": "x"}]}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.jsonl:1"):
        load_conversations(path)
