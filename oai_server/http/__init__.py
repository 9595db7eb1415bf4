"""The HTTP edge: request bodies in, JSON bodies and server-sent events out.

The fast paths past the framework, all in one list (each measured and explained where
it stands; `tests/unit/test_fast_paths.py` fails when one would silently skip a layer):

1. `BODY_SEND` (`http/sse.py`, set by `app.ServerApp`): a stream's bodies go straight to
   the ASGI server's own `send`, past every middleware; only the response's start passes
   through them. It holds while every middleware in the app passes a stream's start on at
   once and leaves its bodies alone (headers only: CORS, request id and log, drain, keys,
   limits). A middleware that rewrites bodies (gzip, say) would be skipped on streams: it
   must sit outside `ServerApp`, or the stream must not take this path.
2. `DirectRoutes` (`http/direct.py`): `POST /v1/chat/completions` and `POST
   /v1/completions` are answered past Starlette's router, its exception middleware and
   FastAPI's exit-stack middleware; what their handlers raise becomes the response the
   installed handlers give. It holds while the routes it answers are the ones Starlette's
   router would pick, with no route-level middleware.
3. Prebuilt SSE bytes (`http/templates.py`, `responses/sse.py`): a stream's light events
   are spliced into bytes cut once per shape of answer from a serialized sample chunk,
   not serialized chunk by chunk; the bytes are the typed chunk's by construction.
4. Plain routes on the busiest paths (`routes/chat.py`, `routes/completions.py`): a
   Starlette `Route` taking the request alone, no FastAPI dependency solving.
"""
