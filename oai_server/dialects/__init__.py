"""Model dialects: which family a model belongs to, told from its chat template, its
tokenizer's special tokens and its architecture (`detect`), and the parsers `vllm serve`
users pass for that family (`--tool-call-parser`, `--reasoning-parser`). `model` resolves
each served model's `ModelDialect` once, from one detection."""

from oai_server.dialects.detect import Dialect, ModelTraits, detect

__all__ = ["Dialect", "ModelTraits", "detect"]
