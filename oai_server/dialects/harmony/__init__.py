"""gpt-oss's harmony format, served as `vllm serve` serves it: chat requests rendered
with harmony's messages, answers read from their token ids by vLLM's harmony parser
(thinking, answer and tool calls each on its own channel)."""

from oai_server.dialects.harmony.dialect import Harmony, HarmonyRequest, harmony_of
from oai_server.dialects.harmony.stage import HarmonyStage

__all__ = ["Harmony", "HarmonyRequest", "HarmonyStage", "harmony_of"]
