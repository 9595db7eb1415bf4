"""Conversation items, whichever API carries them: Realtime's and Responses' shared layer.

- `context`: items as chat messages, and which of the oldest to drop when they do not fit.
- `stream`: the chat service's events as typed item events, which each API encodes.
"""
