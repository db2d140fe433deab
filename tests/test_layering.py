"""Guard rails: the core never imports the transports, and the public surface is pinned."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import mcpcore
from conftest import ROOT

COMPOSITION_ROOTS = ("runner.py", "asgi.py", "testing.py")  # the core modules that may import mcpcore.transports (lazily)


def _imports(path: Path) -> list[str]:
    """Every module an import statement in `path` names, relative ones resolved within mcpcore."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(part for part in ("mcpcore" if node.level else "", node.module or "") if part)
            names += [base] + [f"{base}.{alias.name}" for alias in node.names]  # `from . import transports` too
    return names


def test_no_core_module_but_the_composition_root_imports_the_transports() -> None:
    offenders = {
        path.name: name
        for path in sorted((ROOT / "mcpcore").glob("*.py"))
        if path.name not in COMPOSITION_ROOTS
        for name in _imports(path)
        if name.split(".")[:2] == ["mcpcore", "transports"] or name.split(".")[0] == "transports"
    }
    assert offenders == {}


@pytest.mark.parametrize("root", COMPOSITION_ROOTS)
def test_the_composition_roots_import_the_transports_only_inside_functions(root: str) -> None:
    tree = ast.parse((ROOT / "mcpcore" / root).read_text(encoding="utf-8"))
    top_level = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    assert not [n for n in top_level if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("transports")]


def test_importing_the_public_api_loads_no_transport() -> None:
    probe = "import sys, mcpcore, mcpcore.cli, mcpcore.asgi, mcpcore.testing; print(sorted(m for m in sys.modules if m.startswith('mcpcore.transports')))"
    loaded = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True, cwd=ROOT).stdout
    assert loaded.strip() == "[]"


def test_the_public_api_is_pinned() -> None:
    assert mcpcore.__all__ == [
        "Audio",
        "Call",
        "Context",
        "Elicit",
        "ElicitAnswer",
        "ElicitUrl",
        "EmbeddedResource",
        "Field",
        "Image",
        "InputRequired",
        "InvalidParams",
        "ListRoots",
        "McpError",
        "Message",
        "ResourceLink",
        "ResourceNotFound",
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
