"""The HTTP edge: request bodies in, JSON bodies and server-sent events out."""
