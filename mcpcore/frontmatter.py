"""The YAML front matter of a `SKILL.md`, read without a YAML library (ADR 37).

Skills (`skills.py`) carry their metadata as YAML between two `---` lines, and the
listing must render it verbatim as JSON. What Agent Skills front matter uses is a
small part of YAML, and that part is read here exactly as a YAML 1.2 parser (core
schema) reads it: a block mapping whose values are plain, single- or double-quoted
scalars, literal (`|`) or folded (`>`) block scalars, nested block mappings, and
block lists of scalars. Plain scalars resolve as the core schema says (`true`,
`null`, `42`, `1.5`; anything else is a string). Everything else YAML allows (flow
`[...]`/`{...}`, anchors, aliases, tags, multi-line plain or quoted values, `?`
keys, several documents) is refused with a `FrontMatterError` that names the line
and the fix, never guessed at.
"""

from __future__ import annotations

import math
import re
from typing import Any

__all__ = ["FrontMatterError", "parse_front_matter"]

# The block the conformance suite (and most hosts) cut out: the first line is `---`,
# the block ends at the next `---` line.
_BLOCK = re.compile(r"---\r?\n([\s\S]*?)\r?\n---[ \t]*(?:\r?\n|\Z)")
MAX_NESTING = 32  # levels of mappings and lists in a front matter (the draft's need a few)
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_KEY = re.compile(
    r"""(?:"(?P<double>(?:[^"\\]|\\.)*)"|'(?P<single>(?:[^']|'')*)'|(?P<plain>[A-Za-z0-9_][A-Za-z0-9_./-]*))"""
    r"[ \t]*:(?:[ \t]+(?P<rest>.*))?\Z"
)
_DOUBLE = re.compile(r'"((?:[^"\\]|\\.)*)"')
_SINGLE = re.compile(r"'((?:[^']|'')*)'")
_ESCAPE = re.compile(r"\\(x[0-9A-Fa-f]{2}|u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|.)")
_ESCAPES = {"0": "\0", "a": "\a", "b": "\b", "t": "\t", "\t": "\t", "n": "\n", "v": "\v", "f": "\f", "r": "\r",
            "e": "\x1b", " ": " ", '"': '"', "/": "/", "\\": "\\", "N": "\x85", "_": "\xa0",
            "L": "\u2028", "P": "\u2029"}
_COMMENT = re.compile(r"[ \t]#")  # a comment starts at a '#' after a blank (found once: linear in the line)
_AFTER_QUOTE = re.compile(r"[ \t]*(?:#.*)?\Z")
_BLOCK_HEADER = re.compile(r"([|>])([+-]?)[ \t]*(?:#.*)?\Z")

# YAML 1.2 core schema: how a plain scalar resolves.
_NULL = re.compile(r"~|null|Null|NULL")
_BOOLEANS = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
_INTEGER = re.compile(r"[-+]?[0-9]+")
_OCTAL = re.compile(r"0o[0-7]+")
_HEXADECIMAL = re.compile(r"0x[0-9a-fA-F]+")
_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?")
_NOT_FINITE = re.compile(r"[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)")
_JSON_SAFE_INTEGER = 2**53  # past it a JSON reader in JavaScript rounds the number
_SIGNIFICANT_DIGITS = 18  # 2**53 has 16 decimal, 18 octal, 14 hexadecimal digits: more is beyond it in any base


class FrontMatterError(ValueError):
    """Front matter this parser does not read: the message names the line and the fix."""


def parse_front_matter(markdown: str) -> dict[str, Any]:
    """The front matter at the start of a `SKILL.md` (a leading BOM allowed), as JSON-ready data."""
    text = markdown[1:] if markdown.startswith("\ufeff") else markdown
    block = _BLOCK.match(text)
    if block is None:
        raise FrontMatterError("SKILL.md must begin with YAML front matter: "
                               "a '---' line, the fields, then a '---' line")
    lines = _LINE_BREAK.split(block.group(1))
    if len(lines) > 1 and not lines[-1]:  # a last line break ends the last line; it opens no empty one (a `|+` keeps it)
        lines.pop()
    return _Parser(lines).document()


def _resolve(plain: str, where: str) -> Any:
    """A plain scalar as the YAML 1.2 core schema resolves it."""
    if _NULL.fullmatch(plain):
        return None
    if plain in _BOOLEANS:
        return _BOOLEANS[plain]
    if _NOT_FINITE.fullmatch(plain):
        raise FrontMatterError(f"{where}: {plain} is not a JSON number; quote it to keep it as text")
    if _OCTAL.fullmatch(plain) or _HEXADECIMAL.fullmatch(plain) or _INTEGER.fullmatch(plain):
        return _integer(plain, where)
    if _FLOAT.fullmatch(plain):
        number = float(plain)
        if math.isinf(number):  # 1e400: YAML reads infinity, which JSON renders as null
            raise FrontMatterError(f"{where}: {plain} is beyond a JSON number's range; quote it to keep it as text")
        return number
    return plain


def _integer(plain: str, where: str) -> int:
    """A core-schema integer (decimal, `0o` octal or `0x` hexadecimal), refused past 2**53 in size.

    YAML integers have no bound, but a JSON reader in JavaScript rounds one past 2**53. The
    digits are counted before Python converts them: a decimal of thousands of digits would
    otherwise raise Python's own conversion-limit `ValueError`, naming no line.
    """
    base = 8 if plain.startswith("0o") else 16 if plain.startswith("0x") else 10
    digits = (plain.lstrip("+-") if base == 10 else plain[2:]).lstrip("0")
    if len(digits) <= _SIGNIFICANT_DIGITS and (number := int(digits or "0", base)) <= _JSON_SAFE_INTEGER:
        return -number if plain.startswith("-") else number
    raise FrontMatterError(f"{where}: {plain[:24]}{'...' if len(plain) > 24 else ''} is too large to survive JSON "
                           "(beyond ±2**53); quote it to keep it as text")


def _unescape(body: str, where: str) -> str:
    def one(match: re.Match[str]) -> str:
        code = match.group(1)
        if len(code) > 1:
            point = int(code[1:], 16)
            if 0xD800 <= point <= 0xDFFF or point > 0x10FFFF:
                raise FrontMatterError(f"{where}: \\{code} is not a character; write the character itself")
            return chr(point)
        if code not in _ESCAPES:
            raise FrontMatterError(f"{where}: \\{code} is not a YAML escape")
        return _ESCAPES[code]

    return _ESCAPE.sub(one, body)


class _Parser:
    """A cursor over the front matter's lines; each method reads one kind of node."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.at = 0
        self.depth = 0  # mappings and lists open around the line being read

    def where(self, index: int | None = None) -> str:
        return f"SKILL.md line {(self.at if index is None else index) + 2}"  # the opening '---' is line 1

    def indent(self, index: int) -> int:
        line = self.lines[index]
        spaces = len(line) - len(line.lstrip(" "))
        if line[spaces:spaces + 1] == "\t":
            raise FrontMatterError(f"{self.where(index)}: indent with spaces; YAML forbids tabs there")
        return spaces

    def next_content(self) -> int | None:
        """The index of the next line that is neither blank nor a comment (the cursor moves to it)."""
        while self.at < len(self.lines):
            stripped = self.lines[self.at].strip(" \t")
            if stripped and not stripped.startswith("#"):
                return self.at
            self.at += 1
        return None

    def document(self) -> dict[str, Any]:
        first = self.next_content()
        if first is None:
            raise FrontMatterError("the front matter is empty: it needs at least name and description")
        if self.lines[first].lstrip(" ").startswith("-"):
            raise FrontMatterError(f"{self.where()}: the front matter must be a mapping of fields, not a list")
        found = self.mapping(self.indent(first))
        if self.next_content() is not None:
            raise FrontMatterError(f"{self.where()}: this line is indented less than the fields above it")
        return found

    def mapping(self, indent: int) -> dict[str, Any]:
        found: dict[str, Any] = {}
        while (index := self.next_content()) is not None and (depth := self.indent(index)) >= indent:
            if depth > indent:
                raise FrontMatterError(f"{self.where()}: unexpected indentation; a value must fit on its key's "
                                       "line (use | or > for text over several lines)")
            key, rest = self.key(self.lines[index][indent:])
            if key in found:
                raise FrontMatterError(f"{self.where()}: the key {key!r} appears twice")
            self.at += 1
            found[key] = self.nested(indent) if rest is None else self.inline(rest, indent)
        return found

    def key(self, text: str) -> tuple[str, str | None]:
        """A `key: value` line's key and the text after the colon (None when there is none)."""
        if text.startswith(("- ", "-\t")) or text == "-":
            raise FrontMatterError(f"{self.where()}: a list item where a 'key: value' field was expected")
        match = _KEY.match(text)
        if match is None:
            raise FrontMatterError(f"{self.where()}: expected 'key: value' (keys are letters, digits and _ . / -, "
                                   "or quoted), got {text!r}")
        if match.group("double") is not None:
            key = _unescape(match.group("double"), self.where())
        elif match.group("single") is not None:
            key = match.group("single").replace("''", "'")
        else:
            key = match.group("plain")
            if not isinstance(_resolve(key, self.where()), str):
                raise FrontMatterError(f"{self.where()}: the key {key!r} is not text in YAML; quote it")
        rest = (match.group("rest") or "").strip(" \t")
        return key, None if not rest or rest.startswith("#") else rest

    def nested(self, indent: int) -> Any:
        """What follows `key:` with nothing after it: a deeper mapping, a list, or null."""
        index = self.next_content()
        if index is None:
            return None
        depth = self.indent(index)
        item = self.lines[index].lstrip(" ")
        is_item = item == "-" or item.startswith(("- ", "-\t"))
        if depth > indent or (depth == indent and is_item):
            if self.depth >= MAX_NESTING:
                raise FrontMatterError(f"{self.where(index)}: values nest more than {MAX_NESTING} levels deep")
            self.depth += 1
            try:
                return self.sequence(depth) if is_item else self.mapping(depth)
            finally:
                self.depth -= 1
        return None

    def sequence(self, indent: int) -> list[Any]:
        items: list[Any] = []
        while (index := self.next_content()) is not None and self.indent(index) == indent:
            line = self.lines[index][indent:]
            if not (line == "-" or line.startswith(("- ", "-\t"))):
                break
            rest = line[1:].strip(" \t")
            self.at += 1
            if not rest or rest.startswith("#"):
                raise FrontMatterError(f"{self.where(index)}: a list item holds one value on its own line")
            items.append(self.inline(rest, indent))
        return items

    def inline(self, text: str, indent: int) -> Any:
        """A value written after `key:` or `- ` on the line just read."""
        where = self.where(self.at - 1)
        first = text[0]
        if first in "\"'":
            match = (_DOUBLE if first == '"' else _SINGLE).match(text)
            if match is None:
                raise FrontMatterError(f"{where}: a quoted value must close on the same line "
                                       "(use | or > for text over several lines)")
            if not _AFTER_QUOTE.fullmatch(text[match.end():]):
                raise FrontMatterError(f"{where}: text after the closing quote")
            body = match.group(1)
            return _unescape(body, where) if first == '"' else body.replace("''", "'")
        if first in "|>":
            return self.block_scalar(text, indent, where)
        if first in "[{":
            raise FrontMatterError(f"{where}: flow collections ([...] or {{...}}) are not read here; "
                                   "write a block list ('- item' lines) or a nested mapping")
        if first in "&*!":
            raise FrontMatterError(f"{where}: anchors, aliases and tags are not read here; write the value itself")
        if first in "@`%,]}" or text.startswith(("- ", "? ", ": ")) or text in ("-", "?", ":"):
            raise FrontMatterError(f"{where}: a value cannot start with {first!r} unquoted; quote it")
        plain = _without_comment(text)
        if ": " in plain or plain.endswith(":") or ":\t" in plain:
            raise FrontMatterError(f"{where}: ': ' inside an unquoted value; quote the value")
        return _resolve(plain, where)

    def block_scalar(self, header: str, indent: int, where: str) -> str:
        """A literal (`|`) or folded (`>`) block scalar, with its chomping indicator (`-`, `+`)."""
        match = _BLOCK_HEADER.fullmatch(header)
        if match is None:
            raise FrontMatterError(f"{where}: a block scalar header is |, |-, |+, >, >- or >+ (no indentation digit)")
        style, chomping = match.groups()
        lines: list[str] = []
        content_indent: int | None = None
        while self.at < len(self.lines):
            line = self.lines[self.at]
            if not line.strip(" \t"):  # a blank line; past the content's indent its spaces are content
                lines.append(line[content_indent:] if content_indent is not None else "")
            else:
                depth = self.indent(self.at)
                if depth <= indent or (content_indent is not None and depth < content_indent):
                    break
                content_indent = depth if content_indent is None else content_indent
                lines.append(line[content_indent:])
            self.at += 1
        body = len(lines)
        while body and not lines[body - 1]:
            body -= 1
        trailing = len(lines) - body
        text = "\n".join(lines[:body]) if style == "|" else self.fold(lines[:body], where)
        if not body:
            return "\n" * trailing if chomping == "+" else ""
        if chomping == "-":
            return text
        return text + "\n" + ("\n" * trailing if chomping == "+" else "")

    def fold(self, lines: list[str], where: str) -> str:
        """Folded lines: a single line break is a space, n blank lines are n line breaks."""
        text, started, blank = "", False, 0
        for line in lines:
            if not line:
                blank += 1
                continue
            if line[0] in " \t":
                raise FrontMatterError(f"{where}: a folded (>) block with more-indented lines is not read here; use |")
            text += ("\n" * blank or " ") if started else "\n" * blank
            started, blank = True, 0
            text += line
        return text


def _without_comment(text: str) -> str:
    """A plain value without its trailing comment and blanks."""
    found = _COMMENT.search(text)
    return (text if found is None else text[: found.start()]).rstrip(" \t")
