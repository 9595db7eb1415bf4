"""Reasoning: vLLM's reasoning parsers, run in front of the tool-call parser."""
