"""Guard rails: the layers of the package, the public surface, and the transports kept out of the core.

Every module of `mcpcore` (and of `transports/`, installed as `mcpcore.transports`)
belongs to one layer of `LAYERS`; an import statement (at the top, inside a function
or under `TYPE_CHECKING` alike) may name only a module of its own layer or of one
below, and the modules import each other in no circle. docs/layers.md draws the same
table.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import mcpcore
from conftest import ROOT

# Bottom first. "pkg.*" is a package and everything in it; any other entry is one module.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("wire", ("mcpcore._wire.*", "mcpcore.auth", "mcpcore.taskstore", "mcpcore.frontmatter")),
    ("runtime", ("mcpcore._runtime.*", "mcpcore.routes", "mcpcore.middleware", "mcpcore.logs")),
    ("app", ("mcpcore._app.*",)),
    ("extensions", ("mcpcore.tasks", "mcpcore.extensions", "mcpcore.apps")),
    ("serving", ("mcpcore._serving.*",)),
    ("package", ("mcpcore",)),
    ("transports", ("mcpcore.transports.*",)),
    ("faces", ("mcpcore._gateway.*", "mcpcore.asgi", "mcpcore.client", "mcpcore.gateway", "mcpcore.testing", "mcpcore.pytest_plugin", "mcpcore.oauth", "mcpcore.skills",
               "mcpcore.redisstate", "mcpcore.fleetlimits", "mcpcore.tracing")),
    ("command line", ("mcpcore._cli.*", "mcpcore.__main__")),
)
# The one import that runs up: `Server.run()` starts the command line's runner (inside the method).
ENTRY_POINTS = {("mcpcore._serving.server", "mcpcore._cli.runner")}
# What `ls mcpcore/` shows: the modules a user imports, each documented (docs/reference.md or the guide).
PUBLIC = {"__init__", "__main__", "apps", "asgi", "auth", "client", "extensions", "fleetlimits", "gateway", "frontmatter", "logs", "middleware", "oauth",
          "pytest_plugin", "redisstate", "routes", "skills", "tasks", "taskstore", "testing", "tracing"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[0] == "transports":
        parts.insert(0, "mcpcore")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {
    _module_name(path): path
    for folder in ("mcpcore", "transports")
    for path in sorted((ROOT / folder).rglob("*.py"))
    if "__pycache__" not in path.parts
}


def _layer(module: str) -> int:
    """The index in LAYERS of the layer `module` belongs to (the most specific entry wins)."""
    found: list[tuple[int, int]] = []
    for index, (_, members) in enumerate(LAYERS):
        for member in members:
            if member.endswith(".*") and (module == member[:-2] or module.startswith(member[:-1])):
                found.append((len(member), index))
            elif module == member:
                found.append((len(member) + 1, index))
    assert found, f"{module} belongs to no layer: add it to LAYERS in tests/test_layering.py and docs/layers.md"
    return max(found)[1]


def _imports(module: str) -> list[tuple[str, str]]:
    """Every module of this package an import statement in `module` names, and where the statement stands:
    "top" (runs on import), "function" (runs when called) or "typing" (under `if TYPE_CHECKING:`)."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    where: dict[int, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            where.update((id(inner), "function") for inner in ast.walk(node) if inner is not node)
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            where.update((id(inner), "typing") for inner in ast.walk(node) if inner is not node)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + [node.module or ""]).strip(".")
            else:
                base = node.module or ""
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]  # `from . import defaults` names a module
        else:
            continue
        found += [(name, where.get(id(node), "top")) for name in names if name in MODULES]
    return found


GRAPH = {module: sorted({name for name, _ in _imports(module)} - {module}) for module in MODULES}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_module_has_a_layer(module: str) -> None:
    assert 0 <= _layer(module) < len(LAYERS)


def test_no_import_runs_up_a_layer() -> None:
    upward = [
        f"{module} ({LAYERS[_layer(module)][0]}) imports {name} ({LAYERS[_layer(name)][0]})"
        for module in MODULES
        for name in GRAPH[module]
        if _layer(name) > _layer(module) and (module, name) not in ENTRY_POINTS
    ]
    assert upward == []


def test_the_entry_points_import_up_only_inside_a_function() -> None:
    for module, name in ENTRY_POINTS:
        assert {where for imported, where in _imports(module) if imported == name} == {"function"}


def test_no_modules_import_each_other_in_a_circle() -> None:
    """Typing-only imports too: where a lower module needs a higher one's shape, it names a protocol."""
    edges = {module: [name for name in GRAPH[module] if (module, name) not in ENTRY_POINTS] for module in MODULES}
    state: dict[str, str] = {}
    circles: list[list[str]] = []

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for name in edges[module]:
            if state.get(name) == "open":
                circles.append(path[path.index(name):] + [name])
            elif name not in state:
                visit(name, path + [name])
        state[module] = "done"

    for module in sorted(MODULES):
        if module not in state:
            visit(module, [module])
    assert circles == []


def _shown(member: str) -> str:
    """How docs/layers.md names a LAYERS entry: a package by its folder, a module by its name."""
    if member == "mcpcore":
        return "mcpcore/__init__.py"
    if member.endswith(".*"):
        return member[:-2].replace("mcpcore.transports", "transports").replace(".", "/") + "/"
    return member.rpartition(".")[2]


def test_the_picture_in_the_docs_shows_these_layers() -> None:
    """docs/layers.md draws LAYERS: a row a layer, the top first, each with the modules and packages in it."""
    picture = (ROOT / "docs" / "layers.md").read_text(encoding="utf-8").split("```")[1]
    rows = [row.strip("\n") for row in picture.split("\n ─") if row.strip("\n ")]
    rows = [row[row.index("\n") + 1:] if row.startswith("─") else row for row in rows]  # the rest of a rule line
    assert [row.split("  ")[0].strip() for row in rows] == [name for name, _ in reversed(LAYERS)]
    for row, (_, members) in zip(rows, reversed(LAYERS)):
        assert [member for member in members if _shown(member) not in row] == []


def test_the_listing_is_the_public_api() -> None:
    """`ls mcpcore/` shows what a user imports; everything else sits in a private (underscored) layer package."""
    top = {path.stem for path in (ROOT / "mcpcore").glob("*.py")}
    assert top == PUBLIC
    packages = {path.name for path in (ROOT / "mcpcore").iterdir() if path.is_dir() and path.name != "__pycache__"}
    assert all(name.startswith("_") for name in packages)
    for package in packages:  # each layer package says what it is for
        assert ast.get_docstring(ast.parse(MODULES[f"mcpcore.{package}"].read_text(encoding="utf-8"))), package


def test_transports_own_their_modules_and_share_the_rest() -> None:
    """What the built-in server and the ASGI adapter share (`_http`) is theirs alone: no other module,
    in the transports or the core, imports it; and no transport imports another."""
    users_of_http = {module for module in MODULES if not module.startswith("mcpcore.transports._http")
                     and any(name.startswith("mcpcore.transports._http") for name in GRAPH[module])}
    assert users_of_http == {"mcpcore.transports.http", "mcpcore.transports.asgi"}
    transports = {"mcpcore.transports.http", "mcpcore.transports.asgi", "mcpcore.transports.stdio"}
    assert [(module, name) for module in transports for name in GRAPH[module] if name in transports] == []


def test_outside_the_transports_they_are_imported_only_inside_functions() -> None:
    """`import mcpcore` (and any public module) loads no I/O: whoever starts a transport imports it when it does."""
    eager = [
        (module, name)
        for module in MODULES
        if not module.startswith("mcpcore.transports")
        for name, inside in _imports(module)
        if name.startswith("mcpcore.transports") and not inside
    ]
    assert eager == []


def test_importing_the_public_api_loads_no_transport() -> None:
    probe = ("import sys, mcpcore, mcpcore._cli.main, mcpcore.asgi, mcpcore.testing; "
             "print(sorted(m for m in sys.modules if m.startswith('mcpcore.transports')))")
    loaded = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True, cwd=ROOT).stdout
    assert loaded.strip() == "[]"


def test_the_public_api_is_pinned() -> None:
    assert mcpcore.__all__ == [
        "Audio",
        "Call",
        "ClientState",
        "ClientStateFull",
        "ClientStateLimits",
        "Context",
        "Depends",
        "Elicit",
        "ElicitAnswer",
        "ElicitUrl",
        "EmbeddedResource",
        "Field",
        "Icon",
        "IdempotencyLimits",
        "Image",
        "InputRequired",
        "InvalidParams",
        "ListRoots",
        "McpError",
        "Message",
        "ResourceLink",
        "ResourceNotFound",
        "ResultBudget",
        "ResultStoreLimits",
        "Root",
        "Sample",
        "SampleAnswer",
        "Server",
        "ToolError",
        "ToolResult",
        "Writer",
        "__version__",
    ]
    assert all(hasattr(mcpcore, name) for name in mcpcore.__all__)
