"""MkDocs hook: headings get the anchors GitHub gives them, so a link's #fragment is the same on the site
and in the Markdown (Python-Markdown would fold the `--` GitHub makes of " — " into one `-`)."""

from __future__ import annotations

import re
from typing import Any


def github_slug(heading: str, separator: str) -> str:
    """The anchor GitHub gives a heading's text: lower case, punctuation dropped, each space a separator."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", separator)


def on_config(config: Any) -> Any:
    config.mdx_configs.setdefault("toc", {})["slugify"] = github_slug
    return config
