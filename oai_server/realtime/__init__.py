"""OpenAI's Realtime API over a WebSocket, its text subset, on the chat service."""
