"""Pydantic models of OpenAI's wire format for chat, completions and models.

Imports nothing from the server, the web framework or the engine.
"""
