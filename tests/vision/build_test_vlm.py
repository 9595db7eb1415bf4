"""Build a small vision-language model for the tests: `build_test_vlm.py OUT_DIR`.

No vision model can be downloaded here, so one is built from a config: Idefics3 (SmolVLM's
architecture, which vLLM serves on CPU) whose language half is the embedded SmolLM2-135M
(its real weights, converted once into the oai-server cache) and whose vision half is a
small random SigLIP encoder. The processor is Idefics3's own, configured here: each image
is resized to one 64-pixel square (no tiling), 16 patches, 4 image tokens after the
pixel shuffle. The directory it writes is served as any model: `--model OUT_DIR`.

Random vision weights see an image but do not understand it: a test may expect that the
same bytes give the same greedy answer and different pixels a different one, not that
the answer describes the picture.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

IMAGE_SIZE = 64  # pixels, each side: the only size the vision encoder sees
PATCH_SIZE = 16
SCALE_FACTOR = 2  # Idefics3's pixel shuffle: 2x2 patches become one token
IMAGE_SEQ_LEN = (IMAGE_SIZE // PATCH_SIZE) ** 2 // SCALE_FACTOR**2  # image tokens per image
SEED = 1234

# ChatML, as SmolLM2 was trained on, with an `<image>` where a content part is an image;
# a string `content` (text-only turns) renders as the text model's own template does.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' or part['type'] == 'image_url' %}<image>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

IMAGE_TOKENS = [
    "<fake_token_around_image>",
    "<image>",
    "<end_of_utterance>",
    "<global-img>",
    *(f"<row_{i}_col_{j}>" for i in range(1, 7) for j in range(1, 7)),
]


def build(out_dir: Path, text_model_dir: Path) -> None:
    """Write the model, its tokenizer and its processor into `out_dir`."""
    import torch
    from transformers import (
        AutoTokenizer,
        Idefics3Config,
        Idefics3ForConditionalGeneration,
        Idefics3ImageProcessorPil,
        Idefics3Processor,
        LlamaConfig,
        LlamaForCausalLM,
    )

    torch.manual_seed(SEED)
    tokenizer = AutoTokenizer.from_pretrained(text_model_dir)
    tokenizer.add_special_tokens({"additional_special_tokens": IMAGE_TOKENS})
    text = LlamaForCausalLM.from_pretrained(text_model_dir, dtype=torch.float32)
    text_config = LlamaConfig.from_pretrained(text_model_dir)
    text_config.vocab_size = len(tokenizer)
    vision_config = {
        "model_type": "idefics3_vision",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "image_size": IMAGE_SIZE,
        "patch_size": PATCH_SIZE,
        "num_channels": 3,
    }
    config = Idefics3Config(
        vision_config=vision_config,
        text_config=text_config.to_dict(),
        scale_factor=SCALE_FACTOR,
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        tie_word_embeddings=text_config.tie_word_embeddings,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Idefics3ForConditionalGeneration(config)
    # The language half: SmolLM2's weights; the rows of the added tokens stay random.
    text.resize_token_embeddings(len(tokenizer))
    missing, unexpected = model.model.text_model.load_state_dict(
        text.model.state_dict(), strict=False
    )
    if missing or unexpected:
        raise RuntimeError(f"text weights do not fit: {missing} {unexpected}")
    model.lm_head.weight.data.copy_(text.lm_head.weight.data)
    with torch.no_grad():
        # Image embeddings on the scale of the text's, so an image shifts the answer
        # without drowning the text.
        scale = text.model.embed_tokens.weight.std() / 0.02
        model.model.connector.modality_projection.proj.weight.mul_(scale)
    model.to(torch.bfloat16).save_pretrained(out_dir)

    image_processor = Idefics3ImageProcessorPil(
        do_image_splitting=False,
        size={"longest_edge": IMAGE_SIZE},
        max_image_size={"longest_edge": IMAGE_SIZE},
        image_mean=[0.5, 0.5, 0.5],
        image_std=[0.5, 0.5, 0.5],
    )
    processor = Idefics3Processor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        image_seq_len=IMAGE_SEQ_LEN,
        chat_template=CHAT_TEMPLATE,
    )
    processor.save_pretrained(out_dir)
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(out_dir)
    (out_dir / "chat_template.jinja").write_text(CHAT_TEMPLATE)
    generation = {"bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id}
    (out_dir / "generation_config.json").write_text(json.dumps(generation, indent=2))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="where the embedded text model is converted (the server's default cache)",
    )
    args = parser.parse_args(argv)
    from oai_server.models.embedded_model import ensure_embedded_model
    from oai_server.settings import Settings

    cache_dir = args.cache_dir or Settings.model_fields["cache_dir"].default
    text_model_dir = ensure_embedded_model(cache_dir, "float32")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    build(args.out_dir, text_model_dir)
    return 0


if __name__ == "__main__":
    # Run as a script from anywhere: the repository's packages are importable.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    sys.exit(main())
