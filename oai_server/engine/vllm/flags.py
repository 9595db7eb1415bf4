"""vLLM's own command-line definitions: the `vllm serve` parser, its engine arguments, and
the defaults of ours that differ from it.

Nothing here copies a vLLM flag: the parser is the one `vllm serve` builds
(`make_arg_parser`: the front end's `FrontendArgs` and `AsyncEngineArgs.add_cli_args`),
so names, types, defaults, choices and help text are vLLM's, and a vLLM upgrade brings
its new flags. vllm is imported inside the functions (seconds), never at import time.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vllm.utils.argparse_utils import FlexibleArgumentParser

# Where a default of ours differs from `vllm serve`'s, and why: shown by `--help` and the
# docs, and the only engine arguments the command-line tests allow to differ from vLLM's
# own parse (and only while the command line leaves them out).
DIFFERS_FROM_VLLM: dict[str, str] = {
    "dtype": "auto is float32 or bfloat16 for the embedded model on CPU, chosen from the "
    "CPU's features (bfloat16 answers it wrong on AMX kernels, and is emulated without "
    "AVX-512 BF16)",
    "max_model_len": "the embedded model is served with a 2048-token context",
    "enforce_eager": "on by default on CPU: graph compilation costs ~70 s at every start",
    "structured_outputs_config": "guidance with compact JSON (disable_any_whitespace): "
    "small models otherwise wander into endless whitespace, and OpenAI's JSON is compact",
    "served_model_name": "the id clients use (the model's name), so vLLM's metrics never "
    "carry the weights' path on this host",
    "enable_lora": "implied by --lora-modules, --lora-dir and --allow-runtime-lora",
    "max_loras": "on CPU one slot more, for base-model requests, where vLLM's LoRA ops "
    "cannot be fixed in the engine core",
    "max_cpu_loras": "on CPU one slot more, as --max-loras",
    "use_tqdm_on_load": "the weights' progress bar only at --log-level debug",
    "disable_log_stats": "on for every engine but the first: vLLM's metrics are the "
    "first model's, as they are with one model",
    "worker_extension_cls": "on CPU with LoRA, the extension that fixes vLLM's LoRA ops",
    "tensor_parallel_size": "not passed on CPU, where there are no GPUs to shard over",
    "gpu_memory_utilization": "not passed on CPU",
}


@dataclass(frozen=True)
class EngineArgument:
    """One of vLLM's engine arguments, as `vllm serve --help` describes it."""

    flag: str
    name: str
    group: str
    help: str
    default: Any
    choices: tuple[str, ...] | None
    differs: str | None


def _new_parser(**options: Any) -> FlexibleArgumentParser:
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    return FlexibleArgumentParser(**options)  # type: ignore[no-untyped-call]


@functools.cache
def _engine_parser() -> FlexibleArgumentParser:
    from vllm.engine.arg_utils import AsyncEngineArgs

    parser: FlexibleArgumentParser = AsyncEngineArgs.add_cli_args(_new_parser())
    return parser


def serve_parser(prog: str) -> FlexibleArgumentParser:
    """A fresh `vllm serve` parser (front end and engine), every default suppressed, so a
    parse holds only what the command line gave; later definitions replace its flags."""
    from vllm.entrypoints.launchers.cli_args import make_arg_parser

    parser: FlexibleArgumentParser = make_arg_parser(
        _new_parser(prog=prog, conflict_handler="resolve", add_help=False)
    )
    for action in parser._actions:
        action.default = argparse.SUPPRESS
        if action.dest in REPEATABLE:
            action.__class__ = _adding(type(action))
    return parser


# List flags a command line may repeat, each time adding to the list: vLLM's parser keeps
# only the last one given, which drops adapters silently from scripts that write one
# `--lora-modules` per adapter, and answers 401 to every API key but the last (both forms,
# several values after one flag and one flag per value, work here).
REPEATABLE = frozenset({"lora_modules", "api_key"})


def parse(parser: FlexibleArgumentParser, args: Sequence[str]) -> dict[str, Any]:
    """What `parser` (a `serve_parser`) reads from `args`, by destination."""
    repeatable = {
        option for action in parser._actions if action.dest in REPEATABLE
        for option in action.option_strings
    }  # fmt: skip
    with _quiet_about_repeats(repeatable):
        parsed: argparse.Namespace = parser.parse_args(list(args))
    return vars(parsed)


@contextlib.contextmanager
def _quiet_about_repeats(flags: set[str]) -> Iterator[None]:
    """Without vLLM's "Found duplicate keys" warning when it names only `flags`: their
    repeats add up here, and the warning would tell the user the earlier ones were lost."""

    def keep(record: logging.LogRecord) -> bool:
        if record.msg != "Found duplicate keys %s" or not isinstance(record.args, tuple):
            return True
        return not set(str(record.args[0]).split(", ")) <= flags

    vllm_logger = logging.getLogger("vllm.utils.argparse_utils")
    vllm_logger.addFilter(keep)
    try:
        yield
    finally:
        vllm_logger.removeFilter(keep)


def _adding(action: type[argparse.Action]) -> type[argparse.Action]:
    """`action`, adding what it parses to what earlier flags of its name gave."""

    class Adding(action):  # type: ignore[valid-type,misc]
        def __call__(
            self,
            parser: argparse.ArgumentParser,
            namespace: argparse.Namespace,
            values: Any,
            option_string: str | None = None,
        ) -> None:
            earlier = list(getattr(namespace, self.dest, None) or [])
            super().__call__(parser, namespace, values, option_string)
            setattr(namespace, self.dest, [*earlier, *(getattr(namespace, self.dest) or [])])

    return Adding


@functools.cache
def _parser_defaults() -> dict[str, Any]:
    import dataclasses

    from vllm.engine.arg_utils import AsyncEngineArgs

    parsed = vars(_engine_parser().parse_args([]))
    return {f.name: parsed[f.name] for f in dataclasses.fields(AsyncEngineArgs) if f.name in parsed}


def async_engine_args(args: dict[str, Any]) -> Any:
    """vLLM's `AsyncEngineArgs` for `args`, every other field at the default `vllm serve`'s
    parser gives it (a few differ from the dataclass's own: the engine must not see
    anything `vllm serve` would not give it)."""
    import copy

    from vllm.engine.arg_utils import AsyncEngineArgs

    return AsyncEngineArgs(**{**copy.deepcopy(_parser_defaults()), **args})


def engine_names() -> frozenset[str]:
    """The names (`AsyncEngineArgs` fields) of every engine argument vLLM's parser takes."""
    return frozenset(action.dest for action in _engine_parser()._actions if action.option_strings)


@functools.cache
def _documented_parser() -> FlexibleArgumentParser:
    """The engine parser with vLLM's help text, which vLLM reads from its config classes'
    docstrings only under `vllm ... --help` or mkdocs (`NEEDS_HELP`, read at import)."""
    from vllm.engine import arg_utils

    needs_help = arg_utils.NEEDS_HELP
    arg_utils.NEEDS_HELP = True
    arg_utils._compute_kwargs.cache_clear()
    try:
        parser: FlexibleArgumentParser = arg_utils.AsyncEngineArgs.add_cli_args(_new_parser())
    finally:
        arg_utils.NEEDS_HELP = needs_help
        arg_utils._compute_kwargs.cache_clear()
    return parser


def engine_arguments() -> list[EngineArgument]:
    """vLLM's engine arguments with their help text, by group, for `--help` and the docs'
    settings page (which lists them apart from our own `Settings`)."""
    found: list[EngineArgument] = []
    for group in _documented_parser()._action_groups:
        for action in group._group_actions:
            if not action.option_strings or action.dest == "help":
                continue
            found.append(
                EngineArgument(
                    flag=action.option_strings[0],
                    name=action.dest,
                    group=group.title or "",
                    help=str(action.help or "").replace("%%", "%"),
                    default=action.default,
                    choices=None if action.choices is None else tuple(map(str, action.choices)),
                    differs=DIFFERS_FROM_VLLM.get(action.dest),
                )
            )
    return found


def engine_help() -> str:
    """vLLM's engine arguments as `vllm serve --help=all` shows them, then our differences."""
    parser = _documented_parser()
    formatter = parser._get_formatter()
    for group in parser._action_groups:
        actions = [a for a in group._group_actions if a.option_strings and a.dest != "help"]
        if not actions:
            continue
        formatter.start_section(f"vLLM engine arguments: {group.title}")
        formatter.add_arguments(actions)
        formatter.end_section()
    lines = ["", "Defaults that differ from vllm serve:"]
    lines += [
        f"  --{name.replace('_', '-')}: differs from vllm serve because {why}"
        for name, why in DIFFERS_FROM_VLLM.items()
    ]
    return formatter.format_help() + "\n".join(lines) + "\n"


def check_engine_values(values: dict[str, Any]) -> None:
    """Refuse, in one line, a name that is none of vLLM's engine arguments."""
    unknown = sorted(set(values) - engine_names())
    if unknown:
        raise ValueError(f"not a vLLM engine argument: {', '.join(unknown)}")
