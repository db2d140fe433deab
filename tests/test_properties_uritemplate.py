"""Properties of the URI-template matcher (mcpcore._wire.uritemplate).

A URI made by expanding a template (RFC 6570, with string values) matches it
and gives the values back; a plain `{var}` never yields a decoded "/"; a "+"
in a query stays a plus; and no template or URI makes the matcher raise.
"""

from __future__ import annotations

import itertools
import re
import string
from urllib.parse import quote

from hypothesis import given, settings, strategies as st

from mcpcore._wire.uritemplate import UriTemplate, _Search

PROPERTY = settings(max_examples=60, deadline=None, derandomize=True, database=None)

RESERVED = ":/?#[]@!$&'()*+,;="
# Literals between expressions use characters no expanded value here contains, so a match is unique.
SEPARATORS = ":@!$()*"

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)
# Reserved expansion ({+x}, {#x}) keeps reserved characters as they are: its values avoid the separators,
# "," (between values) and "%" (a triplet would pass through undecoded, as RFC 6570 says).
reserved_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters=SEPARATORS + ",%"), max_size=8)
label_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="."), max_size=8)  # "." separates labels
name = st.builds(
    lambda head, tail: head + tail,
    st.text(string.ascii_letters + string.digits + "_", min_size=1, max_size=3) | st.sampled_from(["%41", "a%2Fb"]),
    st.sampled_from(["", ".b", ".c1", "_x"]),
)


def encode(value: str, operator: str) -> str:
    """RFC 6570 encoding: reserved expansion keeps reserved characters, the others keep only unreserved ones."""
    return quote(value, safe=RESERVED if operator in ("+", "#") else "")


# operator → (prefix, separator) of its expansion; the values each operator is given here
OPERATORS = {"": ("", ","), "+": ("", ","), "#": ("#", ","), ".": (".", "."), "/": ("/", "/"), ";": (";", ";")}
VALUES = {"+": reserved_text, "#": reserved_text, ".": label_text}


def modified(draw: st.DrawFn, var: str, value: str) -> tuple[str, str]:
    """A varspec for `var` (maybe exploded or with a prefix length) and the value it expands."""
    modifier = draw(st.sampled_from(["", "", "*", ":1", ":3"]))
    return var + modifier, value[: int(modifier[1:])] if modifier.startswith(":") else value


@st.composite
def expansion(draw: st.DrawFn) -> tuple[str, str, dict[str, str], set[str]]:
    """A template, one of its expansions, the values it gives back, and its plain `{var}` names."""
    names = iter(draw(st.lists(name, min_size=10, max_size=10, unique=True)))
    template = uri = draw(st.sampled_from(["", "s://", "file:///", "db://x/"]))
    values: dict[str, str] = {}
    simple: set[str] = set()
    for index in range(draw(st.integers(1, 3))):
        if index:
            literal = draw(st.text(SEPARATORS, min_size=1, max_size=2))
            template, uri = template + literal, uri + literal
        operator = draw(st.sampled_from(sorted(OPERATORS)))
        prefix, separator = OPERATORS[operator]
        specs, parts = [], []
        for var in [next(names) for _ in range(draw(st.integers(1, 2)))]:
            spec, value = modified(draw, var, draw(VALUES.get(operator, text)))
            specs.append(spec)
            values[var] = value
            encoded = encode(value, operator)
            parts.append(var + ("=" + encoded if encoded else "") if operator == ";" else encoded)  # RFC: ";x" when empty
            if operator == "":
                simple.add(var)
        template += "{" + operator + ",".join(specs) + "}"
        uri += prefix + separator.join(parts)
    if draw(st.booleans()):  # form-style query expressions last: they read the rest of the URI
        query = [next(names) for _ in range(draw(st.integers(1, 3)))]
        specs, pairs = [], []
        for var in query:
            spec, value = modified(draw, var, draw(text))
            specs.append(spec)
            if draw(st.booleans()):  # an undefined variable is left out of the expansion
                values[var] = value
                pairs.append(f"{var}={encode(value, '?')}")
        split = draw(st.integers(1, len(specs)))
        template += "{?" + ",".join(specs[:split]) + "}" + ("{&" + ",".join(specs[split:]) + "}" if specs[split:] else "")
        uri += "?" + "&".join(pairs) if pairs else ""
    return template, uri, values, simple


@PROPERTY
@given(expansion())
def test_an_expanded_template_matches_and_gives_its_values_back(case: tuple[str, str, dict[str, str], set[str]]) -> None:
    """Except that a plain {var} whose value holds a "/" does not match (one segment, never a path)."""
    template, uri, values, simple = case
    matched = UriTemplate(template).match(uri)
    if any("/" in values[var] for var in simple):
        assert matched is None
    else:
        assert matched == values, (template, uri)


@st.composite
def near_miss(draw: st.DrawFn) -> tuple[str, str, set[str]]:
    """A template and a URI close to one of its expansions: bits inserted (encoded slashes, bad escapes, newlines)."""
    template, uri, _, simple = draw(expansion())
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(uri)))
        bit = draw(st.sampled_from(["%2F", "%2f", "/", "%252F", "%", "%zz", "%C3", "+", "\n", "?", "#", "&", "=", ";", ".", ","]) | text)
        uri = uri[:at] + bit + uri[at:]
    return template, uri, simple


@PROPERTY
@given(near_miss() | st.tuples(expansion().map(lambda case: case[0]), text, st.just(set())))
def test_any_uri_gives_none_or_string_values_of_the_template_and_never_a_slash_in_a_plain_var(case: tuple[str, str, set[str]]) -> None:
    template, uri, simple = case
    compiled = UriTemplate(template)
    matched = compiled.match(uri)
    if matched is not None:
        assert set(matched) <= set(compiled.variables)
        assert all(type(value) is str for value in matched.values())
        assert not any("/" in matched.get(var, "") for var in simple), (template, uri, matched)


@PROPERTY
@given(st.text(string.ascii_letters + string.digits + "{}+#./;?&=,!@|*:%-_ ", max_size=16) | text)
def test_any_template_text_compiles_or_is_refused_with_value_error(template: str) -> None:
    try:
        compiled = UriTemplate(template)
    except ValueError:
        return
    matched = compiled.match(template)
    assert matched is None or set(matched) <= set(compiled.variables)


@PROPERTY
@given(name, st.text(st.characters(blacklist_categories=("Cs",)) | st.just("+"), max_size=8), st.sampled_from(["?", "&"]))
def test_a_plus_in_a_query_value_stays_a_plus(var: str, value: str, operator: str) -> None:
    """In a URI "+" is a plus sign (only HTML forms mean a space by it), written raw or as %2B."""
    template = UriTemplate("search://q{?" + var + "}" if operator == "?" else "search://q?fixed=1{&" + var + "}")
    for written in (quote(value, safe="+"), quote(value, safe="")):
        assert template.match(f"search://q?{'fixed=1&' if operator == '&' else ''}{var}={written}") == {var: value}


# -- the same match as the backtracking regular expression the matcher was once built as --------

REGEX_VALUES = {"": ("", ",", r"[^/?#,&]*?"), "+": ("", ",", r".*?"), "#": ("#", ",", r".*?"),
                ".": (r"\.", r"\.", r"[^/?#.;]*"), "/": ("/", "/", r"[^/?#;]*"), ";": (";", ";", r"[^/?#;]*")}


def reference(template: str) -> re.Pattern[str]:
    """The template as a backtracking regular expression (quadratic or worse on hostile URIs, so
    only for short ones): groups g0, g1, ... are the matcher's slot pairs, in template order."""
    groups = itertools.count()

    def expression(body: str) -> str:
        operator = body[:1] if body[:1] in "+#./;?&" and body else ""
        if operator in ("?", "&"):
            return rf"(?:[?&](?P<g{next(groups)}>[^#]*))?"
        prefix, separator, value = REGEX_VALUES[operator]
        parts = []
        for spec in body[len(operator):].split(","):
            explode = spec.endswith("*") and operator not in ("+", "#")
            item = f"(?:{value})(?:{separator}(?:{value}))*" if explode else value
            if operator == ";":
                name = re.escape(re.sub(r"(\*|:[0-9]+)$", "", spec))
                parts.append(f"{name}(?:=(?P<g{next(groups)}>{item})|(?P<g{next(groups)}>))")
            else:
                parts.append(f"(?P<g{next(groups)}>{item})")
        return f"(?:{prefix}{separator.join(parts)})" + ("" if operator == "" else "?")

    pattern, position = [], 0
    for found in re.finditer(r"\{([^{}]*)\}", template):
        pattern += [re.escape(template[position:found.start()]), expression(found.group(1))]
        position = found.end()
    return re.compile("".join(pattern) + re.escape(template[position:]))


ALPHABET = "ab.,/;=?&#%2F\n"


@st.composite
def ambiguous(draw: st.DrawFn) -> str:
    """A template whose expressions share characters or sit side by side, e.g. `{+a}.{b}`, `x{a}{b*}`."""
    template, names = "", (f"v{n}" for n in itertools.count())
    for _ in range(draw(st.integers(1, 3))):
        template += draw(st.text("ab.,/;=", max_size=2))
        operator = draw(st.sampled_from(["", "", "+", "+", "#", ".", "/", ";", "?", "&"]))
        specs = [next(names) + draw(st.sampled_from(["", "", "*", ":2"])) for _ in range(draw(st.integers(1, 2)))]
        template += "{" + operator + ",".join(specs) + "}"
    return template + draw(st.text("ab.,/;=", max_size=2))


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(ambiguous(), st.data())
def test_the_match_is_the_one_the_backtracking_regular_expression_finds(template: str, data: st.DataObject) -> None:
    """The matcher is linear, the regular expression is not; on short URIs they must split alike."""
    compiled, regex = UriTemplate(template), reference(template)
    for _ in range(8):
        pieces = re.split(r"\{[^{}]*\}", template)  # the literals, with short fillings between them
        uri = "".join(piece + data.draw(st.text(ALPHABET, max_size=4)) for piece in pieces)
        uri = data.draw(st.sampled_from([uri, uri[:-1], data.draw(st.text(ALPHABET, max_size=10))]))
        found = regex.fullmatch(uri)
        expected = None if found is None else [found.span(f"g{n}") for n in range(len(found.groupdict()))]
        slots = _Search(compiled, uri).run()
        got = None if slots is None else list(zip(slots[::2], slots[1::2]))
        assert got == expected, (template, uri)


@st.composite
def one_way(draw: st.DrawFn) -> str:
    """A template that splits one way only: single plain or reserved variables, each followed by text
    that starts with a character its value cannot hold (or ending the template)."""
    template, names = draw(st.text("ab:/", max_size=3)), (f"v{n}" for n in itertools.count())
    for _ in range(draw(st.integers(1, 3))):
        template += "{" + next(names) + "}" + draw(st.sampled_from("/?#,&")) + draw(st.text("ab.", max_size=2))
    if draw(st.booleans()):
        template += "{+" + next(names) + "}"
    return template


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(one_way(), st.data())
def test_a_template_that_splits_one_way_is_matched_directly_with_the_same_split(template: str,
                                                                                  data: st.DataObject) -> None:
    compiled = UriTemplate(template)
    assert compiled._direct is not None, template
    for _ in range(8):
        pieces = re.split(r"\{[^{}]*\}", template)
        uri = "".join(piece + data.draw(st.text(ALPHABET, max_size=4)) for piece in pieces)
        uri = data.draw(st.sampled_from([uri, uri[:-1], data.draw(st.text(ALPHABET, max_size=10))]))
        searched = _Search(compiled, uri).run()
        found = compiled._direct.fullmatch(uri)
        assert (None if found is None else [at for span in found.regs[1:] for at in span]) == searched, (template, uri)
