"""Matching URIs against RFC 6570 URI templates (levels 1-4, matching only).

`UriTemplate("file:///{+path}").match("file:///a/b.txt")` → `{"path": "a/b.txt"}`.
Each expression becomes a regular expression group, built once; query-style
expressions (`{?x,y}`, `{&z}`) are parsed from the query string so their order
and presence may vary. Values are percent-decoded.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, unquote

_EXPRESSION = re.compile(r"\{([+#./;?&]?)([^}]*)\}")
_VARNAME = re.compile(r"^[A-Za-z0-9_]([A-Za-z0-9_.]|%[0-9A-Fa-f]{2})*$")

# operator → (prefix, separator, value pattern)
_OPERATORS = {
    "": ("", ",", r"[^/?#,&]*"),
    "+": ("", ",", r".*?"),
    "#": ("#", ",", r".*?"),
    ".": (r"\.", r"\.", r"[^/?#.]*"),
    "/": ("/", "/", r"[^/?#]*"),
    ";": (";", ";", r"[^/?#;]*"),
}


class UriTemplate:
    """A compiled URI template; `variables` lists its names in order."""

    def __init__(self, template: str) -> None:
        self.template = template
        self.variables: list[str] = []
        self._query_vars: list[str] = []
        pattern = []
        position = 0
        for expression in _EXPRESSION.finditer(template):
            pattern.append(re.escape(template[position : expression.start()]))
            position = expression.end()
            operator, body = expression.groups()
            names = [self._name(spec) for spec in body.split(",")]
            if operator in ("?", "&"):
                self._query_vars.extend(names)
                pattern.append(r"(?:[?&](?P<_query%d>[^#]*))?" % len(self._query_vars))
                continue
            prefix, separator, value = _OPERATORS[operator]
            exploded = any(spec.endswith("*") for spec in body.split(","))
            groups = []
            for name in names:
                label = f"{re.escape(name)}=" if operator == ";" else ""
                item = f"(?:{value})(?:{separator}(?:{value}))*" if exploded else value
                groups.append(f"{label}(?P<{self._group(name)}>{item})")
            pattern.append(f"(?:{prefix}{separator.join(groups)})" + ("?" if operator in ("#", ";") else ""))
        if "{" in template[position:] or "}" in template[position:]:
            raise ValueError(f"URI template {template!r} has an unbalanced brace")
        pattern.append(re.escape(template[position:]))
        self._regex = re.compile("^" + "".join(pattern) + "$")
        self._groups = {self._group(name): name for name in self.variables}

    def _name(self, spec: str) -> str:
        name = spec.rstrip("*").split(":", 1)[0]
        if not _VARNAME.match(name):
            raise ValueError(f"URI template {self.template!r} has an invalid variable name {spec!r}")
        if name in self.variables:
            raise ValueError(f"URI template {self.template!r} repeats the variable {name!r}")
        self.variables.append(name)
        return name

    @staticmethod
    def _group(name: str) -> str:
        return "v_" + re.sub(r"[^A-Za-z0-9_]", "_", name)

    def match(self, uri: str) -> dict[str, str] | None:
        """The variables of a matching URI, or None if it does not match."""
        found = self._regex.match(uri)
        if found is None:
            return None
        values: dict[str, str] = {}
        for group, text in found.groupdict().items():
            if text is None:
                continue
            if group.startswith("_query"):
                for key, item in parse_qsl(text, keep_blank_values=True):
                    if key in self._query_vars:
                        values[key] = item
            else:
                values[self._groups[group]] = unquote(text)
        return values
