"""Show the tools to a model whose chat template does not.

Many chat templates (the embedded SmolLM2's among them) ignore `tools`: the model would
be asked to call functions it was never shown, in a format it was never told. For such
templates the tools, and for `tool_choice: "auto"` the `<tool_call>` format the Hermes
parser reads, go into the system message, in the words Hermes-style templates use
(as vLLM's and other servers' tool prompts for such models do).
"""

from __future__ import annotations

import json
from typing import Any

_TOOLS = (
    "# Tools\n\n"
    "You may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n"
    "<tools>\n{tools}\n</tools>"
)
_CALL_FORMAT = (
    "\n\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\n"
    '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
)


def tools_prompt(tools: list[dict[str, Any]], call_format: bool) -> str:
    """The system prompt text that describes `tools` (and how to call them)."""
    listing = "\n".join(json.dumps(tool, ensure_ascii=False) for tool in tools)
    text = _TOOLS.format(tools=listing)
    return text + _CALL_FORMAT if call_format else text


def _call_text(call: dict[str, Any]) -> str:
    function = call.get("function", {})
    try:
        arguments: Any = json.loads(function.get("arguments") or "{}")
    except json.JSONDecodeError:
        arguments = function.get("arguments")
    body = json.dumps({"name": function.get("name"), "arguments": arguments}, ensure_ascii=False)
    return f"<tool_call>\n{body}\n</tool_call>"


def with_tools_prompt(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]], call_format: bool
) -> list[dict[str, Any]]:
    """`messages` with the tools described in the system message (added if missing), and
    earlier calls written out as the model would have written them."""
    text = tools_prompt(tools, call_format)
    out: list[dict[str, Any]] = []
    for message in messages:
        calls = message.get("tool_calls")
        if message["role"] == "assistant" and calls:
            written = "\n".join(_call_text(c) for c in calls)
            content = f"{message['content']}\n{written}" if message["content"] else written
            message = {k: v for k, v in message.items() if k != "tool_calls"}
            message["content"] = content
        out.append(message)
    if out and out[0]["role"] in ("system", "developer"):
        first = dict(out[0])
        first["content"] = f"{first['content']}\n\n{text}" if first["content"] else text
        out[0] = first
    else:
        out.insert(0, {"role": "system", "content": text})
    return out
