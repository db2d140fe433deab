"""The Skills extension (SEP-2640): skills loaded from disk or code, listed, fetched, read and walked."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from conftest import ROOT, request
from mcpcore import Context, McpError, Server
from mcpcore.skills import EXTENSION, MAX_BYTES, MAX_FILES, SkillError, Skills
from mcpcore.testing import Client
from memory import error_of

pytestmark = pytest.mark.anyio

EXAMPLES = ROOT / "examples" / "skills"
EVERYTHING = ROOT / "examples" / "everything_server.py"


def skill_md(name: str, description: str = "Does a thing.", extra: str = "") -> str:
    return f"---\nname: {name}\ndescription: {description}\n{extra}---\n\n# {name}\n"


def write(root: Path, files: dict[str, str | bytes]) -> Path:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
    return root


def served(root: Path, **options: Any) -> Server:
    server = Server("skills", **options)
    Skills(server).add_directory(root)
    return server


def digest(data: bytes) -> dict[str, Any]:
    return {"digest": "sha256:" + hashlib.sha256(data).hexdigest(), "size": len(data)}


async def listed(client: Client) -> list[dict[str, Any]]:
    entries, cursor = [], None
    while True:
        result = (await client.request("skills/list", {"cursor": cursor} if cursor else {})).result
        entries += result["skills"]
        cursor = result.get("nextCursor")
        if cursor is None:
            return entries


@pytest.fixture
def library(tmp_path: Path) -> Path:
    return write(tmp_path / "skills", {
        "pdf-processing/SKILL.md": skill_md("pdf-processing", extra="license: MIT\nmetadata:\n  version: 2.1.0\n"),
        "pdf-processing/templates/invoice.md": "# Invoice\n",
        "pdf-processing/templates/regional/eu-invoice.md": "# EU invoice\n",
        "pdf-processing/scripts/extract.bin": b"\xff\xfe\x00binary",
        "acme/billing/refunds/SKILL.md": skill_md("refunds", "Refund per policy."),
        "README.md": "Not in any skill.\n",
    })


# -- listing, fetching, reading -------------------------------------------------


async def test_discover_declares_the_extension_with_directory_read_and_the_resources_capability(library: Path) -> None:
    async with Client(served(library), strict=True) as client:
        capabilities = (await client.discover())["capabilities"]
    assert capabilities["extensions"] == {EXTENSION: {"directoryRead": True}}
    assert "resources" in capabilities


async def test_a_server_with_no_skill_loaded_still_declares_and_serves_resources(tmp_path: Path) -> None:
    """The suite's sep-2640-capability-requires-resources: declaring the extension commits to resources/read."""
    async with Client(served(tmp_path), strict=True) as client:
        capabilities = (await client.discover())["capabilities"]
        assert await client.list_resources() == []
        assert (await client.request("skills/list")).result["skills"] == []
    assert EXTENSION in capabilities["extensions"] and "resources" in capabilities


async def test_skills_list_carries_verbatim_front_matter_and_a_complete_digested_manifest(library: Path) -> None:
    async with Client(served(library), strict=True) as client:
        result = (await client.request("skills/list")).result
    assert (result["ttlMs"], result["cacheScope"]) == (0, "private")
    refunds, pdf = result["skills"]  # directories in name order: acme/ before pdf-processing/
    assert refunds["uri"] == "skill://acme/billing/refunds/SKILL.md"
    assert pdf["frontmatter"] == {"name": "pdf-processing", "description": "Does a thing.", "license": "MIT",
                                  "metadata": {"version": "2.1.0"}}
    files = ["SKILL.md", "scripts/extract.bin", "templates/invoice.md", "templates/regional/eu-invoice.md"]
    assert pdf["resources"] == [{"uri": f"skill://pdf-processing/{name}", **digest((library / "pdf-processing" / name).read_bytes())}
                                for name in files]


async def test_skill_md_is_listed_named_and_described_by_its_front_matter_and_read_as_markdown(library: Path) -> None:
    async with Client(served(library), strict=True) as client:
        resources = {r["uri"]: r for r in await client.list_resources()}
        contents = await client.read_resource("skill://pdf-processing/SKILL.md")
    text = (library / "pdf-processing" / "SKILL.md").read_text()
    assert resources["skill://pdf-processing/SKILL.md"] == {
        "uri": "skill://pdf-processing/SKILL.md", "name": "pdf-processing", "description": "Does a thing.",
        "mimeType": "text/markdown", "size": len(text.encode())}
    assert contents == [{"uri": "skill://pdf-processing/SKILL.md", "mimeType": "text/markdown", "text": text}]
    assert "skill://README.md" not in resources and not any("README" in uri for uri in resources)


async def test_a_file_that_is_not_utf8_is_read_as_a_blob_of_the_digested_bytes(library: Path) -> None:
    import base64

    async with Client(served(library), strict=True) as client:
        [content] = await client.read_resource("skill://pdf-processing/scripts/extract.bin")
    assert content["mimeType"] == "application/octet-stream"
    assert base64.b64decode(content["blob"]) == b"\xff\xfe\x00binary"


async def test_skills_get_returns_the_listed_entry_without_a_cursor(library: Path) -> None:
    async with Client(served(library), strict=True) as client:
        [first, *_] = await listed(client)
        result = (await client.request("skills/get", {"uri": first["uri"]})).result
    assert result["skill"] == first
    assert "nextCursor" not in result and (result["ttlMs"], result["cacheScope"]) == (0, "private")


@pytest.mark.parametrize("uri", ["skill://nope/SKILL.md", "skill://pdf-processing", "skill://pdf-processing/templates/invoice.md"])
async def test_skills_get_answers_32602_for_a_uri_that_is_no_skill(library: Path, uri: str) -> None:
    error = await error_of(served(library), request("skills/get", uri=uri))
    assert error["code"] == -32602 and error["data"] == {"uri": uri}


async def test_skills_get_without_a_string_uri_is_32602(library: Path) -> None:
    error = await error_of(served(library), request("skills/get", uri=7))
    assert error["code"] == -32602 and 'needs a string "uri"' in error["message"]


@pytest.mark.parametrize("uri", ["skill://pdf-processing/../acme/billing/refunds/SKILL.md", "skill://pdf-processing/SKILL.md/..",
                                 "skill://pdf-processing/%2e%2e/README.md", "skill://README.md"])
async def test_a_read_outside_the_loaded_files_is_an_unknown_resource(library: Path, uri: str) -> None:
    error = await error_of(served(library), request("resources/read", uri=uri))
    assert error["code"] == -32602 and error["data"] == {"uri": uri}


async def test_skills_list_pages_at_the_server_page_size_without_splitting_an_entry(tmp_path: Path) -> None:
    root = write(tmp_path, {f"skill-{n}/SKILL.md": skill_md(f"skill-{n}") for n in range(5)})
    async with Client(served(root, page_size=2), strict=True) as client:
        first = (await client.request("skills/list")).result
        entries = await listed(client)
    assert len(first["skills"]) == 2 and first["nextCursor"]
    assert [e["uri"] for e in entries] == [f"skill://skill-{n}/SKILL.md" for n in range(5)]


@pytest.mark.parametrize("cursor", ["garbage", "bzEw", 5])  # bzEw is offset 10, past the end
async def test_a_cursor_not_from_this_list_is_32602(tmp_path: Path, cursor: Any) -> None:
    root = write(tmp_path, {"one/SKILL.md": skill_md("one")})
    error = await error_of(served(root), request("skills/list", cursor=cursor))
    assert error["code"] == -32602


async def test_the_methods_serve_clients_that_did_not_declare_the_extension(library: Path) -> None:
    async with Client(served(library), strict=True, extensions={}) as client:
        assert (await client.request("skills/list")).result["skills"]


async def test_the_2025_wire_reads_skill_files_but_has_no_skills_methods(library: Path) -> None:
    async with Client(served(library), era="2025-11-25", strict=True) as client:
        assert (await client.read_resource("skill://acme/billing/refunds/SKILL.md"))[0]["mimeType"] == "text/markdown"
        with pytest.raises(McpError) as refused:
            await client.request("skills/list")
    assert refused.value.code == -32601


# -- resources/directory/read ------------------------------------------------------


async def test_a_directory_lists_its_direct_children_with_subdirectories_as_inode_directory(library: Path) -> None:
    async with Client(served(library), strict=True) as client:
        root = (await client.request("resources/directory/read", {"uri": "skill://pdf-processing"})).result
        templates = (await client.request("resources/directory/read", {"uri": "skill://pdf-processing/templates"})).result
    assert [(r["uri"], r.get("mimeType")) for r in root["resources"]] == [
        ("skill://pdf-processing/SKILL.md", "text/markdown"),
        ("skill://pdf-processing/scripts", "inode/directory"),
        ("skill://pdf-processing/templates", "inode/directory"),
    ]
    assert templates["resources"] == [
        {"uri": "skill://pdf-processing/templates/invoice.md", "name": "invoice.md", "mimeType": "text/markdown", "size": 10},
        {"uri": "skill://pdf-processing/templates/regional", "name": "regional", "mimeType": "inode/directory"},
    ]


async def test_the_directories_above_a_skill_are_directories_too(library: Path) -> None:
    async with Client(served(library), strict=True) as client:
        top = (await client.request("resources/directory/read", {"uri": "skill://acme"})).result["resources"]
        below = (await client.request("resources/directory/read", {"uri": "skill://acme/billing"})).result["resources"]
    assert top == [{"uri": "skill://acme/billing", "name": "billing", "mimeType": "inode/directory"}]
    assert below == [{"uri": "skill://acme/billing/refunds", "name": "refunds", "mimeType": "inode/directory"}]


async def test_an_empty_directory_in_a_skill_lists_no_children(library: Path) -> None:
    (library / "pdf-processing" / "empty").mkdir()
    async with Client(served(library), strict=True) as client:
        result = (await client.request("resources/directory/read", {"uri": "skill://pdf-processing/empty"})).result
    assert result["resources"] == []


@pytest.mark.parametrize("uri", ["skill://pdf-processing/SKILL.md", "skill://pdf-processing/templates/", "skill://nowhere", "skill://"])
async def test_directory_read_of_anything_but_a_directory_is_32602(library: Path, uri: str) -> None:
    error = await error_of(served(library), request("resources/directory/read", uri=uri))
    assert error["code"] == -32602 and error["data"] == {"uri": uri}


async def test_directory_read_pages_like_resources_list(tmp_path: Path) -> None:
    root = write(tmp_path, {"big/SKILL.md": skill_md("big"), **{f"big/f{n}.txt": "x" for n in range(4)}})
    async with Client(served(root, page_size=2), strict=True) as client:
        first = (await client.request("resources/directory/read", {"uri": "skill://big"})).result
        rest = (await client.request("resources/directory/read", {"uri": "skill://big", "cursor": first["nextCursor"]})).result
        last = (await client.request("resources/directory/read", {"uri": "skill://big", "cursor": rest["nextCursor"]})).result
    names = [r["name"] for page in (first, rest, last) for r in page["resources"]]
    assert names == ["big", "f0.txt", "f1.txt", "f2.txt", "f3.txt"] and "nextCursor" not in last


# -- skills from code ---------------------------------------------------------------


async def test_a_skill_from_code_is_served_at_its_path_with_its_files() -> None:
    server = Server("code")
    skills = Skills(server)
    markdown = skill_md("refunds")
    uri = skills.add("acme/billing/refunds", markdown, files={"examples/email.md": "Dear customer,\n", "logo.png": b"\x89PNG"})
    assert uri == "skill://acme/billing/refunds/SKILL.md"
    async with Client(server, strict=True) as client:
        [entry] = await listed(client)
        email = await client.read_resource("skill://acme/billing/refunds/examples/email.md")
        logo = {r["uri"]: r for r in await client.list_resources()}["skill://acme/billing/refunds/logo.png"]
    assert entry["resources"] == [
        {"uri": uri, **digest(markdown.encode())},
        {"uri": "skill://acme/billing/refunds/examples/email.md", **digest(b"Dear customer,\n")},
        {"uri": "skill://acme/billing/refunds/logo.png", **digest(b"\x89PNG")},
    ]
    assert email[0]["text"] == "Dear customer,\n" and logo["mimeType"] == "image/png"


async def test_a_generated_file_makes_the_manifest_dynamic_and_runs_at_each_read() -> None:
    server = Server("code")
    reads: list[str] = []

    def today(ctx: Context) -> str:
        reads.append(ctx.request_id)
        return f"read {len(reads)}"

    Skills(server).add("daily", skill_md("daily"), files={"today.md": today})
    async with Client(server, strict=True) as client:
        [entry] = await listed(client)
        first = await client.read_resource("skill://daily/today.md")
        second = await client.read_resource("skill://daily/today.md")
        listing = {r["uri"]: r for r in await client.list_resources()}["skill://daily/today.md"]
    assert entry["resources"] == "dynamic"
    assert (first[0]["text"], second[0]["text"]) == ("read 1", "read 2")
    assert "size" not in listing and listing["mimeType"] == "text/markdown"


@pytest.mark.parametrize("files, fragment", [
    ({"../escape.md": "x"}, "relative path inside the skill"),
    ({"a//b.md": "x"}, "relative path inside the skill"),
    ({"/abs.md": "x"}, "relative path inside the skill"),
    ({"./here.md": "x"}, "relative path inside the skill"),
    ({"SKILL.md": "x"}, "is the markdown argument"),
    ({"needs.md": lambda city: city}, "takes no arguments"),
])
def test_a_file_path_or_function_from_code_that_cannot_be_served_is_refused(files: dict[str, Any], fragment: str) -> None:
    with pytest.raises(SkillError, match=fragment):
        Skills(Server("code")).add("demo", skill_md("demo"), files=files)


# -- what is refused at load, and nothing half-loaded ----------------------------------


@pytest.mark.parametrize("path, name, fragment", [
    ("Demo", "Demo", "breaks the Agent Skills rules"),
    ("a--b", "a--b", "breaks the Agent Skills rules"),
    ("-demo", "-demo", "breaks the Agent Skills rules"),
    ("demo-", "demo-", "breaks the Agent Skills rules"),
    ("x" * 65, "x" * 65, "breaks the Agent Skills rules"),
    ("demo", "other", "must equal the skill's directory name 'demo'"),
    ("my team/demo", "demo", "'my team' is not the URI authority"),
    ("", "demo", "'' is not the URI authority"),
    ("acme/my team/demo", "demo", "'my team' is not a URI path segment"),
    ("acme/../demo", "demo", "'..' is not a URI path segment"),
])
def test_names_and_paths_outside_the_rules_are_refused(path: str, name: str, fragment: str) -> None:
    with pytest.raises(SkillError) as refused:
        Skills(Server("code")).add(path, skill_md(name))
    assert fragment in str(refused.value)


@pytest.mark.parametrize("path, fragment", [
    ("my team/demo", "'my team' is not the URI authority"),
    ("acme/my team/demo", "'my team' is not a URI path segment"),
    ("équipe/demo", "'équipe' is not the URI authority"),
])
def test_directories_on_disk_follow_the_same_path_rules_as_skills_from_code(tmp_path: Path, path: str, fragment: str) -> None:
    """Not percent-encoded into a URI that a skill from code could not have."""
    root = write(tmp_path, {f"{path}/SKILL.md": skill_md("demo")})
    with pytest.raises(SkillError, match=fragment):
        served(root)


@pytest.mark.parametrize("markdown, fragment", [
    ("# no front matter\n", "must begin with YAML front matter"),
    ("---\nname: demo\n---\n", "description must be text of 1 to 1024 characters"),
    (skill_md("demo", "x" * 1025), "description must be text of 1 to 1024 characters"),
    ("---\nname: demo\ndescription: [a]\n---\n", "SKILL.md line 3: flow collections"),
])
def test_front_matter_errors_name_the_skill_file(markdown: str, fragment: str) -> None:
    with pytest.raises(SkillError) as refused:
        Skills(Server("code")).add("demo", markdown)
    assert str(refused.value).startswith("skill://demo/SKILL.md: ") and fragment in str(refused.value)


def test_a_skill_on_disk_with_a_huge_integer_in_its_front_matter_is_refused_naming_the_file_and_line(tmp_path: Path) -> None:
    root = write(tmp_path, {"demo/SKILL.md": "---\nname: demo\ndescription: x\nsize: " + "9" * 5000 + "\n---\n"})
    with pytest.raises(SkillError, match=r"^skill://demo/SKILL.md: SKILL.md line 4: 9{24}\.\.\. is too large to survive JSON"):
        served(root)


def test_more_files_than_the_limit_are_refused() -> None:
    files = {f"f{n}.txt": "x" for n in range(MAX_FILES)}  # with SKILL.md: one too many
    with pytest.raises(SkillError, match=f"more than {MAX_FILES} files"):
        Skills(Server("code")).add("demo", skill_md("demo"), files=files)


def test_more_bytes_than_the_limit_are_refused() -> None:
    half = b"x" * (MAX_BYTES // 2)
    with pytest.raises(SkillError, match="more than 16777216 bytes"):
        Skills(Server("code")).add("demo", skill_md("demo"), files={"a.bin": half, "b.bin": half})


def test_a_file_too_large_for_any_skill_is_refused_before_it_is_read(tmp_path: Path) -> None:
    root = write(tmp_path, {"demo/SKILL.md": skill_md("demo")})
    with (root / "demo" / "huge.bin").open("wb") as huge:
        huge.truncate(MAX_BYTES + 1)  # sparse: nothing is written, its size is what counts
    with pytest.raises(SkillError, match="huge.bin: more than"):
        served(root)


def test_a_skill_already_served_is_refused_and_a_failed_load_registers_nothing(tmp_path: Path) -> None:
    server = Server("twice")
    skills = Skills(server)
    skills.add("demo", skill_md("demo"))
    with pytest.raises(SkillError, match="already served: skill://demo/SKILL.md"):
        skills.add("demo", skill_md("demo"))
    root = write(tmp_path, {"good/SKILL.md": skill_md("good"), "bad/SKILL.md": skill_md("wrong-name")})
    with pytest.raises(SkillError, match="wrong-name"):
        skills.add_directory(root)
    assert [r.key for r in server.resources] == ["skill://demo/SKILL.md"]


def test_a_root_that_is_itself_a_skill_or_no_directory_is_refused(tmp_path: Path) -> None:
    root = write(tmp_path / "demo", {"SKILL.md": skill_md("demo")})
    with pytest.raises(SkillError, match="is itself a skill: pass the directory that holds it"):
        served(root)
    with pytest.raises(SkillError, match="not a directory"):
        served(tmp_path / "missing")


def test_a_second_skills_for_one_server_is_refused() -> None:
    server = Server("once")
    Skills(server)
    with pytest.raises(ValueError, match="already declared"):
        Skills(server)


def test_only_the_skills_extension_may_define_resources_directory_read() -> None:
    other = Server("other").extension("com.example/dirs")
    with pytest.raises(ValueError, match="is a method of the protocol"):
        other.method("resources/directory/read")


# -- the disk: symlinks, special and hidden files -----------------------------------------


async def test_a_symlink_inside_its_skill_is_served_with_the_targets_bytes(tmp_path: Path) -> None:
    root = write(tmp_path, {"demo/SKILL.md": skill_md("demo"), "demo/real.md": "real\n"})
    (root / "demo" / "alias.md").symlink_to(root / "demo" / "real.md")
    async with Client(served(root), strict=True) as client:
        assert (await client.read_resource("skill://demo/alias.md"))[0]["text"] == "real\n"


def test_a_symlink_out_of_its_skill_is_refused(tmp_path: Path) -> None:
    root = write(tmp_path, {"skills/demo/SKILL.md": skill_md("demo"), "secret.txt": "secret\n",
                            "skills/other/SKILL.md": skill_md("other")}) / "skills"
    (root / "demo" / "leak.txt").symlink_to(tmp_path / "secret.txt")
    with pytest.raises(SkillError, match="leak.txt: a symlink out of its skill's directory"):
        served(root)
    (root / "demo" / "leak.txt").unlink()
    (root / "demo" / "sibling.md").symlink_to(root / "other" / "SKILL.md")  # into another skill: still out of this one
    with pytest.raises(SkillError, match="sibling.md: a symlink out of its skill's directory"):
        served(root)


def test_a_symlinked_directory_is_refused(tmp_path: Path) -> None:
    root = write(tmp_path, {"skills/demo/SKILL.md": skill_md("demo"), "elsewhere/notes.md": "x"}) / "skills"
    (root / "demo" / "linked").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    with pytest.raises(SkillError, match="linked: a symlinked directory is not served"):
        served(root)


def test_a_symlinked_skill_directory_is_refused_not_silently_left_out(tmp_path: Path) -> None:
    root = write(tmp_path, {"elsewhere/demo/SKILL.md": skill_md("demo")}) / "skills"
    root.mkdir()
    (root / "demo").symlink_to(tmp_path / "elsewhere" / "demo", target_is_directory=True)
    with pytest.raises(SkillError, match="demo: a symlinked directory is not served"):
        served(root)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_a_special_file_is_refused_without_being_opened(tmp_path: Path) -> None:
    root = write(tmp_path, {"demo/SKILL.md": skill_md("demo")})
    os.mkfifo(root / "demo" / "pipe")  # opening it would block the load
    with pytest.raises(SkillError, match="pipe: not a regular file"):
        served(root)


async def test_hidden_files_and_directories_are_not_served(tmp_path: Path) -> None:
    root = write(tmp_path, {"demo/SKILL.md": skill_md("demo"), "demo/.env": "TOKEN=x", "demo/.git/config": "x",
                            ".hidden/SKILL.md": skill_md("hidden")})
    async with Client(served(root), strict=True) as client:
        assert [r["uri"] for r in await client.list_resources()] == ["skill://demo/SKILL.md"]


async def test_a_nested_skill_is_listed_flat_and_its_files_count_in_the_enclosing_manifest(tmp_path: Path) -> None:
    root = write(tmp_path, {"outer/SKILL.md": skill_md("outer"), "outer/inner/SKILL.md": skill_md("inner", "Nested."),
                            "outer/inner/notes.md": "n\n"})
    async with Client(served(root), strict=True) as client:
        outer, inner = await listed(client)
        resources = {r["uri"]: r for r in await client.list_resources()}
    assert inner["uri"] == "skill://outer/inner/SKILL.md"
    assert [r["uri"] for r in outer["resources"]] == [
        "skill://outer/SKILL.md", "skill://outer/inner/SKILL.md", "skill://outer/inner/notes.md"]
    assert [r["uri"] for r in inner["resources"]] == ["skill://outer/inner/SKILL.md", "skill://outer/inner/notes.md"]
    assert resources["skill://outer/inner/SKILL.md"]["description"] == "Nested."


# -- end to end --------------------------------------------------------------------------


async def check_the_examples(client: Client) -> None:
    """What a host does with a server's skills: list them, fetch one, read its files, walk its tree."""
    entries = await listed(client)
    assert [e["uri"] for e in entries] == ["skill://code-review/SKILL.md", "skill://release-notes/SKILL.md"]
    review = (await client.request("skills/get", {"uri": entries[0]["uri"]})).result["skill"]
    assert review == entries[0]
    for resource in review["resources"]:
        [content] = await client.read_resource(resource["uri"])
        path = EXAMPLES / resource["uri"].removeprefix("skill://")
        assert content["text"].encode() == path.read_bytes()
        assert resource == {"uri": resource["uri"], **digest(path.read_bytes())}
    children = (await client.request("resources/directory/read", {"uri": "skill://code-review"})).result["resources"]
    assert {"uri": "skill://code-review/references", "name": "references", "mimeType": "inode/directory"} in children
    listed_md = {r["uri"]: r for r in await client.list_resources()}[review["uri"]]
    assert (listed_md["name"], listed_md["mimeType"]) == ("code-review", "text/markdown")
    with pytest.raises(McpError) as unknown:
        await client.request("skills/get", {"uri": "skill://nope/SKILL.md"})
    assert unknown.value.code == -32602


async def test_the_example_skills_over_stdio() -> None:
    command = [sys.executable, "-m", "mcpcore", "run", str(EVERYTHING)]
    async with Client.stdio(command, strict=True) as client:
        with anyio.fail_after(30):
            await check_the_examples(client)


@pytest.mark.usefixtures("http_flavour")
async def test_the_example_skills_over_http() -> None:
    from http_client import running

    async with running(served(EXAMPLES)) as http:
        async with Client.http(f"http://127.0.0.1:{http.port}/mcp", strict=True) as client:
            with anyio.fail_after(30):
                await check_the_examples(client)
