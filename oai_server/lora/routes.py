"""`POST /v1/load_lora_adapter` and `POST /v1/unload_lora_adapter`, as `vllm serve` has them.

Served only with `--allow-runtime-lora` (else they do not exist: a 404), behind the API
keys like every route, and only for adapters inside `--lora-dir`: a client names a
directory there, never anywhere else on the server's disk. They answer as vLLM does,
a line of plain text.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Request, Response

from oai_server.errors import InvalidRequestError
from oai_server.http.parsing import parse_body
from oai_server.models.adapters import AdapterEngine
from schemas.lora import LoadLoRAAdapterRequest, UnloadLoRAAdapterRequest


def inside_lora_dir(adapters: AdapterEngine, given: str) -> Path:
    """`given` (absolute, or relative to `--lora-dir`) as a directory inside `--lora-dir`;
    a 400 for any path that leads out of it, through '..' or a link."""
    if adapters.lora_dir is None:
        raise InvalidRequestError(
            "This server loads adapters only from --lora-dir, and has none.", param="lora_path"
        )
    root = adapters.lora_dir.resolve()
    path = (root / given).resolve()
    if path == root or not path.is_relative_to(root):
        raise InvalidRequestError(
            "'lora_path' must be a directory inside the server's --lora-dir.", param="lora_path"
        )
    if not path.is_dir():
        raise InvalidRequestError("'lora_path' names no adapter directory.", param="lora_path")
    return path


def router(adapters: AdapterEngine, max_request_bytes: int) -> APIRouter:
    """The routes, loading into and unloading from `adapters`, each body of at most
    `max_request_bytes`."""
    router = APIRouter()

    @router.post("/v1/load_lora_adapter")
    async def load_lora_adapter(request: Request) -> Response:
        req = await parse_body(request, LoadLoRAAdapterRequest, max_request_bytes)
        await adapters.load(req.lora_name, inside_lora_dir(adapters, req.lora_path))
        return Response(f"Success: LoRA adapter '{req.lora_name}' added successfully.")

    @router.post("/v1/unload_lora_adapter")
    async def unload_lora_adapter(request: Request) -> Response:
        req = await parse_body(request, UnloadLoRAAdapterRequest, max_request_bytes)
        await adapters.unload(req.lora_name)
        return Response(f"Success: LoRA adapter '{req.lora_name}' removed successfully.")

    return router
