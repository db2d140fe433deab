"""Matching URIs against RFC 6570 templates (mcpcore._wire.uritemplate)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import orjson
import pytest

from conftest import ROOT, free_port, request
from http_client import HttpClient, mcp_headers
from mcpcore._wire.uritemplate import UriTemplate


def test_simple_variable_is_extracted() -> None:
    assert UriTemplate("test://template/{id}/data").match("test://template/123/data") == {"id": "123"}


def test_variables_lists_names_in_template_order() -> None:
    assert UriTemplate("db://{schema}/{table}{?limit}").variables == ["schema", "table", "limit"]


def test_multiple_variables_are_each_extracted() -> None:
    assert UriTemplate("db://{schema}/{table}").match("db://public/users") == {"schema": "public", "table": "users"}


def test_comma_separated_variables_in_one_expression() -> None:
    assert UriTemplate("point/{x,y}").match("point/1,2") == {"x": "1", "y": "2"}


def test_simple_variable_does_not_span_a_slash() -> None:
    assert UriTemplate("test://template/{id}/data").match("test://template/1/2/data") is None


def test_reserved_expansion_spans_slashes() -> None:
    assert UriTemplate("file:///{+path}").match("file:///a/b/c.txt") == {"path": "a/b/c.txt"}


def test_values_are_percent_decoded() -> None:
    assert UriTemplate("users/{name}").match("users/J%C3%BCrgen%20X") == {"name": "Jürgen X"}


def test_reserved_values_are_percent_decoded() -> None:
    assert UriTemplate("file:///{+path}").match("file:///dir/b%20c.txt") == {"path": "dir/b c.txt"}


def test_exploded_path_segments_are_captured_together() -> None:
    assert UriTemplate("repo{/segs*}").match("repo/a/b/c") == {"segs": "a/b/c"}


def test_path_segment_expression_needs_its_leading_slash() -> None:
    assert UriTemplate("repo{/seg}").match("repoX") is None


def test_label_expansion_extracts_the_extension() -> None:
    assert UriTemplate("file/{name}{.ext}").match("file/report.pdf") == {"name": "report", "ext": "pdf"}


def test_path_parameter_expansion_extracts_named_values() -> None:
    assert UriTemplate("map{;x,y}").match("map;x=1;y=2") == {"x": "1", "y": "2"}


def test_query_variables_match_in_template_order() -> None:
    assert UriTemplate("search{?q,lang}").match("search?q=cats&lang=en") == {"q": "cats", "lang": "en"}


def test_query_variables_match_in_any_order() -> None:
    assert UriTemplate("search{?q,lang}").match("search?lang=en&q=cats") == {"q": "cats", "lang": "en"}


def test_query_variables_may_be_partly_absent() -> None:
    assert UriTemplate("search{?q,lang}").match("search?q=cats") == {"q": "cats"}


def test_query_may_be_entirely_absent() -> None:
    assert UriTemplate("search{?q,lang}").match("search") == {}


def test_query_ignores_unknown_parameters_and_decodes_values() -> None:
    assert UriTemplate("search{?q}").match("search?q=a%20b&other=1") == {"q": "a b"}


def test_query_continuation_is_read_with_the_query() -> None:
    assert UriTemplate("s{?q}{&page}").match("s?q=a&page=2") == {"q": "a", "page": "2"}


def test_fragment_expression_extracts_decoded_fragment() -> None:
    assert UriTemplate("doc{#frag}").match("doc#sec%201") == {"frag": "sec 1"}


def test_fragment_expression_is_optional() -> None:
    assert UriTemplate("doc{#frag}").match("doc") == {}


def test_non_matching_scheme_returns_none() -> None:
    assert UriTemplate("test://template/{id}/data").match("other://template/1/data") is None


def test_trailing_text_prevents_a_match() -> None:
    assert UriTemplate("test://x/{id}").match("test://x/1/extra") is None


def test_literal_dot_is_not_a_regex_wildcard() -> None:
    template = UriTemplate("a.b/{id}")
    assert template.match("aXb/1") is None
    assert template.match("a.b/1") == {"id": "1"}


def test_literal_regex_metacharacters_match_only_themselves() -> None:
    template = UriTemplate("a(b)+[c]*/{id}")
    assert template.match("a(b)+[c]*/1") == {"id": "1"}
    assert template.match("abb/1") is None


def test_template_without_expressions_matches_only_itself() -> None:
    template = UriTemplate("test://static")
    assert template.match("test://static") == {}
    assert template.match("test://static2") is None
    assert template.variables == []


@pytest.mark.parametrize("template", ["{a}{", "a}", "{a", "x/{id"])
def test_unbalanced_brace_after_last_expression_raises_value_error(template: str) -> None:
    with pytest.raises(ValueError, match="unbalanced brace"):
        UriTemplate(template)


def test_unbalanced_brace_before_an_expression_raises_value_error() -> None:
    with pytest.raises(ValueError):
        UriTemplate("x}/{id}")


@pytest.mark.parametrize("template", ["{a-b}", "{}", "{a b}", "{%zz}", "{a,}"])
def test_invalid_variable_name_raises_value_error(template: str) -> None:
    with pytest.raises(ValueError, match="invalid variable name"):
        UriTemplate(template)


@pytest.mark.parametrize("template", ["{a.}", "{a..b}"])
def test_variable_name_with_dangling_dot_raises_value_error(template: str) -> None:
    with pytest.raises(ValueError):
        UriTemplate(template)


def test_non_numeric_prefix_length_raises_value_error() -> None:
    with pytest.raises(ValueError):
        UriTemplate("x/{id:abc}")


def test_repeated_variable_raises_value_error() -> None:
    with pytest.raises(ValueError, match="repeats the variable 'x'"):
        UriTemplate("{x}/{x}")


def test_variable_repeated_in_query_raises_value_error() -> None:
    with pytest.raises(ValueError, match="repeats the variable 'x'"):
        UriTemplate("{x}{?x}")


def test_dotted_variable_name_is_returned_under_its_own_name() -> None:
    assert UriTemplate("/{a.b}").match("/1") == {"a.b": "1"}


def test_distinct_names_that_differ_only_in_dot_vs_underscore_both_match() -> None:
    assert UriTemplate("/{a.b}/{a_b}").match("/1/2") == {"a.b": "1", "a_b": "2"}


def test_prefix_modifier_keeps_the_plain_name() -> None:
    template = UriTemplate("x/{id:3}")
    assert template.variables == ["id"]
    assert template.match("x/abc") == {"id": "abc"}


def test_an_exploded_reserved_variable_matches_without_backtracking() -> None:
    template = UriTemplate("list://{+items*}/end")
    assert template.match("list://a,b,c/end") == {"items": "a,b,c"}
    assert template.match("list://" + "," * 5000 + "!") is None  # exponential before: 3 s at 24 commas
    fragment = UriTemplate("doc{#parts*}")
    assert fragment.match("doc#a,b") == {"parts": "a,b"} and fragment.match("doc#" + "," * 5000 + "\n") is None


def test_a_trailing_newline_does_not_slip_past_the_end_of_a_reserved_match() -> None:
    assert UriTemplate("file://{+path}").match("file:///tmp/a\n") is None


def test_a_plain_variable_never_decodes_to_a_path() -> None:
    template = UriTemplate("files://{name}")
    assert template.match("files://..%2F..%2Fetc%2Fpasswd") is None
    assert template.match("files://notes%20v2.txt") == {"name": "notes v2.txt"}
    assert UriTemplate("files://{+path}").match("files://a%2Fb") == {"path": "a/b"}  # reserved: paths are its job


def test_a_plus_in_a_query_value_stays_a_plus() -> None:
    assert UriTemplate("search://q{?term}").match("search://q?term=c++") == {"term": "c++"}
    assert UriTemplate("search://q{?term}").match("search://q?term=a%20b") == {"term": "a b"}


def test_label_path_and_fragment_expressions_match_their_expansion_of_an_undefined_variable() -> None:
    from mcpcore._wire.uritemplate import UriTemplate

    assert UriTemplate("fuzz://tree{/segments*}").match("fuzz://tree") == {}
    assert UriTemplate("fuzz://tree{/segments*}").match("fuzz://tree/a/b") == {"segments": "a/b"}
    assert UriTemplate("fuzz://doc{.format}").match("fuzz://doc") == {}
    assert UriTemplate("fuzz://doc{+rest}").match("fuzz://doc") == {"rest": ""}


def test_a_label_value_stops_at_a_reserved_character() -> None:
    from mcpcore._wire.uritemplate import UriTemplate

    assert UriTemplate("fuzz://doc{.format}{;version}").match("fuzz://doc.md;version=2") == {"format": "md", "version": "2"}


# -- hostile URIs: splits tried from the left, each once ----------------------------------------

# Templates whose adjacent expressions share characters, and URIs that almost match them: a
# backtracking regex tried every split (20,000 dots held `{+path}.{ext}` 6.7 s; 200,000, hours).
HOSTILE = [
    ("file:///{+path}.{ext}", "file:///", ".", "/"),
    ("x://{a}{b}", "x://", "a", "/"),
    ("{+a,b}", "", ",", "\n"),
    ("x://{a}{b}{c}", "x://", "a", "/"),  # cubic
]
LINEAR_PROBE = """
import json, sys
from mcpcore._wire.uritemplate import UriTemplate
for template, head, filler, tail in json.loads(sys.argv[1]):
    for size in (20_000, 200_000):
        print(json.dumps(UriTemplate(template).match(head + filler * size + tail)), flush=True)
print(json.dumps(UriTemplate("x://{a}{b}").match("x://" + "a" * 200_000) == {"a": "", "b": "a" * 200_000}))
"""


def test_hostile_uris_for_adjacent_expressions_are_refused_in_linear_time() -> None:
    """In a child process, since a match holds the interpreter until it returns: 60 s for all
    eight URIs is some hundred times what the search needs, and far less than the regex took."""
    done = subprocess.run([sys.executable, "-c", LINEAR_PROBE, json.dumps(HOSTILE)], capture_output=True,
                          text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["null"] * 2 * len(HOSTILE) + ["true"]


SERVER = """
from mcpcore import Server

server = Server("files")


@server.resource("file:///{+path}.{ext}")
def read(path: str, ext: str) -> str:
    return f"{path} as {ext}"
"""


@pytest.mark.anyio
async def test_a_hostile_read_is_answered_and_does_not_hold_up_a_concurrent_request(tmp_path: Path) -> None:
    """A real server in its own process, so that a server stuck matching fails this test by its bound
    (the regex took about a minute for these 60,000 dots; the search, milliseconds)."""
    (tmp_path / "server.py").write_text(SERVER)
    port = free_port()
    command = [sys.executable, "-m", "mcpcore", "run", "server.py", "--transport", "http", "--port", str(port)]
    process = await anyio.open_process(command, cwd=tmp_path, start_new_session=True)
    at = type("At", (), {"port": port})
    try:
        assert process.stderr is not None
        with anyio.fail_after(30):
            log = b""
            while b"serving" not in log:
                log += await process.stderr.receive()
        async with HttpClient.connect(at) as hostile, HttpClient.connect(at) as other:  # type: ignore[arg-type]
            # 60,000 dots: the URI is mirrored in the Mcp-Name header, which must fit in the 64 KiB head
            read = request("resources/read", 1, uri="file:///" + "." * 60_000 + "/")
            await hostile.send_request("POST", "/mcp", mcp_headers(read), orjson.dumps(read))
            with anyio.fail_after(20):
                listed = (await other.post(request("resources/templates/list", 2))).response
                assert listed["result"]["resourceTemplates"][0]["uriTemplate"] == "file:///{+path}.{ext}"
                answer = (await hostile.read_reply()).response
            assert answer.get("id") == 1, answer
            assert answer["error"]["code"] == -32602, answer
            fine = await other.post(request("resources/read", 3, uri="file:///docs/a.b.txt"))
            assert fine.response["result"]["contents"][0]["text"] == "docs/a as b.txt"  # path as short as the rest allows
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        await process.wait()
