"""Small test images, as bytes and as data: URLs."""

from __future__ import annotations

import base64
import io

from PIL import Image


def png(color: tuple[int, int, int], size: tuple[int, int] = (40, 30)) -> bytes:
    """A PNG of one colour."""
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, format="PNG")
    return out.getvalue()


def data_url(data: bytes, kind: str = "image/png") -> str:
    return f"data:{kind};base64,{base64.b64encode(data).decode()}"


RED = png((255, 0, 0))
BLUE = png((0, 0, 255), (30, 60))


def image_part(url: str, detail: str | None = None) -> dict[str, object]:
    part: dict[str, object] = {"url": url}
    if detail is not None:
        part["detail"] = detail
    return {"type": "image_url", "image_url": part}


def user_with_images(text: str, *urls: str) -> dict[str, object]:
    """A user message: its images first, then `text`."""
    return {
        "role": "user",
        "content": [*(image_part(u) for u in urls), {"type": "text", "text": text}],
    }
