"""SKILL.md front matter: the YAML subset read as a YAML 1.2 parser reads it, everything else refused by line.

Every accepted case's expected value is what the `yaml` package the conformance suite parses with
(2.9, core schema) gives for the same text.
"""

from __future__ import annotations

from typing import Any

import pytest

from mcpcore.frontmatter import FrontMatterError, parse_front_matter

HEAD = "name: demo\ndescription: A demo.\n"


def parsed(fields: str) -> dict[str, Any]:
    return parse_front_matter(f"---\n{HEAD}{fields}---\n\n# Body\n")


def extra(fields: str) -> dict[str, Any]:
    found = parsed(fields)
    assert (found.pop("name"), found.pop("description")) == ("demo", "A demo.")
    return found


@pytest.mark.parametrize("text, value", [
    ("plain words", "plain words"),
    ("plain # a comment", "plain"),
    ("http://example.com/x?y=1#fragment", "http://example.com/x?y=1#fragment"),
    ("a:b", "a:b"),
    ("'it''s # kept'", "it's # kept"),
    ('"tab\\there \\"quoted\\" \\u00e9\\x41"', 'tab\there "quoted" éA'),
    ('""', ""),
    ("~", None), ("null", None), ("NULL", None),
    ("true", True), ("False", False), ("yes", "yes"),
    ("42", 42), ("-4", -4), ("+4", 4), ("012", 12), ("0x1F", 31), ("0o17", 15),
    ("9007199254740992", 2**53), ("-9007199254740992", -2**53), ("0" * 5000 + "7", 7), ("0x20000000000000", 2**53),
    ("1.5", 1.5), (".5", 0.5), ("1e3", 1000.0),
    ("2.1.0", "2.1.0"), ("2024-01-01", "2024-01-01"), ("1_000", "1_000"), ("0b101", "0b101"),
])
def test_a_scalar_resolves_as_the_yaml_core_schema_says(text: str, value: Any) -> None:
    assert extra(f"field: {text}\n") == {"field": value}


def test_a_key_with_nothing_after_it_is_null() -> None:
    assert extra("empty:\nafter: x\n") == {"empty": None, "after": "x"}


def test_nested_mappings_end_where_their_indentation_does() -> None:
    assert extra("metadata:\n  version: '2.1'\n  deeper:\n    x: 1\n  y: 2\nlast: 3\n") == {
        "metadata": {"version": "2.1", "deeper": {"x": 1}, "y": 2}, "last": 3}


@pytest.mark.parametrize("indent", ["", "  "])
def test_a_block_list_may_sit_at_its_keys_indentation_or_deeper(indent: str) -> None:
    assert extra(f"allowed-tools:\n{indent}- Read\n{indent}- 'Bash(git:*)'\nnext: 1\n") == {
        "allowed-tools": ["Read", "Bash(git:*)"], "next": 1}


@pytest.mark.parametrize("header, value", [
    ("|", "one\ntwo\n\nafter blank\n"),
    ("|-", "one\ntwo\n\nafter blank"),
    ("|+", "one\ntwo\n\nafter blank\n\n"),
    (">", "one two\nafter blank\n"),
    (">-", "one two\nafter blank"),
])
def test_block_scalars_keep_or_fold_lines_and_chomp_as_indicated(header: str, value: str) -> None:
    assert extra(f"text: {header}\n  one\n  two\n\n  after blank\n\nnext: x\n") == {"text": value, "next": "x"}


@pytest.mark.parametrize("blank_lines, value", [(0, "x\n"), (1, "x\n"), (2, "x\n\n")])
def test_a_kept_block_ending_the_front_matter_keeps_only_the_line_breaks_before_the_closing_line(
        blank_lines: int, value: str) -> None:
    """The block ends at the line break before the closing `---`: that break ends the last line, so one blank
    line before `---` adds nothing and two add one (as the suite's `yaml` 2.9 reads the cut-out block)."""
    assert extra("text: |+\n  x\n" + "\n" * blank_lines) == {"text": value}


def test_a_literal_block_keeps_lines_indented_past_its_first() -> None:
    assert extra("text: |\n  a\n    more\n  b\n") == {"text": "a\n  more\nb\n"}


def test_comments_blank_lines_quoted_keys_and_key_spacing_are_read() -> None:
    text = "---\n# first\nname: demo\n\n  # indented comment\ndescription: A demo.   \n'quoted key': 1\n\"k\\u00e9y\": 2\nspaced : 3\n---\n"
    assert parse_front_matter(text) == {"name": "demo", "description": "A demo.", "quoted key": 1, "kéy": 2, "spaced": 3}


def test_a_byte_order_mark_and_crlf_line_ends_are_accepted() -> None:
    assert parse_front_matter("\ufeff---\r\nname: demo\r\ndescription: |\r\n  x\r\n  y\r\n---\r\nbody") == {
        "name": "demo", "description": "x\ny\n"}


def test_a_whole_document_may_be_indented() -> None:
    assert parse_front_matter("---\n  name: demo\n  description: A demo.\n---\n") == {"name": "demo", "description": "A demo."}


@pytest.mark.parametrize("markdown", ["# No front matter\n", "---\nname: demo\n", "--- \nname: demo\n---\n", "---\n---\n"])
def test_a_file_without_a_delimited_block_at_its_start_is_refused(markdown: str) -> None:
    with pytest.raises(FrontMatterError, match="must begin with YAML front matter"):
        parse_front_matter(markdown)


@pytest.mark.parametrize("fields, line, fragment", [
    ("tools: [Read, Grep]\n", 4, "flow collections"),
    ("meta: {a: 1}\n", 4, "flow collections"),
    ("a: &anchor x\n", 4, "anchors, aliases and tags"),
    ("a: *anchor\n", 4, "anchors, aliases and tags"),
    ("a: !!str 1\n", 4, "anchors, aliases and tags"),
    ("a: first line\n  continued\n", 5, "unexpected indentation"),
    ("a: 'never closed\n", 4, "must close on the same line"),
    ('a: "x" trailing\n', 4, "text after the closing quote"),
    ("name: again\n", 4, "appears twice"),
    ("\tindented: x\n", 4, "tabs"),
    ("a: b: c\n", 4, "': ' inside an unquoted value"),
    ('a: "\\q"\n', 4, "not a YAML escape"),
    ('a: "\\ud800"\n', 4, "not a character"),
    ("a: .inf\n", 4, "not a JSON number"),
    ("a: 1e400\n", 4, "beyond a JSON number's range"),
    ("a: -1e400\n", 4, "beyond a JSON number's range"),
    ("a: 9007199254740993\n", 4, "too large to survive JSON"),
    ("a: " + "1" * 5000 + "\n", 4, "too large to survive JSON"),  # past Python's own int conversion limit
    ("a: -" + "0" * 4400 + "1" * 17 + "\n", 4, "too large to survive JSON"),
    ("a: 0x" + "f" * 5000 + "\n", 4, "too large to survive JSON"),
    ("a: 0o" + "7" * 19 + "\n", 4, "too large to survive JSON"),
    ("a: |2\n  x\n", 4, "no indentation digit"),
    ("a: >\n  x\n    more\n", 4, "more-indented lines"),
    ("a: - x\n", 4, "cannot start with '-'"),
    ("a: @x\n", 4, "cannot start with '@'"),
    ("? complex\n", 4, "expected 'key: value'"),
    ("true: x\n", 4, "not text in YAML; quote it"),
    ("list:\n  - a: 1\n", 5, "': ' inside an unquoted value"),
    ("list:\n  -\n    - nested\n", 5, "one value on its own line"),
    ("- item\n", 4, "a list item where"),
])
def test_yaml_outside_the_subset_is_refused_naming_the_line(fields: str, line: int, fragment: str) -> None:
    with pytest.raises(FrontMatterError, match=f"^SKILL.md line {line}: .*{fragment}"):
        parsed(fields)


def test_front_matter_must_be_a_mapping_and_not_empty() -> None:
    with pytest.raises(FrontMatterError, match="must be a mapping of fields, not a list"):
        parse_front_matter("---\n- a\n---\n")
    with pytest.raises(FrontMatterError, match="is empty"):
        parse_front_matter("---\n# only a comment\n---\n")
    with pytest.raises(FrontMatterError, match="indented less than the fields above it"):
        parse_front_matter("---\n  name: demo\ndescription: x\n---\n")


def test_a_value_with_a_long_run_of_blanks_reads_in_one_pass_and_keeps_its_comment_rule() -> None:
    assert extra("note: a" + " " * 200_000 + "b # a comment\n") == {"note": "a" + " " * 200_000 + "b"}


def test_nesting_past_the_limit_is_refused_by_line_not_by_recursion() -> None:
    levels = "".join("  " * level + f"k{level}:\n" for level in range(40))
    with pytest.raises(FrontMatterError, match="nest more than 32 levels"):
        parsed(levels)
