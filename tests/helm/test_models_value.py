"""Several models from the chart: `models` becomes the server's --models-file, mounted from
a ConfigMap, which the server reads as it reads any models file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import helm_python
import pytest
import yaml

from oai_server.models.entries import model_entries
from oai_server.settings import Settings
from tests.helm.chart import container, env, one, render

MODELS: list[dict[str, Any]] = [
    {"name": "qwen", "model": "Qwen/Qwen2.5-1.5B-Instruct", "max_model_len": 8192},
    {"name": "smol", "cpu_kvcache_space": 1},
    {"name": "all-minilm-l6-v2", "kind": "embedding"},
]


def test_models_reach_the_server_as_its_models_file(
    chart: helm_python.Chart, tmp_path: Path
) -> None:
    manifests = render(chart, {"models": MODELS})
    path = env(manifests)["OAI_MODELS_FILE"]["value"]
    mounts = {m["name"]: m for m in container(manifests)["volumeMounts"]}
    assert Path(path).parent == Path(mounts["models-file"]["mountPath"])
    text = one(manifests, "ConfigMap")["data"][Path(path).name]
    # What the server reads there: the same models, with their own settings.
    written = tmp_path / "models.yaml"
    written.write_text(text)
    entries = model_entries(Settings(models_file=written))
    assert [(e.name, e.kind, e.model) for e in entries] == [
        ("qwen", "chat", "Qwen/Qwen2.5-1.5B-Instruct"),
        ("smol", "chat", None),
        ("all-minilm-l6-v2", "embedding", None),
    ]
    assert (entries[0].max_model_len, entries[1].cpu_kvcache_space) == (8192, 1)
    assert yaml.safe_load(text) == {"models": MODELS}


def test_no_models_value_no_models_file(chart: helm_python.Chart) -> None:
    manifests = render(chart, {})
    assert "OAI_MODELS_FILE" not in env(manifests)
    assert not [m for m in manifests if m["kind"] == "ConfigMap"]


@pytest.mark.parametrize(
    ("models", "named"),
    [
        ([{"name": "a", "max_len": 10}], "max_len"),
        ([{"model": "org/a"}], "name"),
        ([{"name": "a", "kind": "vision"}], "/models/0/kind"),
    ],
)
def test_a_wrong_model_entry_fails_at_install(
    chart: helm_python.Chart, models: list[dict[str, Any]], named: str
) -> None:
    with pytest.raises(helm_python.HelmValuesError, match="schema") as caught:
        render(chart, {"models": models})
    assert named in str(caught.value)
