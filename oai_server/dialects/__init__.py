"""Model dialects: which family a model belongs to, told from its chat template, its
tokenizer's special tokens and its architecture, and the parsers `vllm serve` users pass
for that family (`--tool-call-parser`, `--reasoning-parser`)."""

from oai_server.dialects.detect import Dialect, ModelTraits, detect

__all__ = ["Dialect", "ModelTraits", "detect"]
