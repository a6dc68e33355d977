"""`turnkeep.Image`: image bytes a tool returns to the model (docs/agent.md, "Images from
tools"). The media type is decided from the bytes, never taken on trust: bytes that are not a
PNG, JPEG, GIF or WebP are refused when the Image is made, so the tool fails with a clear error
the model sees instead of a provider refusing the round."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

_SIGNATURES: Final = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def sniff_image(data: bytes) -> str | None:
    """The image media type the bytes' magic number says, or None for anything else."""
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    for signature, media_type in _SIGNATURES:
        if data.startswith(signature):
            return media_type
    return None


@dataclass(frozen=True, slots=True)
class Image:
    """An image for the model: `data` (PNG, JPEG, GIF or WebP bytes) and a `name` to show.

    `media_type` may be left out (read from the bytes); given, it must match them. A function
    tool returns one, or a list mixing text and images; an MCP tool's `image` content becomes
    one. ValueError for bytes that are no such image or a type that disagrees with them.
    """

    data: bytes
    name: str = "image"
    media_type: str = ""

    def __post_init__(self) -> None:
        found = sniff_image(self.data)
        if found is None:
            raise ValueError(f"image {self.name!r}: the bytes are not a PNG, JPEG, GIF or WebP")
        if self.media_type and self.media_type != found:
            raise ValueError(
                f"image {self.name!r}: declared {self.media_type} but the bytes are {found}"
            )
        object.__setattr__(self, "media_type", found)
