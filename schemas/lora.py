"""`/v1/load_lora_adapter` and `/v1/unload_lora_adapter`: vLLM's extension endpoints, in
vLLM's shapes (its `LoadLoRAAdapterRequest` and `UnloadLoRAAdapterRequest`)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from schemas.common import RequestModel


class LoadLoRAAdapterRequest(RequestModel):
    lora_name: Annotated[str, Field(min_length=1)]
    lora_path: Annotated[str, Field(min_length=1)]


class UnloadLoRAAdapterRequest(RequestModel):
    lora_name: Annotated[str, Field(min_length=1)]
    # vLLM accepts it and ignores it; so does this server.
    lora_int_id: int | None = None
