"""The quality benchmark's questions, scoring and configurations."""

from __future__ import annotations

import argparse

import pytest

from benchmarks.quality import DEFAULT_CONFIGS, Config, Fact, load_facts


def test_the_vendored_facts_are_many_and_distinct() -> None:
    facts = load_facts()

    assert len(facts) >= 30
    assert len({f.id for f in facts}) == len({f.question for f in facts}) == len(facts)
    assert all(f.answers for f in facts)


def test_an_answer_scores_as_a_whole_word_in_any_case() -> None:
    fact = Fact("f", "How many legs does a spider have?", ("eight", "8"))

    assert fact.is_answered_by("A spider has EIGHT legs.")
    assert fact.is_answered_by("8 legs")
    assert not fact.is_answered_by("It has 18 legs, or eighteen.")
    assert not fact.is_answered_by("L'Étoile, la Marseillaise, la femme, la femme au martyre")


def test_a_configuration_takes_environment_variables_and_flags() -> None:
    config = Config.parse("bf16-avx2=ONEDNN_MAX_CPU_ISA=AVX2 --dtype=bfloat16 --no-cpu-preload")

    assert config.label == "bf16-avx2"
    assert config.env == (("ONEDNN_MAX_CPU_ISA", "AVX2"),)
    assert config.flags == ("--dtype=bfloat16", "--no-cpu-preload")
    assert config.describe() == "ONEDNN_MAX_CPU_ISA=AVX2 --dtype=bfloat16 --no-cpu-preload"
    assert {Config.parse(spec).label for spec in DEFAULT_CONFIGS} >= {"bf16", "fp32"}
    with pytest.raises(argparse.ArgumentTypeError):
        Config.parse("--dtype=float32")
