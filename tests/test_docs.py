"""The guide in docs/ stays true: its reference is current, its samples run, its links resolve."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import types
from pathlib import Path

import anyio
import pytest

from conftest import ROOT

DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
# What the site shows from outside docs/, linked into it (symbolic links), so a page's link works on the site
# and on a clone alike: the repository's own files, never copies that could go stale.
LINKED_IN = {"adrs.md": "ADRS.md", "conformance.md": "CONFORMANCE.md", "benchmark-results.md": "benchmarks/RESULTS.md",
             "examples": "examples", "scale.svg": "benchmarks/scale.svg"}
GUIDE = [page for page in PAGES if page.name not in LINKED_IN]  # the pages written as the guide
FENCE = re.compile(r"^```([\w-]*)\n(.*?)^```[ \t]*$", re.M | re.S)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def python_blocks(page: Path) -> list[str]:
    """The ```python blocks of a Markdown file, in order."""
    return [body for language, body in FENCE.findall(page.read_text(encoding="utf-8")) if language == "python"]


def run_page(page: Path) -> dict:
    """Run a page's python blocks in order in one fresh module namespace; return the namespace."""
    module = types.ModuleType(f"docs_{page.stem.replace('-', '_')}")
    sys.modules[module.__name__] = module  # what dataclasses and typing look their module up in
    try:
        for index, block in enumerate(python_blocks(page)):
            # compiled without top-level await: a block that awaits at the top fails here
            exec(compile(block, f"{page.relative_to(ROOT)} (python block {index})", "exec"), module.__dict__)
    finally:
        del sys.modules[module.__name__]
    return module.__dict__


def test_the_reference_is_current() -> None:
    checked = subprocess.run([sys.executable, str(DOCS / "reference.py"), "--check"], cwd=ROOT,
                             capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0, f"{checked.stderr}run: python docs/reference.py"


def test_the_reference_covers_the_public_api() -> None:
    reference = (DOCS / "reference.md").read_text(encoding="utf-8")
    import mcpcore
    for name in mcpcore.__all__:
        assert f"`{name}" in reference, name
    for heading in ("## mcpcore.testing", "## mcpcore.routes", "## mcpcore.auth", "## mcpcore.oauth",
                    "## mcpcore.middleware", "## mcpcore.asgi"):
        assert f"\n{heading}\n" in reference, heading
    assert "#### `Server.custom_route(path: str, *, methods: Sequence[str] = ('GET',), public: bool = False)" in reference
    assert " at 0x" not in reference  # no object addresses: the output is the same on every run


def test_every_page_is_in_the_mkdocs_nav() -> None:
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert "docs_dir: docs" in config and "theme: readthedocs" in config
    listed = re.findall(r"^  - [^:\n]+: (\S+\.md)$", config, re.M)
    assert sorted(listed) == [page.name for page in PAGES]


@pytest.mark.parametrize("page", GUIDE, ids=lambda page: page.name)
def test_every_python_sample_runs(page: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"{page.name}: a sample opened a network connection")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket.socket, "connect_ex", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    run_page(page)


def test_the_testing_pages_example_tests_pass() -> None:
    namespace = run_page(DOCS / "testing.md")
    anyio.run(namespace["test_greet"])
    namespace["test_without_an_event_loop"]()
    anyio.run(run_page(DOCS / "tasks.md")["test_build_report"])


def slug(heading: str) -> str:
    """The anchor GitHub (and MkDocs) give a heading."""
    text = heading.replace("`", "").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6} (.+)$", text, re.M):
        anchor, n = slug(heading), 0
        while (anchor if n == 0 else f"{anchor}-{n}") in found:
            n += 1
        found.add(anchor if n == 0 else f"{anchor}-{n}")
    return found


@pytest.mark.parametrize("page", [ROOT / "README.md", *PAGES], ids=lambda page: page.name)
def test_every_relative_link_resolves(page: Path) -> None:
    text = re.sub(r"`[^`\n]*`", "", FENCE.sub("", page.read_text(encoding="utf-8")))  # links, not code
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):
            continue  # https:, mailto: ...
        path, _, fragment = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(target)
        elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
            broken.append(target)
    assert not broken, f"{page.name}: {broken}"


def site_links(page: Path) -> list[str]:
    """The relative link targets of a Markdown page, without their #fragment (code spans and blocks left out)."""
    text = re.sub(r"`[^`\n]*`", "", FENCE.sub("", page.read_text(encoding="utf-8")))
    return [target.partition("#")[0] for target in LINK.findall(text)
            if not re.match(r"[a-z][a-z0-9+.-]*:", target) and not target.startswith("#")]


def test_the_files_linked_into_docs_are_the_repositorys_own() -> None:
    for name, source in LINKED_IN.items():
        assert (DOCS / name).samefile(ROOT / source), f"docs/{name} is not {source}: link it (ln -s), do not copy it"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_no_docs_link_leaves_the_site(page: Path) -> None:
    """The site holds docs/ only, less what mkdocs.yml excludes, and serves no folder: a link to anything else
    works on a clone and 404s on the site."""
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = set(re.findall(r"^  - [^:\n]+: (\S+\.md)$", config, re.M))
    excluded = re.search(r"^exclude_docs: \|\n((?:  .+\n)+)", config, re.M).group(1).split()
    leaving = []
    for path in site_links(page):
        target = Path(os.path.normpath(page.parent / path))  # as the site sees it: symbolic links not followed
        inside = target.relative_to(DOCS).as_posix() if target.is_relative_to(DOCS) else None
        if inside is None or target.is_dir() or any(inside.startswith(pattern.rstrip("/")) for pattern in excluded):
            leaving.append(path)
        elif target.parent == DOCS and target.suffix == ".md" and inside not in nav:
            leaving.append(path)  # a page of the guide must be in the nav to be found
    assert not leaving, f"{page.name} links out of the site: {leaving} (link a file into docs/, see mkdocs.yml)"


def prose_lines(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return {line.strip() for line in text.splitlines() if len(line.strip()) >= 40 and not line.startswith("#")}


def test_the_readme_and_the_guide_share_no_text() -> None:
    readme = prose_lines(ROOT / "README.md")
    for page in GUIDE:
        shared = readme & prose_lines(page)
        assert not shared, f"{page.name} repeats the README: {sorted(shared)}"


def test_the_readme_keeps_its_example_and_links_every_page() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(python_blocks(ROOT / "README.md")) == 1
    for page in GUIDE:
        assert f"(docs/{page.name})" in readme, page.name


def test_the_guides_own_examples_answer_as_their_text_says() -> None:
    from mcpcore import McpError
    from mcpcore.testing import Client

    async def check() -> None:
        async with Client(run_page(DOCS / "tools.md")["server"], strict=True) as client:
            assert (await client.call_tool("stock", {"item": "apple", "at_least": "2"})).structured == \
                {"item": "apple", "available": True}
            missing = await client.call_tool("stock", {"item": "kiwi"})
            assert missing.is_error and missing.text == "No item 'kiwi'; try one of ['apple', 'pear']"
            await client.call_tool("add_to_cart", {"item": "apple"})
            cart = (await client.call_tool("add_to_cart", {"item": "pear"})).result["content"]
            assert [block["text"] for block in cart] == ["apple", "pear"]  # the client's state, kept between calls
        async with Client(run_page(DOCS / "tools.md")["weather"], strict=True) as client:  # the icons section
            assert [icon["theme"] for icon in (await client.list_tools())[0]["icons"]] == ["light", "dark"]
        async with Client(run_page(DOCS / "tools.md")["mail"]) as client:  # idempotent tools
            first = await client.call_tool("send_mail", {"to": "ann", "body": "hi"})
            again = await client.call_tool("send_mail", {"to": "ann", "body": "hi"})
            assert first.text == again.text == "message 1 sent to ann"
        async with Client(run_page(DOCS / "resources-and-prompts.md")["server"], strict=True) as client:
            assert (await client.read_resource("notes://note/2"))[0]["text"] == "Call Ada"
            with pytest.raises(McpError, match="must be int"):
                await client.read_resource("notes://note/two")
            assert len((await client.get_prompt("summarize", {"number": "1"}))["messages"]) == 2
            with pytest.raises(McpError, match="^Invalid arguments for prompt 'summarize': number: expected integer"):
                await client.get_prompt("summarize", {"number": "one"})
            assert await client.complete(prompt="summarize", argument="number", value="2") == ["2"]
            assert await client.complete(resource="notes://note/{number}", argument="number", value="") == ["1", "2"]
            assert await client.complete({"type": "ref/prompt", "name": "summarize"}, "number", "1") == ["1"]

    anyio.run(check)


@pytest.mark.anyio
@pytest.mark.usefixtures("http_flavour")
async def test_the_extensions_pages_example_answers_as_its_text_says() -> None:
    """docs/extensions.md: the announcement, the cut to maxLength, -32021 before the handler, result fields for
    declaring clients only, and Mcp-Name required and compared over HTTP (-32020)."""
    from conftest import meta, request
    from http_client import HttpClient, mcp_headers, running
    from mcpcore import McpError
    from mcpcore.testing import Client

    server = run_page(DOCS / "extensions.md")["server"]

    @server.tool
    def pair() -> list:
        return ["a", "b"]  # two content items

    declaring = {"com.example/echo": {}}
    async with Client(server, strict=True, extensions=declaring) as client:
        assert (await client.discover())["capabilities"]["extensions"] == {"com.example/echo": {"maxLength": 10}}
        assert (await client.request("com.example/echo/say", {"word": "a-very-long-word"})).result["said"] == "a-very-lon"
        assert (await client.call_tool("pair")).result["contentItems"] == 2
    async with Client(server, strict=True) as client:
        with pytest.raises(McpError) as refused:
            await client.request("com.example/echo/say", {"word": "hi"})
        assert refused.value.code == -32021 and refused.value.data["requiredCapabilities"] == {"extensions": declaring}
        assert "contentItems" not in (await client.call_tool("pair")).result
    say = request("com.example/echo/say", 1, word="hi",
                  _meta=meta(**{"io.modelcontextprotocol/clientCapabilities": {"extensions": declaring}}))
    async with running(server) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(20):
            missing = await client.post(say)
            differing = await client.post(say, mcp_headers(say, **{"mcp-name": "ho"}))
            named = await client.post(say, mcp_headers(say, **{"mcp-name": "hi"}))
    assert [reply.json.get("error", {}).get("code") for reply in (missing, differing)] == [-32020, -32020]
    assert named.status == 200 and named.json["result"]["said"] == "hi"


def test_the_testing_page_names_every_option_of_the_test_client() -> None:
    """A test of a `Depends` factory or of per-client state needs `principal=`: no option is left for the
    reader to find in the source."""
    import inspect

    from mcpcore.client import Client

    options = [name for name, parameter in inspect.signature(Client.__init__).parameters.items()
               if parameter.kind is parameter.KEYWORD_ONLY and not name.startswith("_")]
    text = (DOCS / "testing.md").read_text(encoding="utf-8")
    assert "principal" in options and [name for name in options if f"`{name}=" not in text] == []
