"""Build a small cross-encoder for the tests: `build_test_reranker.py OUT_DIR`.

No reranker ships in a package here, so one is built from a config: a two-layer
`BertForSequenceClassification` with one label (a cross-encoder, as the ms-marco and
bge-reranker families are) and random weights, on the tokenizer of the embedded embedding
model (all-MiniLM-L6-v2's, BERT's uncased WordPiece, which pairs two texts as
`[CLS] a [SEP] b [SEP]` with token type ids). The directory it writes is served as vLLM's
pooling runner serves any cross-encoder: its score of a pair is the sigmoid of the logit.

Random weights score pairs, but not by relevance: a test may expect the same scores as
`vllm serve` gives on the same directory, not that a relevant document ranks first.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

SEED = 1234
# Small and quick on two cores; the embedded embedding model's 384 and 12 heads.
HIDDEN, LAYERS, HEADS, INTERMEDIATE = 384, 2, 12, 1536
MAX_POSITIONS = 512
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
)


def build(out_dir: Path, tokenizer_dir: Path) -> None:
    """Write the model and its tokenizer into `out_dir`."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(SEED)
    config = BertConfig(
        vocab_size=30522,
        hidden_size=HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        intermediate_size=INTERMEDIATE,
        max_position_embeddings=MAX_POSITIONS,
        type_vocab_size=2,
        num_labels=1,  # type: ignore[call-arg]  # a PretrainedConfig keyword
        id2label={0: "LABEL_0"},
        label2id={"LABEL_0": 0},
        architectures=["BertForSequenceClassification"],
    )
    model = BertForSequenceClassification(config)  # type: ignore[no-untyped-call]
    with torch.no_grad():
        # Random token type embeddings far enough apart that which text is the query
        # changes the score (a test of the pair's encoding can then fail).
        model.bert.embeddings.token_type_embeddings.weight.normal_(0.0, 0.5)
    model.save_pretrained(out_dir)  # float32: a fresh model is
    for name in TOKENIZER_FILES:
        shutil.copy(tokenizer_dir / name, out_dir / name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    args = parser.parse_args(argv)
    from oai_server.models.embedded_embedding import locate_embedding_model

    args.out_dir.mkdir(parents=True, exist_ok=True)
    build(args.out_dir, locate_embedding_model())
    return 0


if __name__ == "__main__":
    # Run as a script from anywhere: the repository's packages are importable.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    sys.exit(main())
