"""`GET /v1/models` in Anthropic's shape, which its clients read: the feature registers
`MODEL_LIST` with the core's models route, for the requests that carry the header every
Anthropic client sends (`anthropic-version`)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from oai_server.models import ServedModel
from oai_server.routes.models import ModelListShape
from schemas.anthropic import ModelInfo, ModelList


class AnthropicModels(ModelListShape):
    header = "anthropic-version"

    def model(self, served: ServedModel, created: int) -> ModelInfo:
        at = datetime.fromtimestamp(created, UTC).isoformat().replace("+00:00", "Z")
        return ModelInfo(id=served.name, display_name=served.name, created_at=at)

    def listing(self, served: Iterable[ServedModel], created: int) -> ModelList:
        data = [self.model(one, created) for one in served]
        return ModelList(
            data=data,
            has_more=False,
            first_id=data[0].id if data else None,
            last_id=data[-1].id if data else None,
        )


MODEL_LIST = AnthropicModels()
