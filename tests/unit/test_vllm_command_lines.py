"""Real `vllm serve` command lines, run unchanged as `oai-server serve ...`: each gives the
engine the same `AsyncEngineArgs` vLLM's own parser gives it (no engine is started).

These are lines for GPUs and hub models, where only the defaults `DIFFERS_FROM_VLLM` gives
for every engine may differ (compact JSON in structured output, the weights' progress bar,
the served name), and only while the command line leaves them out: the embedded model's
and the CPU's (dtype, context length, eager mode, LoRA slots) must be vLLM's here. Each
line says where it was found; paths on the author's machine are replaced by directories
made here (our start checks that they exist).
"""

from __future__ import annotations

import dataclasses
import os
import shlex
from pathlib import Path
from typing import Any

import pytest

from oai_server.cli import parse_command_line
from oai_server.engine.vllm import args as vllm_args
from oai_server.engine.vllm.flags import DIFFERS_FROM_VLLM, async_engine_args, serve_parser
from oai_server.models.entries import model_entries

# (where it came from, the line after `vllm serve`)
LINES = [
    (
        # Quantized weights, fp8 KV cache, 8 GPUs, served under another name.
        "huggingface.co/QuixiAI/DeepSeek-R1-AWQ README (commit 007e788), without "
        "--calculate-kv-scales, which vLLM 0.32's own parser no longer takes",
        "--host 0.0.0.0 --port 12345 --max-model-len 65536 --trust-remote-code "
        "--tensor-parallel-size 8 --quantization moe_wna16 --gpu-memory-utilization 0.97 "
        "--kv-cache-dtype fp8_e5m2 --served-model-name deepseek-reasoner "
        "--model cognitivecomputations/DeepSeek-R1-AWQ",
    ),
    (
        # Speculative decoding, short -tp flag, JSON config over several lines.
        "docs.vllm.ai/projects/speculators/en/stable/user_guide/tutorials/serve_vllm/",
        """Qwen/Qwen3-8B -tp 1 --speculative-config '{
            "model": "RedHatAI/Qwen3-8B-speculator.eagle3",
            "num_speculative_tokens": 3,
            "method": "eagle3"
          }'""",
    ),
    (
        # LoRA on a local model.
        "huggingface.co/forcemultiplier/instruct-evolve-xml-gem2b-adapter run_gemma2-2b.sh",
        '{MODEL} --gpu-memory-utilization=1 --port 6002 --served-model-name="gemma" '
        "--trust-remote-code --max-model-len 8192 --enable-lora "
        "--lora-modules lora={LORA} --max-lora-rank 64",
    ),
    (
        # Multi-node tensor and pipeline parallelism.
        "mintlify.com/vllm-project/vllm/serving/distributed-serving",
        "meta-llama/Llama-405B-Instruct --tensor-parallel-size 16 --pipeline-parallel-size 1",
    ),
    (
        # Data parallelism with expert parallelism.
        "docs.vllm.ai/projects/recipes/en/latest/DeepSeek/DeepSeek-V3.html (DP8+EP)",
        "deepseek-ai/DeepSeek-R1-0528 --trust-remote-code --data-parallel-size 8 "
        "--enable-expert-parallel",
    ),
    (
        # TLS, a human-readable context length, the CPU's block size.
        "written here: the SSL flags of mintlify.com/vllm-project/vllm/configuration/serve-args",
        "Qwen/Qwen2.5-7B-Instruct --ssl-keyfile {DIR}/key.pem --ssl-certfile {DIR}/cert.pem "
        "--max-model-len 32k --enable-prefix-caching --block-size 32",
    ),
    (
        # A Mistral-format model: its tokenizer, config and weights in Mistral's layout.
        "written here: the mistral choices of vLLM's --tokenizer-mode, --config-format and "
        "--load-format, as Mistral's model cards give them",
        "mistralai/Mistral-7B-Instruct-v0.3 --tokenizer-mode mistral --config-format mistral "
        "--load-format mistral --hf-overrides '{\"max_position_embeddings\": 4096}'",
    ),
    (
        # Several adapters after one flag, in both of vLLM's forms, and dotted JSON keys.
        "written here: --lora-modules' two forms from vLLM's own help (name=path and JSON), "
        "vLLM's dotted JSON keys and -O",
        "meta-llama/Llama-3.2-3B-Instruct --enable-lora --lora-modules sql={LORA} "
        '\'{"name": "sql2", "path": "{LORA}"}\' --max-loras 2 '
        "--compilation-config.cudagraph_mode PIECEWISE -O3",
    ),
]


# Our defaults on any engine, CPU or GPU, embedded model or not.
EVERY_ENGINE = {"structured_outputs_config", "use_tqdm_on_load", "served_model_name"}


def _filled(line: str, tmp_path: Path) -> list[str]:
    model = tmp_path / "model"
    lora = tmp_path / "lora"
    for directory in (model, lora):
        directory.mkdir(exist_ok=True)
    (model / "config.json").write_text("{}")
    text = line.replace("{MODEL}", str(model)).replace("{LORA}", str(lora))
    return shlex.split(text.replace("{DIR}", str(tmp_path)))


def _vllm_engine_args(args: list[str]) -> Any:
    """What `vllm serve` itself hands its engine for `args`."""
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parsed = make_arg_parser(FlexibleArgumentParser()).parse_args(args)
    if parsed.model_tag is not None:  # as `vllm serve` does (vllm/entrypoints/cli/serve.py)
        parsed.model = parsed.model_tag
    return AsyncEngineArgs.from_cli_args(parsed)


def _our_engine_args(args: list[str]) -> Any:
    """What `oai-server serve` hands the first chat model's engine for `args` (on GPUs)."""
    from vllm.config import StructuredOutputsConfig

    settings = parse_command_line(["serve", *args]).settings
    entry = next(e for e in model_entries(settings) if e.kind == "chat")
    given = vllm_args.engine_args(entry, on_cpu=False, served_model_name=entry.name)
    if isinstance(given["structured_outputs_config"], dict):
        given["structured_outputs_config"] = StructuredOutputsConfig(
            **given["structured_outputs_config"]
        )
    return async_engine_args(given)


def _given(args: list[str]) -> set[str]:
    parsed = vars(serve_parser("vllm").parse_args(args))
    return set(parsed) | ({"model"} if "model_tag" in parsed else set())


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.upper().startswith("OAI_"):
            monkeypatch.delenv(name)


@pytest.mark.parametrize(("source", "line"), LINES, ids=[s for s, _ in LINES])
def test_vllm_serve_line_gives_the_engine_what_vllm_gives_it(
    source: str, line: str, tmp_path: Path
) -> None:
    args = _filled(line, tmp_path)
    theirs = _vllm_engine_args(args)
    ours = _our_engine_args(args)
    given = _given(args)
    differ = {}
    for field in dataclasses.fields(theirs):
        mine, vllms = getattr(ours, field.name), getattr(theirs, field.name)
        if field.name == "served_model_name" and isinstance(vllms, list):
            vllms = vllms[0]  # one name each here: ours is the name, vLLM's a list of one
        if mine != vllms:
            differ[field.name] = (mine, vllms)
    assert set(DIFFERS_FROM_VLLM) >= EVERY_ENGINE
    assert set(differ) == EVERY_ENGINE - given, f"{source}: ours, vLLM's: {differ}"


def test_a_vllm_serve_tool_calling_line_carries_over() -> None:
    line = (
        "serve Qwen/Qwen2.5-0.5B-Instruct --enable-auto-tool-choice --tool-call-parser llama3_json"
    )
    command = parse_command_line(shlex.split(line))
    assert command.settings.tool_call_parser == "llama3_json"
    assert command.settings.enable_auto_tool_choice
    assert not [n for n in command.notices if "tool" in n]


def test_a_tool_parser_plugin_registers_its_names(tmp_path: Path) -> None:
    plugin = tmp_path / "my_parser.py"
    plugin.write_text(
        "from vllm.tool_parsers import ToolParserManager\n"
        "from vllm.tool_parsers.hermes_tool_parser import Hermes2ProToolParser\n"
        "ToolParserManager.register_module('my_hermes', module=Hermes2ProToolParser)\n"
    )
    line = f"serve m --tool-parser-plugin {plugin} --tool-call-parser my_hermes"
    command = parse_command_line(shlex.split(line))
    assert command.settings.tool_call_parser == "my_hermes"


SHOUTING = """
from vllm.tool_parsers import ToolParserManager
from vllm.tool_parsers.hermes_tool_parser import Hermes2ProToolParser


class Shouting(Hermes2ProToolParser):
    def extract_tool_calls(self, model_output, request):
        info = super().extract_tool_calls(model_output, request)
        for call in info.tool_calls:
            call.function.name = call.function.name.upper()
        return info


ToolParserManager.register_module("shouting_hermes", module=Shouting)
"""


async def test_a_plugin_parser_reads_the_answers(tmp_path: Path) -> None:
    """The plugin's parser, not a built-in one, reads the model's calls: its own mark (the
    name in capitals) is on the answer."""
    from oai_server.engine.fake import FakeEngine
    from oai_server.engine.vllm.holder import VLLMTokenizer
    from tests.unit.conftest import chat_body, serve
    from tests.unit.tool_families import FAMILIES, TOOLS, family_tokenizer, pieces

    plugin = tmp_path / "shouting.py"
    plugin.write_text(SHOUTING)
    hermes = next(f for f in FAMILIES if f.parser == "hermes")
    tokenizer = family_tokenizer(hermes)
    engine = FakeEngine(
        tokens=pieces(tokenizer, hermes.one), model_tokenizer=VLLMTokenizer(tokenizer)
    )
    settings = {"tool_parser_plugin": str(plugin), "tool_call_parser": "shouting_hermes"}
    async with serve(engine, reasoning_parser="none", **settings) as client:
        reply = await client.post("/v1/chat/completions", json=chat_body(tools=TOOLS))
    assert reply.status_code == 200, reply.text
    (call,) = reply.json()["choices"][0]["message"]["tool_calls"]
    assert call["function"]["name"] == "GET_WEATHER"
