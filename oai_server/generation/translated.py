"""A chat request built from another API's request, which the chat service serves as any.

Anthropic's Messages request becomes one; its errors must still name the parts of the
request the client sent, whose order differs from the chat messages' (Anthropic's
`system` is no message; its text and images are parts in another order).
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import PrivateAttr

from schemas.chat import CreateChatCompletionRequest


class TranslatedChatRequest(CreateChatCompletionRequest):
    """A chat request made from another API's request, whose images an error names as
    that request's parts."""

    _image_params: tuple[str, ...] = PrivateAttr(default=())

    def name_images(self, params: Sequence[str]) -> TranslatedChatRequest:
        """This request, its images named by `params` in order."""
        self._image_params = tuple(params)
        return self

    @property
    def image_params(self) -> tuple[str, ...]:
        """The part each image comes from, in order (empty: as the messages number them)."""
        return self._image_params
