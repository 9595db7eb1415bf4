"""Conversation items, whichever API carries them: the layer Realtime, Responses and
Anthropic share.

- `context`: items as chat messages, and which of the oldest to drop when they do not fit.
- `tools`: neutral tool definitions and tool choice, as the chat request's.
- `stream`: the chat service's events as typed item events, which each API encodes.
"""
