"""Whether a model speaks harmony, and how its chat requests are served if it does.

`vllm serve` serves gpt-oss (`model_type: gpt_oss`) through harmony whatever the chat
template says: the prompt is rendered with harmony's messages, the answer read by the
harmony parser (both through the engine's `Tokenizer.harmony_parsing`). The family is
recognised as every other is (`oai_server.dialects.detect`: `<|channel|>` in the template
or tokens, or the `GptOss` architecture). The parsers are
vLLM's gpt-oss pair, `openai_gptoss` for the thinking and `openai` for the calls, each
left out where the server was started with `none` for it, as `vllm serve` without that
flag leaves it out.
"""

from __future__ import annotations

from dataclasses import dataclass

from oai_server.dialects.detect import Dialect
from oai_server.dialects.harmony.stage import HarmonyStage
from oai_server.dialects.tool_calls.plan import forces_call, offered, template_tool
from oai_server.engine.parsing import HarmonyParsing, HarmonyPrompt
from oai_server.engine.protocol import Tokenizer
from oai_server.errors import UnsupportedParameterError
from schemas.chat import AllowedToolChoice, ChatCompletionCustomTool, CreateChatCompletionRequest

FAMILY = "gpt-oss"
NONE = "none"


@dataclass(frozen=True)
class HarmonyRequest:
    """A chat request rendered with harmony: its prompt, and how its choices are read."""

    prompt: HarmonyPrompt
    parsing: HarmonyParsing
    parallel: bool
    # Whether the thinking is read (and counted in `reasoning_tokens`), and the calls.
    reasoning: bool
    tools: bool

    @property
    def prompt_token_ids(self) -> list[int]:
        return self.prompt.token_ids

    @property
    def prompt_text(self) -> str:
        """The rendered prompt, special tokens written out (what the response cache's key
        hashes)."""
        return self.prompt.text

    def make(self, whole: bool) -> HarmonyStage:
        """The harmony stage of one choice (`whole`: of an answer not streamed)."""
        parser = self.parsing.new(self.prompt, reasoning=self.reasoning, tools=self.tools)
        return HarmonyStage(parser, self.prompt.request, whole=whole, parallel=self.parallel)


@dataclass(frozen=True)
class Harmony:
    """A harmony model's parsers: thinking (`reasoning`) and calls (`tools`) read or not."""

    parsing: HarmonyParsing
    reasoning: bool = True
    tools: bool = True

    def describe(self) -> str:
        """For the ready line: `harmony: reasoning openai_gptoss, tool calls openai (gpt-oss)`."""
        reasoning = "openai_gptoss" if self.reasoning else NONE
        tools = "openai" if self.tools else NONE
        return f"harmony: reasoning {reasoning}, tool calls {tools} ({FAMILY})"

    def render(self, req: CreateChatCompletionRequest) -> HarmonyRequest:
        """`req` rendered as `vllm serve` renders it for gpt-oss; raises a 400 for what it
        refuses."""
        _refuse_constraints(req)
        body = req.model_dump(mode="json", exclude_none=True)
        if isinstance(req.tool_choice, AllowedToolChoice):  # `auto` among some of the tools
            allowed = offered(req.tools or [], req.tool_choice)
            body.update(tools=[template_tool(t) for t in allowed], tool_choice="auto")
        return HarmonyRequest(
            self.parsing.render(body),
            self.parsing,
            req.parallel_tool_calls is not False,
            self.reasoning,
            self.tools,
        )


def _refuse_constraints(req: CreateChatCompletionRequest) -> None:
    """Refuse what would constrain decoding: a grammar over the whole output would keep
    the model from writing harmony's channels (`vllm serve` builds a structural tag
    around them, which this server does not)."""
    if forces_call(req.tool_choice):
        raise UnsupportedParameterError(
            "tool_choice 'required' or a named function is not supported for gpt-oss "
            "(harmony) models; use 'auto'.",
            param="tool_choice",
        )
    custom = next(
        (i for i, t in enumerate(req.tools or ()) if isinstance(t, ChatCompletionCustomTool)), None
    )
    if custom is not None:
        # Harmony's parser reads function calls only: a custom call would come back as one.
        raise UnsupportedParameterError(
            "Custom tools are not supported for gpt-oss (harmony) models.",
            param=f"tools[{custom}]",
        )
    if req.response_format is not None and req.response_format.type != "text":
        raise UnsupportedParameterError(
            f"response_format '{req.response_format.type}' is not supported for gpt-oss "
            "(harmony) models.",
            param="response_format",
        )


def harmony_of(
    dialect: Dialect | None,
    tokenizer: Tokenizer,
    reasoning_parser: str = "auto",
    tool_call_parser: str = "auto",
) -> Harmony | None:
    """The harmony of the model of `dialect`, if it is gpt-oss; `reasoning_parser` and
    `tool_call_parser` are the server's settings for it (`none` leaves that part out)."""
    if dialect is None or dialect.family != FAMILY:
        return None
    return Harmony(tokenizer.harmony_parsing(), reasoning_parser != NONE, tool_call_parser != NONE)
