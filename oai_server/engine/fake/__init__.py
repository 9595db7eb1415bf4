"""The fakes: engines with the interface of the vLLM adapter's, scripted, for tests and for
the benchmarks that measure the web layer alone (zero-cost tokens)."""

from oai_server.engine.fake.engine import FakeEngine, FakeTokenizer
from oai_server.engine.fake.pooling import FakeEmbeddingEngine

__all__ = ["FakeEmbeddingEngine", "FakeEngine", "FakeTokenizer"]
