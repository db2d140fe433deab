"""Icons: the `Icon` a server, tool, resource, template or prompt may carry, checked when registered.

The wire form is the schema's `Icon` (2025-11-25 and later; older revisions have no
`icons` field, and the 2025-era wire leaves it out for them). A client must refuse an
icon that is not an `https:` URL or a `data:` URI (the specification's security
considerations), so anything else is refused here, at registration, rather than
sent to be dropped: `http:` too, even for localhost (a `data:` URI serves local work).
Every field is bounded (lengths, counts), so one item's icons are at most about 1 MiB.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping
from urllib.parse import urlsplit

ICONS_SINCE = "2025-11-25"  # the first revision whose schema has `icons`
MAX_ICONS = 16  # icons per server, tool, resource, template or prompt
MAX_SIZES = 16  # size strings per icon
MAX_URL_LENGTH = 2048  # characters of an https: URL
MAX_DATA_URI_LENGTH = 65536  # characters of a data: URI (about 48 KiB of image)
THEMES = ("light", "dark")

_MIME_TYPE = re.compile(r"image/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}", re.IGNORECASE)  # RFC 6838 names, images only
_SIZE = re.compile(r"[1-9][0-9]{0,4}x[1-9][0-9]{0,4}")  # WxH in pixels, as the schema's "48x48"
_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_WIRE_KEYS = frozenset({"src", "mimeType", "sizes", "theme"})


def has_icons(version: str) -> bool:
    """Whether a protocol revision's schema has the `icons` field."""
    return version >= ICONS_SINCE


@dataclass(frozen=True)
class Icon:
    """An icon a client may show beside the server, a tool, a resource or a prompt.

    `src` is an `https:` URL or a base64 `data:` URI of an image; `mime_type` an `image/...`
    type (needed only where the source does not say); `sizes` strings like `"48x48"` or
    `"any"` (for SVG); `theme` `"light"` or `"dark"` (the background it is drawn for).
    """

    src: str
    mime_type: str | None = None
    sizes: tuple[str, ...] = ()
    theme: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.sizes, str) or not isinstance(self.sizes, Iterable):
            raise ValueError(f"icon sizes is a list of strings like ['48x48'] or ['any'], not {self.sizes!r}")
        object.__setattr__(self, "sizes", tuple(self.sizes))
        _check_src(self.src)
        if self.mime_type is not None:
            _check_mime_type(self.mime_type)
            declared = _data_mime_type(self.src)
            if declared is not None and declared.lower() != self.mime_type.lower():
                raise ValueError(f"icon mime_type {self.mime_type!r} contradicts its data: URI's {declared!r}")
        _check_sizes(self.sizes)
        if self.theme is not None and self.theme not in THEMES:
            raise ValueError(f"icon theme must be 'light' or 'dark' (or left out), not {self.theme!r}")

    def to_wire(self) -> dict[str, Any]:
        """The schema's `Icon` object."""
        wire: dict[str, Any] = {"src": self.src}
        if self.mime_type is not None:
            wire["mimeType"] = self.mime_type
        if self.sizes:
            wire["sizes"] = list(self.sizes)
        if self.theme is not None:
            wire["theme"] = self.theme
        return wire


def icons_to_wire(icons: Any, owner: str) -> tuple[dict[str, Any], ...]:
    """The `icons=` of a registration (`Icon`s, or dicts in the wire form) checked and in the wire
    form (None: none); `owner` names what carries them in an error."""
    if icons is None:
        return ()
    if isinstance(icons, (str, bytes, Icon, Mapping)) or not isinstance(icons, Iterable):
        raise ValueError(f"{owner}: icons= is a list of Icon (or dicts like {{'src': 'https://...'}}), not {icons!r}")
    found = list(icons)
    if len(found) > MAX_ICONS:
        raise ValueError(f"{owner}: at most {MAX_ICONS} icons, not {len(found)}")
    try:
        return tuple(_icon(icon).to_wire() for icon in found)
    except ValueError as error:
        raise ValueError(f"{owner}: {error}") from None


def _icon(icon: Any) -> Icon:
    if isinstance(icon, Icon):
        return icon
    if not isinstance(icon, Mapping):
        raise ValueError(f"an icon is an Icon or a dict like {{'src': 'https://...'}}, not {icon!r}")
    unknown = sorted(set(icon) - _WIRE_KEYS)
    if unknown:
        raise ValueError(f"an icon has the keys src, mimeType, sizes and theme; not {', '.join(map(repr, unknown))}")
    if "src" not in icon:
        raise ValueError("an icon needs a 'src'")
    return Icon(icon["src"], icon.get("mimeType"), icon.get("sizes", ()), icon.get("theme"))


def _check_src(src: Any) -> None:
    if not isinstance(src, str):
        raise ValueError(f"icon src must be a string, not {src!r}")
    scheme = src.partition(":")[0].lower() if ":" in src else ""
    if scheme == "data":
        _check_data_uri(src)
    elif scheme == "https":
        _check_url(src)
    else:
        shown = src if len(src) <= 60 else src[:57] + "..."
        raise ValueError(f"icon src must be an https: URL or a data: URI (clients refuse any other scheme), not {shown!r}")


def _check_url(src: str) -> None:
    if len(src) > MAX_URL_LENGTH:
        raise ValueError(f"an icon URL may be at most {MAX_URL_LENGTH} characters long; this one has {len(src)}")
    if any(char.isspace() or ord(char) < 32 or ord(char) == 127 for char in src):
        raise ValueError(f"an icon URL must not contain spaces or control characters: {src!r}")
    try:
        parts = urlsplit(src)
        parts.port  # noqa: B018 - a bad port raises here
    except ValueError as error:
        raise ValueError(f"icon src {src!r} is not a valid URL: {error}") from None
    if not parts.hostname:
        raise ValueError(f"icon src {src!r} names no host")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"icon src {src!r} carries credentials; clients fetch icons without them")


def _check_data_uri(src: str) -> None:
    if len(src) > MAX_DATA_URI_LENGTH:
        raise ValueError(f"an icon data: URI may be at most {MAX_DATA_URI_LENGTH} characters long; this one has {len(src)} "
                         "(serve a larger image at an https: URL)")
    header, comma, payload = src[len("data:"):].partition(",")
    media_type, _, parameters = header.partition(";")
    if not comma or parameters.lower().split(";")[-1] != "base64":
        raise ValueError("an icon data: URI is data:image/...;base64,<base64 data>")
    _check_mime_type(media_type)
    if not payload or not _BASE64.fullmatch(payload) or len(payload) % 4:  # what this admits always decodes
        raise ValueError("an icon data: URI holds base64 data (A-Z a-z 0-9 + /, padded with = to a multiple of 4)")


def _data_mime_type(src: str) -> str | None:
    if src[:5].lower() != "data:":
        return None
    return src[5:].partition(",")[0].partition(";")[0]


def _check_mime_type(mime_type: Any) -> None:
    if not isinstance(mime_type, str) or not _MIME_TYPE.fullmatch(mime_type):
        raise ValueError(f"an icon MIME type is an image type like 'image/png' or 'image/svg+xml', not {mime_type!r}")


def _check_sizes(sizes: tuple[Any, ...]) -> None:
    if len(sizes) > MAX_SIZES:
        raise ValueError(f"an icon lists at most {MAX_SIZES} sizes, not {len(sizes)}")
    for size in sizes:
        if not isinstance(size, str) or not (size == "any" or _SIZE.fullmatch(size)):
            raise ValueError(f"an icon size is 'WxH' in pixels (like '48x48') or 'any', not {size!r}")
