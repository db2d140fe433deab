"""Matching URIs against RFC 6570 URI templates (levels 1-4, matching only).

`UriTemplate("file:///{+path}").match("file:///a/b.txt")` → `{"path": "a/b.txt"}`.
Query-style expressions (`{?x,y}`, `{&z}`) are parsed from the query string so their
order and presence may vary. Values are percent-decoded.

What a match means when a URI splits several ways (`file:///{+path}.{ext}` on
`a.b.c`, `x://{a}{b}`, `{+a,b}`): the first split in this order of preference,
decided from the left. A reserved (`{+x}`, `{#x}`) or plain (`{x}`) value is as
short as the rest allows (`path` is `a`, `ext` is `b.c`; in `{name}{.ext}` the
extension goes to `ext`); a label, path-segment or parameter value (`{.x}`, `{/x}`,
`{;x}`) and a query are as long as their characters allow; an optional expression
(every operator but the plain one) is tried present before absent. This is the
match a backtracking regular expression built the same way finds (the tests check
the two agree), without its cost, which grew with the square or the cube of the
URI's length: the template compiles to a small program of steps, and the search
tries each step at each position of the URI at most once (`_Search`), so matching
takes time linear in the URI's length for every template (a bisection aside).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from functools import lru_cache
from typing import Callable, Iterator

_EXPRESSION = re.compile(r"\{([^{}]*)\}")
_VARCHAR = r"(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2})"
_VARSPEC = re.compile(rf"({_VARCHAR}+(?:\.{_VARCHAR}+)*)(\*|:[1-9][0-9]{{0,3}})?")

# operator → (prefix, separator, the characters a value cannot hold, lazy: as short as the rest allows)
_OPERATORS = {
    "": ("", ",", "/?#,&", True),  # lazy: `{name}{.ext}` gives the extension to `ext`
    "+": ("", ",", "\n", True),
    "#": ("#", ",", "\n", True),
    ".": (".", ".", "/?#.;", False),  # a reserved character in a value arrives %-encoded (RFC 6570 3.2.5)
    "/": ("/", "/", "/?#;", False),
    ";": (";", ";", "/?#;", False),
}
_QUERY_EXCLUDED = "#"  # a query runs to the fragment

# The steps of a compiled template: each is a tuple whose first item says what it does.
_TEXT = 0  # (_TEXT, text, next): the URI continues with this literal text
_RUN = 1  # (_RUN, excluded, lazy, next): any number of characters but these, fewest or most first
_EITHER = 2  # (_EITHER, first, second): try one way on, then the other
_MARK = 3  # (_MARK, slot, next): note the position (a value's start or end)
_END = 4  # (_END,): the URI must end here
# Entries of the search's stack.
_GO, _UNDO, _MORE = 0, 1, 2


@lru_cache(maxsize=None)
def _any_of(characters: str) -> re.Pattern[str]:
    """A pattern for one of these characters."""
    return re.compile(f"[{re.escape(characters)}]")


class UriTemplate:
    """A compiled URI template; `variables` lists its names in order."""

    def __init__(self, template: str) -> None:
        self.template = template
        self.variables: list[str] = []
        self._query_vars: list[str] = []
        self._simple: set[str] = set()  # variables of plain {var} expressions: one path segment
        # What each pair of value slots holds, in template order: ("v", a value; "e", `;x` with no
        # value; "q", a query; the index of its variable, or of the next one for a query).
        self._groups: list[tuple[str, int]] = []
        self._steps: list[tuple] = [(_END,)]
        pieces: list[str | tuple[str, list[tuple[str, bool]], int]] = []  # text, or _parse's expression
        position = 0
        for expression in _EXPRESSION.finditer(template):
            pieces.append(self._literal(template[position : expression.start()]))
            position = expression.end()
            pieces.append(self._parse(expression.group(1)))
        pieces.append(self._literal(template[position:]))
        start = 0
        for piece in reversed(pieces):  # right to left: each piece is compiled knowing the step after it
            start = self._text(piece, start) if isinstance(piece, str) else self._expression(*piece, start)
        self._start = start
        self._first = _first_steps(self._steps)
        self._joins = _joins(self._steps, start)
        self._direct = _direct_pattern(pieces)

    def _literal(self, text: str) -> str:
        if "{" in text or "}" in text:
            raise ValueError(f"URI template {self.template!r} has an unbalanced brace")
        return text

    def _parse(self, body: str) -> tuple[str, list[tuple[str, bool]], int]:
        """An expression's operator, (name, exploded) per variable, and first slot pair; its names
        and slot pairs are registered."""
        operator = body[:1] if body[:1] in "+#./;?&" and body else ""
        specs = body[len(operator) :].split(",")
        variables = [(self._name(spec), spec.endswith("*")) for spec in specs]
        names = [name for name, _ in variables]
        first = len(self._groups)
        if operator in ("?", "&"):
            self._query_vars.extend(names)
            self._groups.append(("q", len(self.variables)))
            return operator, variables, first
        if operator == "":
            self._simple.update(names)
        for name in names:
            index = self.variables.index(name)
            self._groups += [("v", index), ("e", index)] if operator == ";" else [("v", index)]
        return operator, variables, first

    def _name(self, spec: str) -> str:
        found = _VARSPEC.fullmatch(spec)
        if found is None:
            raise ValueError(f"URI template {self.template!r} has an invalid variable name {spec!r}")
        name = found.group(1)
        if name in self.variables:
            raise ValueError(f"URI template {self.template!r} repeats the variable {name!r}")
        self.variables.append(name)
        return name

    # -- compiling, right to left: each method returns the index of its first step ----------------

    def _step(self, *step: object) -> int:
        self._steps.append(step)
        return len(self._steps) - 1

    def _text(self, text: str, then: int) -> int:
        return self._step(_TEXT, text, then) if text else then

    def _expression(self, operator: str, variables: list[tuple[str, bool]], group: int, then: int) -> int:
        if operator in ("?", "&"):  # `[?&]` and the rest of the query, or nothing
            query = self._marked(group, lambda after: self._step(_RUN, _QUERY_EXCLUDED, False, after), then)
            return self._step(_EITHER, self._step(_EITHER, self._text("?", query), self._text("&", query)), then)
        prefix, separator, _, _ = _OPERATORS[operator]
        width = 2 if operator == ";" else 1  # slot pairs per variable
        body = then
        for index in reversed(range(len(variables))):
            if index < len(variables) - 1:
                body = self._text(separator, body)
            body = self._variable(operator, *variables[index], group + width * index, body)
        if operator == "":
            return body
        return self._step(_EITHER, self._text(prefix, body), then)  # an undefined variable expands to nothing

    def _marked(self, group: int, value: Callable[[int], int], then: int) -> int:
        """The value `value` builds, its start and end noted in the group's slot pair."""
        return self._step(_MARK, 2 * group, value(self._step(_MARK, 2 * group + 1, then)))

    def _variable(self, operator: str, name: str, exploded: bool, group: int, then: int) -> int:
        """One variable's value: a run of its characters, or runs joined by the separator when exploded."""
        _, separator, excluded, lazy = _OPERATORS[operator]
        # An exploded list repeats the value around its separator, unless the value already takes the separator (+, #).
        explode = exploded and operator not in ("+", "#")

        def value(after: int) -> int:
            if not explode:
                return self._step(_RUN, excluded, lazy, after)
            loop = self._step(_EITHER, -1, after)  # more items first; that branch is set once built
            self._steps[loop] = (_EITHER, self._text(separator, self._step(_RUN, excluded, lazy, loop)), after)
            return self._step(_RUN, excluded, lazy, loop)

        if operator != ";":
            return self._marked(group, value, then)
        empty = self._marked(group + 1, lambda after: after, then)  # `;x` alone when x is empty
        return self._text(name, self._step(_EITHER, self._text("=", self._marked(group, value, then)), empty))

    # -- matching ---------------------------------------------------------------------------------

    def match(self, uri: str) -> dict[str, str] | None:
        """The variables of a matching URI, or None if it does not match."""
        if self._direct is not None:
            found = self._direct.fullmatch(uri)
            slots = None if found is None else [at for span in found.regs[1:] for at in span]
        else:
            slots = _Search(self, uri).run()
        if slots is None:
            return None
        from urllib.parse import parse_qsl, unquote  # first use only: keeps idle memory down

        values: dict[str, str] = {}
        for number, (kind, index) in enumerate(self._groups):
            start, end = slots[2 * number], slots[2 * number + 1]
            if start < 0:  # not in the match: an optional expression left out
                continue
            text = uri[start:end]
            if kind == "e":
                values[self.variables[index]] = ""
            elif kind == "q":  # "+" is a plus sign in a URI, not a space as in a form
                names = {unquote(name): name for name in self._query_vars}  # keys arrive decoded: {?a%41} reads "aA"
                for key, item in parse_qsl(text.replace("+", "%2B"), keep_blank_values=True):
                    if key in names:
                        values[names[key]] = item
            else:
                name = self.variables[index]
                value = unquote(text)
                if name in self._simple and "/" in value:
                    return None  # a plain {var} is one segment: an encoded "/" must not smuggle in a path
                values[name] = value
        return values


class _Search:
    """One URI against one template: a depth-first search for the first match, with its own stack,
    that tries each step at each position of the URI at most once.

    A step that several others lead to (`_joins`) is remembered per position, since a second
    visit can only fail again. A run of characters is decided by where it may end: only where
    the next step can start (`_first_steps`), and only at ends no earlier entry into the same
    stretch of the URI has tried (they all failed, or the search would have stopped).
    """

    def __init__(self, template: UriTemplate, uri: str) -> None:
        self.steps, self.joins, self.first = template._steps, template._joins, template._first
        self.uri = uri
        self.slots = [-1] * (2 * len(template._groups))  # value starts and ends (-1: unset)
        self.stack: list[tuple] = [(_GO, template._start, 0)]
        self.seen: set[int] = set()  # step * (len(uri) + 1) + position, for the join steps
        self.tried: dict[tuple[int, int], int] = {}  # (run step, end of its stretch) → the lowest start tried
        self.breaks: dict[str, list[int]] = {}  # excluded characters → where they occur in the URI

    def run(self) -> list[int] | None:
        """The value slots of the first match, or None."""
        steps, joins, seen, slots, stack, uri = self.steps, self.joins, self.seen, self.slots, self.stack, self.uri
        length = len(uri)
        while stack:
            kind, a, b = stack.pop()
            if kind == _UNDO:
                slots[a] = b
                continue
            if kind == _MORE:
                at = next(a, None)
                if at is None:
                    continue
                stack.append((_MORE, a, b))
                index, position = b, at
            else:
                index, position = a, b
            while True:  # follow one path until it fails or branches (the other branch is stacked)
                if index in joins:
                    key = index * (length + 1) + position
                    if key in seen:
                        break
                    seen.add(key)
                step = steps[index]
                op = step[0]
                if op == _TEXT:
                    if not uri.startswith(step[1], position):
                        break
                    position += len(step[1])
                    index = step[2]
                elif op == _MARK:
                    stack.append((_UNDO, step[1], slots[step[1]]))
                    slots[step[1]] = position
                    index = step[2]
                elif op == _EITHER:
                    stack.append((_GO, step[2], position))
                    index = step[1]
                elif op == _END:
                    if position == length:
                        return slots
                    break
                else:
                    ends = self.run_ends(index, position)
                    if ends is not None:
                        stack.append((_MORE, ends, step[3]))
                    break
        return None

    def run_ends(self, index: int, position: int) -> Iterator[int] | None:
        """Where the run of step `index` entered at `position` may end, in the order to try them.

        Every entry into one stretch of the run's characters may end anywhere up to the
        stretch's end, so an entry at or after an earlier one has nothing left to try, and one
        before it only the ends before it."""
        _, excluded, lazy, then = self.steps[index]
        stretch = self.stretch_end(excluded, position)
        earlier = self.tried.get((index, stretch))
        if earlier is not None and earlier <= position:
            return None
        self.tried[(index, stretch)] = position
        last = stretch if earlier is None else earlier - 1
        starter, may_end = self.first[then]
        ends = [found.start() for found in starter.finditer(self.uri, position, last + 1)] if starter else []
        if may_end and last == len(self.uri):
            ends.append(last)
        return iter(ends) if lazy else reversed(ends)

    def stretch_end(self, excluded: str, position: int) -> int:
        """Where the stretch of characters other than `excluded` that starts at `position` ends.

        Found by bisecting where those characters occur, listed once per match: scanning from
        each entry instead would cost the stretch's length every time."""
        found = self.breaks.get(excluded)
        if found is None:
            found = self.breaks[excluded] = [hit.start() for hit in _any_of(excluded).finditer(self.uri)]
        at = bisect_left(found, position)
        return found[at] if at < len(found) else len(self.uri)


def _direct_pattern(pieces: list) -> re.Pattern[str] | None:
    """A regular expression for a template that splits one way only, else None.

    That is a template of single plain or reserved variables (`users://{id}/profile`,
    `file:///{+path}`), each ending the template or followed by text that starts with a
    character its value cannot hold: the value runs to that character, so the expression
    never backtracks further than one stretch and finds the split `_Search` would, a few
    times faster (the common case pays nothing for the ambiguous ones)."""
    pattern = []
    for index, piece in enumerate(pieces):
        if isinstance(piece, str):
            pattern.append(re.escape(piece))
            continue
        operator, variables, _ = piece
        if operator not in ("", "+") or len(variables) != 1 or (variables[0][1] and operator == ""):
            return None
        excluded = _OPERATORS[operator][2]
        after = pieces[index + 1]  # the text after it: the pieces alternate, text first and last
        ends_the_template = after == "" and index + 2 == len(pieces)
        if not ends_the_template and (after == "" or after[0] not in excluded):
            return None
        pattern.append(f"([^{re.escape(excluded)}]*)")
    return re.compile("".join(pattern))


def _first_steps(steps: list[tuple]) -> list[tuple[re.Pattern[str] | None, bool]]:
    """For each step: a pattern for the characters it can begin by consuming, and whether it can
    reach the end of the URI consuming nothing. A run ends only where its next step can go on.

    Built in order without recursion: compiled right to left, a step comes after the steps it
    leads to, but for a list's way back to its next item, which begins with the separator's text."""
    found: list[tuple[frozenset[str], bool]] = []

    def of(index: int) -> tuple[frozenset[str], bool]:
        step = steps[index]
        return (frozenset({re.escape(step[1][0])}), False) if step[0] == _TEXT else found[index]

    for index, step in enumerate(steps):
        op = step[0]
        if op == _TEXT:
            found.append(of(index))
        elif op == _MARK:
            found.append(of(step[2]))
        elif op == _EITHER:
            (one, one_ends), (other, other_ends) = of(step[1]), of(step[2])
            found.append((one | other, one_ends or other_ends))
        elif op == _END:
            found.append((frozenset(), True))
        else:
            classes, may_end = of(step[3])
            found.append((classes | {f"[^{re.escape(step[1])}]"}, may_end))
    return [((re.compile("|".join(sorted(classes))) if classes else None), may_end) for classes, may_end in found]


def _joins(steps: list[tuple], start: int) -> frozenset[int]:
    """The steps more than one path leads to (the start counts as one): only these are remembered per
    position, since every other step is reached once for each visit of the single step before it."""
    arrivals = [0] * len(steps)
    arrivals[start] += 1
    for step in steps:
        op = step[0]
        if op == _EITHER:
            arrivals[step[1]] += 1
            arrivals[step[2]] += 1
        elif op in (_TEXT, _MARK):
            arrivals[step[2]] += 1
        elif op == _RUN:
            arrivals[step[3]] += 1
    return frozenset(index for index, count in enumerate(arrivals) if count > 1 and steps[index][0] != _RUN)
