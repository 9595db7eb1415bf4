"""A feature brings its own wire shapes to the core's answers, as Anthropic's does: its
error envelope on the paths under its prefix (refusals before routing included) and its
model list to the requests that carry its header; every other request keeps OpenAI's."""

from __future__ import annotations

import json
from collections.abc import Iterable

import httpx

from oai_server.app import create_app
from oai_server.engine.fake import FakeEngine
from oai_server.error_responses import ErrorShape
from oai_server.errors import OpenAIError
from oai_server.features import Feature
from oai_server.models import ServedModel
from oai_server.routes.models import ModelListShape
from oai_server.settings import Settings
from oai_server.state import ServerState
from schemas.common import ResponseModel
from tests.live import serve

MODEL = "smollm2-135m-instruct"
KEY = "sk-shapes-test"
HEADER = "other-api-version"


class Named(ResponseModel):
    name: str
    since: int


class Names(ResponseModel):
    names: list[str]


class OtherModels(ModelListShape):
    header = HEADER

    def model(self, served: ServedModel, created: int) -> Named:
        return Named(name=served.name, since=created)

    def listing(self, served: Iterable[ServedModel], created: int) -> Names:
        return Names(names=[one.name for one in served])


def _other_error(error: OpenAIError) -> tuple[int, bytes]:
    return error.status_code, json.dumps({"failure": error.message}).encode()


def other_api(core: ServerState) -> Feature[object]:
    return Feature(
        None, error_shapes=[ErrorShape("/v1/other", _other_error)], model_list=OtherModels()
    )


def test_a_features_paths_answer_errors_in_its_envelope() -> None:
    app = create_app(Settings(api_key=[KEY]), FakeEngine(), extra=[other_api])
    auth = {"Authorization": f"Bearer {KEY}"}
    with serve(app) as root:
        no_key = httpx.get(f"{root}/v1/other/things")
        no_route = httpx.get(f"{root}/v1/other/things", headers=auth)
        beside = httpx.get(f"{root}/v1/otherwise", headers=auth)
        chat = httpx.post(f"{root}/v1/chat/completions", json={}, headers=auth)
    # The keys' middleware refuses before any route: still the feature's envelope.
    assert no_key.status_code == 401
    assert set(no_key.json()) == {"failure"}
    assert (no_route.status_code, no_route.json()) == (
        404,
        {"failure": "Not found: no such route."},
    )
    # A path that only starts with the same letters is not the feature's.
    assert beside.status_code == 404
    assert beside.json()["error"]["type"] == "invalid_request_error"
    assert chat.status_code == 400
    assert chat.json()["error"]["type"] == "invalid_request_error"


def test_the_model_list_takes_the_shape_of_the_header_sent() -> None:
    app = create_app(Settings(), FakeEngine(), extra=[other_api])
    with serve(app) as root:
        listed = httpx.get(f"{root}/v1/models", headers={HEADER: "1"}).json()
        one = httpx.get(f"{root}/v1/models/{MODEL}", headers={HEADER: "1"}).json()
        openai = httpx.get(f"{root}/v1/models").json()
    assert listed == {"names": [MODEL]}
    assert one["name"] == MODEL
    assert isinstance(one["since"], int)
    assert openai["object"] == "list"
    assert [model["id"] for model in openai["data"]] == [MODEL]
