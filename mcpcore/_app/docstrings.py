"""Parameter descriptions from a docstring, in the Google, NumPy or Sphinx style.

`parse(doc)` returns the docstring without its parameter section (the tool's
description) and each documented parameter's text, so a function documented
the usual way needs no `Annotated` to describe its arguments. Read once, at
registration.
"""

from __future__ import annotations

import re

__all__ = ["parse"]

_GOOGLE = re.compile(r"(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments):\s*")
_GOOGLE_ENTRY = re.compile(r"\*{0,2}(?P<name>\w+)\s*(\((?:[^()]|\([^()]*\))*\))?\s*:\s*(?P<text>.*)")  # one nested (...)
_NUMPY_ENTRY = re.compile(r"\*{0,2}(?P<name>\w+(?:\s*,\s*\*{0,2}\w+)*)\s*(:.*)?")  # `x, y : int` documents both
_SPHINX = re.compile(r":param\s+(?:[^:]*\s)?(?P<name>\w+)\s*:\s*(?P<text>.*)")
_SPHINX_OTHER = re.compile(r":(type|raises?|returns?|rtype|yields?)\b")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def parse(doc: str | None) -> tuple[str | None, dict[str, str]]:
    """(the docstring less its parameter section, {parameter: description})."""
    if not doc:
        return doc, {}
    lines = doc.splitlines()
    params: dict[str, str] = {}
    kept: list[str] = []
    i = 0
    while i < len(lines):
        line, stripped = lines[i], lines[i].strip()
        if _GOOGLE.fullmatch(stripped):
            i = _google(lines, i + 1, _indent(line), params)
        elif stripped == "Parameters" and i + 1 < len(lines) and set(lines[i + 1].strip()) == {"-"}:
            i = _numpy(lines, i + 2, _indent(line), params)
        elif _SPHINX.match(stripped) or (_SPHINX_OTHER.match(stripped) and params):
            i = _sphinx(lines, i, params)
        else:
            kept.append(line)
            i += 1
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip()  # no gap left where the section was
    return text or None, params


def _block(lines: list[str], start: int, indent: int) -> tuple[list[str], int]:
    """The lines indented deeper than `indent` from `start` (blank lines inside included)."""
    end = start
    while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > indent):
        end += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return lines[start:end], end


def _entries(block: list[str], entry: re.Pattern[str], params: dict[str, str], same_line: bool) -> None:
    if not block:
        return
    base = min(_indent(line) for line in block if line.strip())
    names: list[str] = []
    text: list[str] = []
    for line in [*block, ""]:
        if line.strip() and _indent(line) == base:
            params.update(dict.fromkeys(names, " ".join(text).strip()))
            found = entry.fullmatch(line.strip())
            names = [n.strip().lstrip("*") for n in found["name"].split(",")] if found else []
            text = [found["text"]] if found and same_line else []
        elif line.strip() and names:
            text.append(line.strip())
    params.update(dict.fromkeys(names, " ".join(text).strip()))


def _google(lines: list[str], start: int, indent: int, params: dict[str, str]) -> int:
    block, end = _block(lines, start, indent)
    _entries(block, _GOOGLE_ENTRY, params, same_line=True)
    return end


def _numpy(lines: list[str], start: int, indent: int, params: dict[str, str]) -> int:
    end = start
    while end < len(lines):  # entries at `indent`, their text deeper, until the next section or prose
        line = lines[end]
        if end + 1 < len(lines) and line.strip() and set(lines[end + 1].strip()) == {"-"}:
            break
        if line.strip() and _indent(line) <= indent and not _NUMPY_ENTRY.fullmatch(line.strip()):
            break
        end += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    _entries(lines[start:end], _NUMPY_ENTRY, params, same_line=False)
    return end


def _sphinx(lines: list[str], start: int, params: dict[str, str]) -> int:
    line = lines[start].strip()
    found = _SPHINX.match(line)
    indent = _indent(lines[start])
    block, end = _block(lines, start + 1, indent)
    if found:
        params[found["name"]] = " ".join([found["text"], *(part.strip() for part in block)]).strip()
    return end
