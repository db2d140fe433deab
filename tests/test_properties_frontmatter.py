"""Properties of the front-matter reader (mcpcore.frontmatter): whatever the text, it gives
JSON-ready data or a `FrontMatterError` naming its place, never another exception."""

from __future__ import annotations

import math
from typing import Any

import orjson
from hypothesis import example, given, settings, strategies as st

from mcpcore.frontmatter import FrontMatterError, parse_front_matter

PROPERTY = settings(max_examples=300, deadline=None, derandomize=True, database=None)

# Pieces of YAML-like lines: enough structure to reach the scalars, blocks and nesting, enough noise to break them.
PIECES = st.sampled_from([
    "name", "description", "a", "'q''k'", '"d\\"k"', ": ", ":", " ", "  ", "\t", "- ", "-", "#", " # c",
    "|", "|-", "|+", ">", ">-", ">+", "|2", "'", '"', "''", "\\", "\\x41", "\\u00e9", "\\ud800", "\\U0010FFFF",
    "\\U00110000", "\\q", "[a]", "{a: 1}", "&x", "*x", "!!str", "?", "@", "~", "null", "true", "False",
    "0x1F", "0o17", "0x", "0o", "+", ".5", "1e400", "-1e400", ".inf", ".nan", "1_000", "2.1.0",
    "9" * 17, "\r", "\ufeff", "\x00", "\u2028",
])
# Numbers of any size in each core-schema form, past Python's 4300-digit conversion limit too.
NUMBER = st.builds(lambda sign, form, digit, length, tail: sign + form + digit * length + tail,
                   st.sampled_from(["", "-", "+"]), st.sampled_from(["", "", "0x", "0o"]), st.sampled_from("0179f"),
                   st.sampled_from([1, 2, 14, 15, 16, 17, 18, 19, 400, 4300, 4301, 6000]) | st.integers(1, 6000), st.sampled_from(["", "", ".5", "e3", "e-400"]))
# Field lines, their keys numbered by their place; most are well-formed, so that documents get past their first lines.
FIELD = st.builds(lambda indent, lead, value: indent + lead + value,
                  st.sampled_from(["", "", "", "  "]), st.sampled_from(["k#: ", "k#: ", "'q#': ", "k#:", "- "]),
                  PIECES | NUMBER)
NUMBERED = st.builds(lambda value: "k#: " + value, NUMBER)
NOISE = st.lists(PIECES | st.text(max_size=4), max_size=6).map("".join)
STRUCTURED = (st.lists(NUMBERED | NUMBERED | FIELD, min_size=1, max_size=6) | st.lists(FIELD | NOISE, max_size=8)).map(
    lambda lines: "---\nname: x\n" + "\n".join(line.replace("#", str(n), 1) for n, line in enumerate(lines)) + "\n---\n")
BYTES = st.binary(max_size=200).map(lambda data: "---\n" + data.decode("latin-1") + "\n---\n")


def _is_json_ready(value: Any) -> bool:
    """Text, booleans, null, a finite number within ±2**53, and lists and mappings of those."""
    if isinstance(value, dict):
        return all(isinstance(key, str) and _is_json_ready(item) for key, item in value.items())
    if isinstance(value, list):
        return all(_is_json_ready(item) for item in value)
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return True
    if isinstance(value, int):
        return abs(value) <= 2**53
    return isinstance(value, float) and math.isfinite(value)


@PROPERTY
@given(STRUCTURED | BYTES | st.text(max_size=200))
@example("---\nname: x\nsize: " + "1" * 5000 + "\n---\n")  # past Python's int conversion limit
def test_any_text_gives_json_ready_data_or_a_front_matter_error_with_its_place(markdown: str) -> None:
    try:
        found = parse_front_matter(markdown)
    except FrontMatterError as error:
        assert str(error).startswith(("SKILL.md line ", "SKILL.md must begin", "the front matter is empty")), error
        return
    assert isinstance(found, dict) and _is_json_ready(found)
    assert orjson.loads(orjson.dumps(found)) == found
