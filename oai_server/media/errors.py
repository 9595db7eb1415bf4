"""Why an image could not be had: each a 400 that names the request's part."""

from __future__ import annotations

from oai_server.errors import InvalidRequestError


class MediaError(InvalidRequestError):
    """An image that cannot be fetched, read or decoded; `param` names the part."""

    code = "invalid_image"


class MediaFetchError(MediaError):
    """An image URL the server will not or could not fetch."""

    code = "invalid_image_url"
