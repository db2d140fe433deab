"""Icons: `Icon` and `icons=` on `Server` and each decorator, refused at registration when a client
would refuse them, and sent over real HTTP where the negotiated revision's schema has them
(2026-07-28 and 2025-11-25), left out where it does not (2025-06-18 and older)."""

from __future__ import annotations

import re
from typing import Any

import anyio
import pytest

from conftest import legacy, request, tool_call
from http_client import HttpClient, running
from mcpcore import Icon, Server
from mcpcore._wire.icons import MAX_DATA_URI_LENGTH, MAX_ICONS, MAX_SIZES, MAX_URL_LENGTH
from mcpcore._wire.schemas import LEGACY, MODERN, schema_path
from test_legacy_http import session_headers
from wire_schema import validator

LIMIT = 10
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="  # 1x1 PNG
DATA_PNG = f"data:image/png;base64,{PNG}"
SERVER_ICON = Icon("https://example.com/server.svg", "image/svg+xml", ["any"], "light")
TOOL_ICON = {"src": DATA_PNG, "sizes": ["1x1"]}
RESOURCE_ICON = Icon("https://example.com/file.png", sizes=("16x16", "32x32"), theme="dark")
TEMPLATE_ICON = Icon("https://example.com/folder.webp", "image/webp")
PROMPT_ICON = Icon("https://example.com/chat.jpg", "image/jpeg", ["48x48"])


# -- registration ------------------------------------------------------------------


def test_an_icon_is_sent_in_the_schema_s_form() -> None:
    assert SERVER_ICON.to_wire() == {"src": "https://example.com/server.svg", "mimeType": "image/svg+xml",
                                     "sizes": ["any"], "theme": "light"}
    assert Icon(DATA_PNG).to_wire() == {"src": DATA_PNG}
    for version in (MODERN, LEGACY):
        for icon in (SERVER_ICON, RESOURCE_ICON, TEMPLATE_ICON, PROMPT_ICON, Icon(DATA_PNG)):
            validator("Icon", schema_path(version)).validate(icon.to_wire())


def test_a_dict_in_the_wire_form_is_an_icon() -> None:
    server = Server("icons")

    @server.tool(icons=[{"src": "https://example.com/t.png", "mimeType": "image/png", "sizes": ["48x48", "96x96"]}])
    def look() -> str:
        return "ok"

    assert server.tools.get("look").describe()["icons"] == (
        {"src": "https://example.com/t.png", "mimeType": "image/png", "sizes": ["48x48", "96x96"]},
    )


@pytest.mark.parametrize(("icon", "says"), [
    ({"src": "http://example.com/a.png"}, "https: URL or a data: URI"),
    ({"src": "http://localhost:8000/a.png"}, "https: URL or a data: URI"),
    ({"src": "javascript:alert(1)"}, "https: URL or a data: URI"),
    ({"src": "file:///etc/passwd"}, "https: URL or a data: URI"),
    ({"src": "ftp://example.com/a.png"}, "https: URL or a data: URI"),
    ({"src": "ws://example.com/a.png"}, "https: URL or a data: URI"),
    ({"src": "/static/a.png"}, "https: URL or a data: URI"),
    ({"src": 42}, "src must be a string"),
    ({"src": "https:///a.png"}, "names no host"),
    ({"src": "https://user:secret@example.com/a.png"}, "credentials"),
    ({"src": "https://example.com/a b.png"}, "spaces or control characters"),
    ({"src": "https://example.com:99999/a.png"}, "not a valid URL"),
    ({"src": "https://example.com/" + "a" * MAX_URL_LENGTH}, f"at most {MAX_URL_LENGTH} characters"),
    ({"src": "data:image/png," + PNG}, "data:image/...;base64"),
    ({"src": "data:text/html;base64," + PNG}, "image type"),
    ({"src": "data:;base64," + PNG}, "image type"),
    ({"src": "data:image/png;base64,not base64!"}, "base64 data"),
    ({"src": "data:image/png;base64,abc"}, "base64 data"),
    ({"src": "data:image/png;base64," + "A" * MAX_DATA_URI_LENGTH}, f"at most {MAX_DATA_URI_LENGTH} characters"),
    ({"src": DATA_PNG, "mimeType": "image/svg+xml"}, "contradicts"),
    ({"src": "https://example.com/a", "mimeType": "text/plain"}, "image type"),
    ({"src": "https://example.com/a", "mimeType": "png"}, "image type"),
    ({"src": "https://example.com/a", "sizes": "48x48"}, "list of strings"),
    ({"src": "https://example.com/a", "sizes": ["48"]}, "'WxH'"),
    ({"src": "https://example.com/a", "sizes": ["0x48"]}, "'WxH'"),
    ({"src": "https://example.com/a", "sizes": ["48 x 48"]}, "'WxH'"),
    ({"src": "https://example.com/a", "sizes": [48]}, "'WxH'"),
    ({"src": "https://example.com/a", "sizes": ["any"] * (MAX_SIZES + 1)}, f"at most {MAX_SIZES} sizes"),
    ({"src": "https://example.com/a", "theme": "blue"}, "'light' or 'dark'"),
    ({"src": "https://example.com/a", "mime_type": "image/png"}, "not 'mime_type'"),
    ({"mimeType": "image/png"}, "needs a 'src'"),
    ("https://example.com/a.png", "an Icon or a dict"),
])
def test_a_bad_icon_is_refused_at_registration_and_nothing_is_registered(icon: Any, says: str) -> None:
    server = Server("icons")
    with pytest.raises(ValueError, match="^tool 'look': .*" + re.escape(says)):
        server.tool(lambda: "ok", name="look", icons=[icon])
    assert server.tools.get("look") is None
    if isinstance(icon, dict) and set(icon) <= {"src", "mimeType", "sizes", "theme"} and "src" in icon:
        with pytest.raises(ValueError, match=re.escape(says)):  # the same check on the dataclass
            Icon(icon["src"], icon.get("mimeType"), icon.get("sizes", ()), icon.get("theme"))


@pytest.mark.parametrize("icons", ["https://example.com/a.png", Icon("https://example.com/a.png"),
                                   {"src": "https://example.com/a.png"}, 42])
def test_icons_is_a_list(icons: Any) -> None:
    with pytest.raises(ValueError, match="icons= is a list of Icon"):
        Server("icons", icons=icons)


def test_the_number_of_icons_is_bounded() -> None:
    many = [Icon(f"https://example.com/{n}.png") for n in range(MAX_ICONS + 1)]
    with pytest.raises(ValueError, match=f"^server 'icons': at most {MAX_ICONS} icons, not {MAX_ICONS + 1}$"):
        Server("icons", icons=many)
    assert Server("icons", icons=many[:MAX_ICONS]).server_info()["icons"][-1]["src"].endswith(f"{MAX_ICONS - 1}.png")


def test_each_registration_names_what_carries_the_bad_icon() -> None:
    bad = [{"src": "http://example.com/a.png"}]
    server = Server("icons")
    with pytest.raises(ValueError, match="^server 'named': icon src"):
        Server("named", icons=bad)
    with pytest.raises(ValueError, match="^resource 'memo://a': icon src"):
        server.resource("memo://a", icons=bad)(lambda: "a")
    with pytest.raises(ValueError, match="^resource template 'memo://{key}': icon src"):
        server.resource("memo://{key}", icons=bad)(lambda key: key)
    with pytest.raises(ValueError, match="^prompt 'greet': icon src"):
        server.prompt(lambda: "hi", name="greet", icons=bad)
    assert not (server.has_resources() or server.has_prompts())


def test_no_icons_and_none_send_no_field() -> None:
    server = Server("icons", icons=None)

    @server.tool(icons=[])
    def plain() -> str:
        return "ok"

    assert "icons" not in server.server_info() and "icons" not in server.tools.get("plain").describe()


# -- over HTTP, in both eras ---------------------------------------------------------


def iconic() -> Server:
    server = Server("iconic", version="2.0", icons=[SERVER_ICON])

    @server.tool(icons=[TOOL_ICON])
    def look(text: str) -> str:
        """Look at a thing."""
        return text

    @server.resource("memo://readme", icons=[RESOURCE_ICON])
    def readme() -> str:
        return "read me"

    @server.resource("memo://{key}", icons=[TEMPLATE_ICON])
    def memo(key: str) -> str:
        return key

    @server.prompt(icons=[PROMPT_ICON])
    def greet(name: str) -> str:
        return f"Hello {name}"

    return server


LISTS = {"tools/list": ("tools", "ListToolsResult", TOOL_ICON),
         "resources/list": ("resources", "ListResourcesResult", RESOURCE_ICON.to_wire()),
         "resources/templates/list": ("resourceTemplates", "ListResourceTemplatesResult", TEMPLATE_ICON.to_wire()),
         "prompts/list": ("prompts", "ListPromptsResult", PROMPT_ICON.to_wire())}


@pytest.mark.anyio
@pytest.mark.usefixtures("http_flavour")
async def test_the_2026_wire_shows_icons_in_discover_and_every_list() -> None:
    async with running(iconic()) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            discovered = (await client.post(request("server/discover", 1))).response["result"]
            validator("DiscoverResult").validate(discovered)
            assert discovered["_meta"]["io.modelcontextprotocol/serverInfo"] == {
                "name": "iconic", "version": "2.0", "icons": [SERVER_ICON.to_wire()]}
            for number, (method, (field, definition, icon)) in enumerate(LISTS.items(), 2):
                listed = (await client.post(request(method, number))).response["result"]
                validator(definition).validate(listed)
                assert [item["icons"] for item in listed[field]] == [[icon]], method
            called = (await client.post(tool_call(9, "look", text="hi"))).response["result"]
            # Other results carry the short stamp: icons (up to 16 data: URIs) are not repeated on every answer.
            assert called["_meta"]["io.modelcontextprotocol/serverInfo"] == {"name": "iconic", "version": "2.0"}


@pytest.mark.anyio
@pytest.mark.usefixtures("http_flavour")
async def test_a_2025_11_25_session_gets_icons_in_initialize_and_every_list() -> None:
    legacy_validator = lambda definition: validator(definition, schema_path(LEGACY))  # noqa: E731
    async with running(iconic()) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            opened = await client.post(legacy("initialize", 0, protocolVersion=LEGACY, capabilities={},
                                              clientInfo={"name": "icons", "version": "1"}),
                                       {"content-type": "application/json",
                                        "accept": "application/json, text/event-stream"}, legacy=True)
            initialized = opened.response["result"]
            legacy_validator("InitializeResult").validate(initialized)
            assert initialized["serverInfo"] == {"name": "iconic", "version": "2.0", "icons": [SERVER_ICON.to_wire()]}
            session_id = opened.headers["mcp-session-id"]
            note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            assert (await client.post(note, session_headers(session_id), legacy=True)).status == 202
            for number, (method, (field, definition, icon)) in enumerate(LISTS.items(), 1):
                listed = (await client.post(legacy(method, number), session_headers(session_id), legacy=True))
                result = listed.response["result"]
                legacy_validator(definition).validate(result)
                assert [item["icons"] for item in result[field]] == [[icon]], method


@pytest.mark.anyio
@pytest.mark.usefixtures("http_flavour")
@pytest.mark.parametrize("version", ["2025-06-18", "2025-03-26", "2024-11-05"])
async def test_an_older_session_gets_no_icons(version: str) -> None:
    async with running(iconic()) as http, HttpClient.connect(http) as client:
        with anyio.fail_after(LIMIT):
            opened = await client.post(legacy("initialize", 0, protocolVersion=version, capabilities={},
                                              clientInfo={"name": "icons", "version": "1"}),
                                       {"content-type": "application/json",
                                        "accept": "application/json, text/event-stream"}, legacy=True)
            assert opened.response["result"]["serverInfo"] == {"name": "iconic", "version": "2.0"}
            session_id = opened.headers["mcp-session-id"]
            note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            assert (await client.post(note, session_headers(session_id, version), legacy=True)).status == 202
            for number, (method, (field, _, _)) in enumerate(LISTS.items(), 1):
                listed = await client.post(legacy(method, number), session_headers(session_id, version), legacy=True)
                items = listed.response["result"][field]
                assert items and not any("icons" in item for item in items), method


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_the_official_python_client_reads_the_icons(mode: str) -> None:
    """A real client (PyPI `mcp`, in the test extra) parses what is sent into its own `Icon` models."""
    client_class = pytest.importorskip("mcp").Client
    async with running(iconic(), via="h11") as http:
        with anyio.fail_after(30):
            async with client_class(http.url, mode=mode, read_timeout_seconds=30) as client:
                assert client.protocol_version == (LEGACY if mode == "legacy" else MODERN)
                tool = (await client.list_tools()).tools[0]
                assert [(icon.src, icon.sizes) for icon in tool.icons] == [(DATA_PNG, ["1x1"])]
                template = (await client.list_resource_templates()).resource_templates[0]
                assert [icon.mime_type for icon in template.icons] == ["image/webp"]
                prompt = (await client.list_prompts()).prompts[0]
                assert [icon.src for icon in prompt.icons] == [PROMPT_ICON.src]
                if mode == "legacy":  # this client keeps serverInfo only from initialize
                    assert [icon.theme for icon in client.server_info.icons] == ["light"]
