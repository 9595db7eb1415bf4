"""The command line: a `vllm serve` command line, unchanged, and our own flags beside it.

`oai-server key-id KEY...` prints the id the server names each API key by.

`oai-server serve MODEL [flags]` (or `oai-server [flags]`) takes every flag `vllm serve`
takes, parsed by vLLM's own parser (`engine/vllm/flags.py`), and every flag of
`Settings`, parsed by pydantic-settings. What vLLM's parser read then lands in one of
three places:

- a setting of ours with the same meaning (`--max-model-len`, `--host`, `--ssl-keyfile`,
  `--allowed-origins` as `cors_allow_origins`, `--served-model-name a b` as a name and its
  aliases, `--lora-modules` in either of vLLM's forms as name=path, ...);
- `vllm_args`, every other engine argument by its name, handed to the engine as vLLM's
  parser produced it (`--quantization`, `--kv-cache-dtype`, `--speculative-config`, ...);
- a one-line notice, for a front-end flag that has no meaning here (`--headless`, ...).

A command line of our own flags only never imports vllm (that takes seconds).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic_settings import CliApp

from oai_server.auth.keys import key_id
from oai_server.engine.settings import EngineOptions
from oai_server.secret import ServerSecret
from oai_server.settings import Settings

logger = logging.getLogger(__name__)

PROG = "oai-server"

# vLLM's front-end flags whose meaning is one of our settings under another name.
FRONTEND_ONTO_OURS = {
    "allowed_origins": "cors_allow_origins",
    "allowed_methods": "cors_allow_methods",
    "allowed_headers": "cors_allow_headers",
    "allow_credentials": "cors_allow_credentials",
    # vLLM logs each request's prompt and parameters; ours puts prompts in the access log.
    "enable_log_requests": "log_request_text",
}
# Engine arguments that only serve vLLM's own tracing, which is not on here (ours is: the
# engine span's timings come from vLLM's request stats): a notice, never the engine's.
_VLLM_TRACING = {
    "collect_detailed_traces": "--collect-detailed-traces is vLLM's own tracing, not used by "
    "oai-server (--otlp-traces-endpoint traces every request with the engine's timings): "
    "ignored",
}
# vLLM's front-end flags that mean nothing here, by the value that asks for what this
# server always does (no notice then), and why any other value is not taken.
_IGNORED_UNLESS = {
    "response_role": (
        "assistant",
        "answers' role stays assistant, the only one OpenAI's schema and SDKs accept",
    ),
}
# Read by our own code from vLLM's parse, not by name: the shapes differ.
_SHAPED = frozenset({"model_tag", "served_model_name", "lora_modules"})
# Settings whose flags take several shapes under vLLM (nargs), or are vLLM's engine
# arguments: a command line with one of them goes through vLLM's parser.
_VLLM_SHAPED = frozenset(EngineOptions.model_fields) | {"served_model_name"}


@dataclass
class CommandLine:
    """What a command line asked for: the settings, and notices to log once logging is up."""

    settings: Settings
    notices: list[str] = field(default_factory=list)


class _KeepTokens(argparse.Action):
    """Keeps one of our own flags as it was written, for pydantic-settings to parse."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        kept: list[str] = getattr(namespace, "oai_tokens", [])
        given = [] if values is None else [values] if isinstance(values, str) else list(values)
        namespace.oai_tokens = [*kept, str(option_string), *map(str, given)]


def parse_command_line(argv: Sequence[str]) -> CommandLine:
    """Settings from `argv` (a `vllm serve` command line, ours, or both mixed)."""
    args = list(argv)
    if args[:1] == ["serve"]:
        args = args[1:]
    if any(arg in ("-h", "--help") or arg.startswith("--help=") for arg in args):
        print_help()
        raise SystemExit(0)
    if _ours_only(args):
        return CommandLine(CliApp.run(Settings, cli_args=args))
    return _parse_with_vllm(args)


def _bool_field(name: str) -> bool:
    return Settings.model_fields[name].annotation in (bool, "bool")


def _ours_only(args: list[str]) -> bool:
    """Whether every flag is ours alone, one value each: then vLLM's parser is not needed."""
    ours = set(Settings.model_fields) - _VLLM_SHAPED
    i = 0
    while i < len(args):
        token = args[i]
        if not token.startswith("--"):
            return False
        name = token[2:].partition("=")[0].replace("-", "_")
        if name.startswith("no_") and name[3:] in ours and _bool_field(name[3:]):
            name = name[3:]
        if name not in ours:
            return False
        i += 1 if "=" in token or _bool_field(name) else 2
    return True


def _parse_with_vllm(args: list[str]) -> CommandLine:
    from oai_server.engine.vllm import flags as vllm_flags

    parser = vllm_flags.serve_parser(PROG)
    vllm_names = {action.dest for action in parser._actions}
    group = parser.add_argument_group("oai-server")  # type: ignore[no-untyped-call]
    for name in Settings.model_fields:
        if name in vllm_names and name != "model":
            continue  # vLLM's flag, read by vLLM's parser and mapped below
        flag = "--" + name.replace("_", "-")
        if _bool_field(name):
            group.add_argument(
                flag, "--no-" + flag[2:], action=_KeepTokens, nargs=0, default=argparse.SUPPRESS
            )
        else:
            group.add_argument(flag, action=_KeepTokens, default=argparse.SUPPRESS)
    # Gone from vLLM 0.32's parser, still in many scripts: request logging off.
    group.add_argument(
        "--disable-log-requests",
        dest="enable_log_requests",
        action="store_false",
        default=argparse.SUPPRESS,
    )
    parsed = vars(parser.parse_args(args))
    tokens: list[str] = parsed.pop("oai_tokens", [])
    engine_names = vllm_flags.engine_names()
    given: dict[str, Any] = {}
    engine: dict[str, Any] = {}
    notices: list[str] = []
    for name, value in parsed.items():
        if name in _SHAPED:
            continue
        if name in _VLLM_TRACING:
            notices.append(_VLLM_TRACING[name])
        elif name in FRONTEND_ONTO_OURS:
            given[FRONTEND_ONTO_OURS[name]] = value
        elif name in Settings.model_fields:
            given[name] = value
        elif name in engine_names:
            engine[name] = value
        elif name in _IGNORED_UNLESS:
            same, why = _IGNORED_UNLESS[name]
            if value != same:
                flag = "--" + name.replace("_", "-")
                notices.append(f"{flag} {value} is not used by oai-server: {why}")
        else:
            flag = "--" + name.replace("_", "-")
            notices.append(f"{flag} is not used by oai-server: ignored")
    if "model_tag" in parsed:
        tokens = ["--model", parsed["model_tag"], *tokens]
    if "served_model_name" in parsed:
        names = parsed["served_model_name"]
        given["served_model_name"] = [names] if isinstance(names, str) else list(names)
    if "lora_modules" in parsed:
        given["lora_modules"] = [f"{m.name}={m.path}" for m in parsed["lora_modules"] or []]
    if engine:
        given["vllm_args"] = engine
    return CommandLine(CliApp.run(Settings, cli_args=tokens, **given), notices)


def print_help() -> None:
    """Our settings' help, then vLLM's engine arguments and where our defaults differ."""
    with contextlib.suppress(SystemExit):  # pydantic-settings exits after its help
        CliApp.run(Settings, cli_args=["--help"])
    from oai_server.engine.vllm import flags as vllm_flags

    sys.stdout.write(
        "\nEvery flag of `vllm serve` is taken as well; its engine arguments:\n\n"
        + vllm_flags.engine_help()
    )


def print_key_ids(argv: Sequence[str]) -> None:
    """`oai-server key-id KEY...`: the id this deployment names each key by (in logs,
    metrics, the Usage API and `--service-tier-priority-keys`), under its secret."""
    parser = argparse.ArgumentParser(prog=f"{PROG} key-id", description=print_key_ids.__doc__)
    parser.add_argument("key", nargs="+", help="an API key")
    parser.add_argument("--secret-key", help="the server's --secret-key (else OAI_SECRET_KEY)")
    parser.add_argument(
        "--data-dir",
        type=Path,
        help="the server's --data-dir, which keeps "
        "its generated secret (else OAI_DATA_DIR, else the default)",
    )
    args = parser.parse_args(list(argv))
    settings = Settings()
    secret = ServerSecret.load(
        args.secret_key or settings.secret_key, args.data_dir or settings.data_dir
    )
    for key in args.key:
        print(key_id(key, secret))
