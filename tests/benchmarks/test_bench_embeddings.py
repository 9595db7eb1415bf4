"""`python -m benchmarks embeddings`: the figures of each round become ratios in turns."""

from __future__ import annotations

from typing import Any

from benchmarks.embeddings import _report, ratios, spread


def test_each_rounds_ratio_is_reported_as_median_and_range() -> None:
    assert ratios([110, 90, 100], [100, 100, 100]) == [0.9, 1.0, 1.1]
    assert spread([1.1, 0.9, 1.0]) == "1.00x (0.90-1.10)"
    assert spread([0.8, 1.2]) == "1.00x (0.80-1.20)"


def test_the_report_has_a_row_per_batch_and_the_chat_costs() -> None:
    def side(inputs: list[float]) -> dict[str, list[float]]:
        return {
            "inputs_per_s": inputs,
            "tokens_per_s": [30 * i for i in inputs],
            "front_cpu_s_per_1k": [0.5, 0.5],
            "engine_cpu_s_per_1k": [10.0, 12.0],
        }

    results: dict[str, Any] = {
        "ours batch 256": side([95, 105]),
        "vllm batch 256": side([100, 100]),
        **{label: {"start_s": 30.0, "pss_mib": 1000.0} for label in ("ours", "vllm")},
        "ours, chat only": {"start_s": 20.0, "pss_mib": 800.0},
        "chat rounds": {
            "alone": [100.0, 100.0],
            "idle": [99.0, 97.0],
            "idle_cpu_pct": [1.0, 1.0],
            "busy": [60.0, 50.0],
        },
    }
    text = "\n".join(_report(results, [256]))
    assert "| 256 | 100 | 100 | 3000 | 3000 | 1.00x (0.95-1.05) | 0.50 + 11.00 |" in text
    assert "beside the idle embedding engine 98 (0.98x (0.97-0.99)" in text
    assert "beside the busy one 55 (0.55x (0.50-0.60))" in text
