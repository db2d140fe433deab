"""Matching URIs against RFC 6570 URI templates (levels 1-4, matching only).

`UriTemplate("file:///{+path}").match("file:///a/b.txt")` → `{"path": "a/b.txt"}`.
Each expression becomes a regular expression group, built once; query-style
expressions (`{?x,y}`, `{&z}`) are parsed from the query string so their order
and presence may vary. Values are percent-decoded.
"""

from __future__ import annotations

import re

_EXPRESSION = re.compile(r"\{([^{}]*)\}")
_VARCHAR = r"(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2})"
_VARSPEC = re.compile(rf"({_VARCHAR}+(?:\.{_VARCHAR}+)*)(\*|:[1-9][0-9]{{0,3}})?")

# operator → (prefix, separator, value pattern)
_OPERATORS = {
    "": ("", ",", r"[^/?#,&]*?"),  # lazy: `{name}{.ext}` gives the extension to `ext`
    "+": ("", ",", r".*?"),
    "#": ("#", ",", r".*?"),
    ".": (r"\.", r"\.", r"[^/?#.;]*"),  # a reserved character in a value arrives %-encoded (RFC 6570 3.2.5)
    "/": ("/", "/", r"[^/?#;]*"),
    ";": (";", ";", r"[^/?#;]*"),
}


class UriTemplate:
    """A compiled URI template; `variables` lists its names in order."""

    def __init__(self, template: str) -> None:
        self.template = template
        self.variables: list[str] = []
        self._query_vars: list[str] = []
        self._simple: set[str] = set()  # variables of plain {var} expressions: one path segment
        pattern = []
        position = 0
        for expression in _EXPRESSION.finditer(template):
            pattern.append(self._literal(template[position : expression.start()]))
            position = expression.end()
            pattern.append(self._expression(expression.group(1)))
        pattern.append(self._literal(template[position:]))
        self._regex = re.compile("".join(pattern))  # fullmatch: `$` would also match before a final newline

    def _literal(self, text: str) -> str:
        if "{" in text or "}" in text:
            raise ValueError(f"URI template {self.template!r} has an unbalanced brace")
        return re.escape(text)

    def _expression(self, body: str) -> str:
        operator = body[:1] if body[:1] in "+#./;?&" and body else ""
        specs = body[len(operator) :].split(",")
        names = [self._name(spec) for spec in specs]
        if operator in ("?", "&"):
            self._query_vars.extend(names)
            return r"(?:[?&](?P<q%d>[^#]*))?" % len(self.variables)
        prefix, separator, value = _OPERATORS[operator]
        if operator == "":
            self._simple.update(names)
        groups = []
        for spec, name in zip(specs, names):
            index = self.variables.index(name)
            # An exploded list repeats `value` around its separator, unless `value` already
            # matches the separator (+ and #): nesting the two quantifiers would backtrack
            # exponentially on a URI that almost matches.
            explode = spec.endswith("*") and operator not in ("+", "#")
            item = f"(?:{value})(?:{separator}(?:{value}))*" if explode else value
            if operator == ";":  # `;x=1`, or `;x` alone when x is empty (group e: the empty value)
                groups.append(f"{re.escape(name)}(?:=(?P<v{index}>{item})|(?P<e{index}>))")
            else:
                groups.append(f"(?P<v{index}>{item})")
        optional = "" if operator == "" else "?"  # an undefined variable expands to nothing, prefix included
        return f"(?:{prefix}{separator.join(groups)}){optional}"

    def _name(self, spec: str) -> str:
        found = _VARSPEC.fullmatch(spec)
        if found is None:
            raise ValueError(f"URI template {self.template!r} has an invalid variable name {spec!r}")
        name = found.group(1)
        if name in self.variables:
            raise ValueError(f"URI template {self.template!r} repeats the variable {name!r}")
        self.variables.append(name)
        return name

    def match(self, uri: str) -> dict[str, str] | None:
        """The variables of a matching URI, or None if it does not match."""
        found = self._regex.fullmatch(uri)
        if found is None:
            return None
        from urllib.parse import parse_qsl, unquote  # first use only: keeps idle memory down

        values: dict[str, str] = {}
        for group, text in found.groupdict().items():
            if text is None:
                continue
            if group[0] == "e":
                values[self.variables[int(group[1:])]] = ""
            elif group[0] == "q":  # "+" is a plus sign in a URI, not a space as in a form
                names = {unquote(name): name for name in self._query_vars}  # keys arrive decoded: {?a%41} reads "aA"
                for key, item in parse_qsl(text.replace("+", "%2B"), keep_blank_values=True):
                    if key in names:
                        values[names[key]] = item
            else:
                name = self.variables[int(group[1:])]
                value = unquote(text)
                if name in self._simple and "/" in value:
                    return None  # a plain {var} is one segment: an encoded "/" must not smuggle in a path
                values[name] = value
        return values
