"""MCP Apps (`io.modelcontextprotocol/ui`, SEP-1865): views served as `ui://` resources, tools naming them,
and the lists a client sees by whether it declared the extension, on both eras and both transports; and the
example's view in a real headless Chromium behind a minimal host page (skipped without a chromium binary,
unless `MCPCORE_TEST_BROWSER=required`, as in CI: then it fails; see tests/test_cors.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from conftest import LEGACY_VERSIONS, ROOT, VERSION
from mcpcore import Context, McpError, Server
from mcpcore._runtime.lifespan import StartupError
from mcpcore.apps import EXTENSION, MIME_TYPE, Apps
from mcpcore.testing import Client

pytestmark = pytest.mark.anyio

EXAMPLE = ROOT / "examples" / "apps_server.py"
DECLARED = {EXTENSION: {"mimeTypes": [MIME_TYPE]}}
ERAS = [VERSION, *LEGACY_VERSIONS]
PAGE = "<!DOCTYPE html><html><body>board</body></html>"


def board_server(**options: Any) -> Server:
    """A view, a tool showing it, one only the view calls, and a plain tool with _meta of its own."""
    server = Server("board", **options)
    apps = Apps(server)

    @apps.tool("ui://board/main", meta={"com.example/owner": "ops"})
    def show(city: str) -> str:
        """The board for a city."""
        return f"Board for {city}"

    @apps.tool("ui://board/main", visibility=["app"])
    def refresh() -> str:
        return "refreshed"

    @server.tool(meta={"com.example/owner": "ops"})
    def plain() -> str:
        return "plain"

    apps.html("ui://board/main", PAGE, description="The board", csp={"connectDomains": ["https://api.example.com"]},
              permissions=["clipboardWrite"], prefers_border=False)

    @server.resource("notes://today")
    def today() -> str:
        return "nothing"

    return server


def by_name(entries: list[dict[str, Any]], field: str = "name") -> dict[str, dict[str, Any]]:
    return {entry[field]: entry for entry in entries}


# -- what a client that declared the extension sees ----------------------------


@pytest.mark.parametrize("era", ERAS)
async def test_a_declaring_client_gets_the_views_and_the_tools_that_name_them(era: str) -> None:
    async with Client(board_server(), era=era, extensions=DECLARED, strict=True) as client:
        tools = by_name(await client.list_tools())
        assert tools["show"]["_meta"] == {"com.example/owner": "ops", "ui": {"resourceUri": "ui://board/main"}}
        assert tools["refresh"]["_meta"] == {"ui": {"resourceUri": "ui://board/main", "visibility": ["app"]}}
        assert tools["plain"]["_meta"] == {"com.example/owner": "ops"}
        ui = {"csp": {"connectDomains": ["https://api.example.com"]}, "permissions": {"clipboardWrite": {}},
              "prefersBorder": False}
        listed = by_name(await client.list_resources(), "uri")
        assert listed["ui://board/main"] == {"uri": "ui://board/main", "name": "board/main", "description": "The board",
                                             "mimeType": MIME_TYPE, "_meta": {"ui": ui}}
        assert await client.read_resource("ui://board/main") == [
            {"uri": "ui://board/main", "mimeType": MIME_TYPE, "text": PAGE, "_meta": {"ui": ui}}]
        assert (await client.call_tool("refresh")).text == "refreshed"  # the view calls it through the host
        assert (await client.call_tool("show", {"city": "Oslo"})).text == "Board for Oslo"


async def test_the_extension_is_announced_in_discover_and_not_in_a_2025_initialize() -> None:
    async with Client(board_server(), strict=True) as client:
        assert (await client.discover())["capabilities"]["extensions"] == {EXTENSION: {}}
    async with Client(board_server(), era=LEGACY_VERSIONS[0], extensions=DECLARED, strict=True) as client:
        assert "extensions" not in (await client.discover())["capabilities"]


# -- what a client that did not declare it sees ------------------------------


NOT_DECLARED = [None, {EXTENSION: {}}, {EXTENSION: {"mimeTypes": ["text/html"]}}, {"com.example/other": {}}]


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("extensions", NOT_DECLARED, ids=["nothing", "no-mime-types", "other-mime-type", "other"])
async def test_a_client_without_the_extension_sees_no_ui(era: str, extensions: dict[str, Any] | None) -> None:
    """The specification's server behaviour: UI tools are registered only for a host whose `mimeTypes`
    name the app MIME type; other clients get the text tools, without `_meta.ui` or the app's own tools."""
    async with Client(board_server(), era=era, extensions=extensions, strict=True) as client:
        tools = by_name(await client.list_tools())
        assert sorted(tools) == ["plain", "show"]
        assert tools["show"]["_meta"] == {"com.example/owner": "ops"}  # the tool's other _meta is kept
        assert sorted(by_name(await client.list_resources(), "uri")) == ["notes://today"]
        assert (await client.call_tool("show", {"city": "Oslo"})).text == "Board for Oslo"
        with pytest.raises(McpError) as refused:
            await client.call_tool("refresh")
        assert refused.value.code == -32021 and "only by an MCP App" in refused.value.message
        assert refused.value.data == {"requiredCapabilities": {"extensions": DECLARED}}
        # a view stays readable by its URI: only the lists leave it out
        assert (await client.read_resource("ui://board/main"))[0]["mimeType"] == MIME_TYPE


async def test_both_kinds_of_client_page_through_their_own_lists_of_one_server() -> None:
    server = Server("many", page_size=2)
    apps = Apps(server)
    apps.html("ui://many/view", PAGE)
    for index in range(6):
        visibility = ["app"] if index % 2 else None
        apps.tool("ui://many/view", visibility=visibility, name=f"tool{index}")(lambda: "ok")

    async def names(client: Client) -> list[str]:
        return [tool["name"] for tool in await client.list_tools()]

    async with Client(server, extensions=DECLARED) as apps_client, Client(server) as text_client:
        for _ in range(2):  # each list built once, then served from its cache, alternately
            assert await names(apps_client) == [f"tool{index}" for index in range(6)]
            assert await names(text_client) == ["tool0", "tool2", "tool4"]
        server.remove_tool("tool0")
        assert await names(text_client) == ["tool2", "tool4"]


# -- checks -----------------------------------------------------------------


def test_registration_refuses_what_cannot_be_a_view() -> None:
    server = Server("bad")
    apps = Apps(server)
    with pytest.raises(ValueError, match="fixed ui:// URI"):
        apps.resource("https://example.com/view")
    with pytest.raises(ValueError, match="fixed ui:// URI"):
        apps.resource("ui://board/{city}")
    with pytest.raises(ValueError, match="fixed ui:// URI"):
        apps.tool("board/main")
    with pytest.raises(ValueError, match="csp has no scriptDomains; its keys are connectDomains"):
        apps.html("ui://v/1", PAGE, csp={"scriptDomains": ["https://cdn.example.com"]})
    with pytest.raises(ValueError, match="not 'https://api.example.com/v1'"):
        apps.html("ui://v/1", PAGE, csp={"connectDomains": ["https://api.example.com/v1"]})
    with pytest.raises(ValueError, match="no permission usb"):
        apps.html("ui://v/1", PAGE, permissions=["usb"])
    for visibility in ([], ["agent"], "model", ["app", "app"]):
        with pytest.raises(ValueError, match="visibility is a non-empty list of 'model' and 'app'"):
            apps.tool("ui://v/1", visibility=visibility)
    with pytest.raises(ValueError, match="sets meta\\['ui'\\] itself"):
        apps.tool("ui://v/1", meta={"ui": {}})
    with pytest.raises(ValueError, match="takes no arguments"):
        apps.resource("ui://v/2")(lambda city: city)
    apps.html("ui://v/1", PAGE)
    with pytest.raises(ValueError, match="ui://v/1 is already served"):
        apps.html("ui://v/1", PAGE)
    with pytest.raises(ValueError, match="already serves MCP Apps"):
        Apps(server)
    assert len(server.tools) == 0 and [resource.key for resource in server.resources] == ["ui://v/1"]


@pytest.mark.parametrize("case", ["missing", "not-a-view", "raw-meta", "bad-visibility"])
async def test_a_tool_naming_no_view_of_the_server_stops_it_at_start_up(case: str) -> None:
    server = Server("broken")
    apps = Apps(server)
    if case == "missing":
        apps.tool("ui://broken/nothing", name="lost")(lambda: "x")
        expected = "tool 'lost' names the view ui://broken/nothing, but this server has no resource there"
    elif case == "not-a-view":
        server.resource("ui://broken/plain", mime_type="text/html")(lambda: PAGE)
        apps.tool("ui://broken/plain", name="shown")(lambda: "x")
        expected = "tool 'shown' names the view ui://broken/plain, but this server has a text/html resource there"
    elif case == "raw-meta":  # _meta.ui written by hand is checked the same way
        server.tool(name="raw", meta={"ui": {"resourceUri": "https://example.com/view"}})(lambda: "x")
        expected = "tool 'raw': a UI resource URI is a fixed ui:// URI"
    else:
        apps.html("ui://broken/view", PAGE)
        server.tool(name="raw", meta={"ui": {"resourceUri": "ui://broken/view", "visibility": ["user"]}})(lambda: "x")
        expected = "tool 'raw': visibility is a non-empty list"
    with pytest.raises(StartupError, match="server 'broken' cannot serve: ") as stopped:
        async with Client(server):
            pass
    assert expected in str(stopped.value)
    assert not server.lifespan.entered


async def test_a_tool_registered_while_serving_is_checked_at_once() -> None:
    server = Server("live")
    apps = Apps(server)
    apps.html("ui://live/view", PAGE)
    async with Client(server, extensions=DECLARED) as client:
        with pytest.raises(ValueError, match="names the view ui://live/missing"):
            apps.tool("ui://live/missing", name="late")(lambda: "x")
        apps.tool("ui://live/view", name="fine")(lambda: "x")
        assert [tool["name"] for tool in await client.list_tools()] == ["late", "fine"]


async def test_a_view_that_gives_no_html_is_an_internal_error_naming_it() -> None:
    server = Server("odd")
    apps = Apps(server)

    @apps.resource("ui://odd/view")
    def view(ctx: Context) -> Any:
        return {"not": "html"}

    async with Client(server, extensions=DECLARED) as client:
        with pytest.raises(McpError) as failed:
            await client.read_resource("ui://odd/view")
    assert failed.value.code == -32603 and "ui://odd/view must give its HTML as str or bytes, not dict" in failed.value.message


# -- the example, over real transports ----------------------------------------


async def check_the_example(client: Client, declared: bool) -> None:
    tools = by_name(await client.list_tools())
    if declared:
        assert sorted(tools) == ["roll_dice", "roll_history"]
        assert tools["roll_dice"]["_meta"]["ui"] == {"resourceUri": "ui://dice/board"}
        assert tools["roll_history"]["_meta"]["ui"]["visibility"] == ["app"]
        assert "ui://dice/board" in by_name(await client.list_resources(), "uri")
        assert json.loads((await client.call_tool("roll_history")).text) == {"totals": []}
    else:
        assert sorted(tools) == ["roll_dice"] and "_meta" not in tools["roll_dice"]
        with pytest.raises(McpError) as refused:
            await client.call_tool("roll_history")
        assert refused.value.code == -32021
    rolled = await client.call_tool("roll_dice", {"count": 3, "sides": 6})
    assert rolled.text.startswith("Rolled 3d6: ")  # the text a host without apps shows
    if client.era >= "2025-06-18":
        assert len(rolled.structured["rolls"]) == 3
    board = await client.read_resource("ui://dice/board")
    assert board[0]["mimeType"] == MIME_TYPE and board[0]["text"].startswith("<!DOCTYPE html>")
    assert board[0]["_meta"] == {"ui": {"prefersBorder": True}}


@pytest.mark.parametrize("era", [VERSION, LEGACY_VERSIONS[0], LEGACY_VERSIONS[-1]])
@pytest.mark.parametrize("declared", [True, False], ids=["apps", "text"])
async def test_the_example_over_stdio(era: str, declared: bool) -> None:
    command = [sys.executable, "-m", "mcpcore", "run", str(EXAMPLE)]
    async with Client.stdio(command, era=era, extensions=DECLARED if declared else None, strict=True) as client:
        with anyio.fail_after(30):
            await check_the_example(client, declared)


@pytest.mark.usefixtures("http_flavour")
@pytest.mark.parametrize("era", [VERSION, LEGACY_VERSIONS[0]])
async def test_the_example_over_http(era: str) -> None:
    from http_client import running

    server = _fresh_example()
    async with running(server) as http:
        for declared in (True, False):
            extensions = DECLARED if declared else None
            async with Client.http(f"http://127.0.0.1:{http.port}/mcp", era=era, extensions=extensions,
                                   strict=True) as client:
                with anyio.fail_after(30):
                    await check_the_example(client, declared)


def _fresh_example() -> Server:
    """The example's server, loaded anew (its roll history starts empty)."""
    import runpy

    return runpy.run_path(str(EXAMPLE))["server"]


def test_mcpcore_run_says_which_view_is_missing_in_one_line(tmp_path: Path) -> None:
    script = tmp_path / "broken_app.py"
    script.write_text("from mcpcore import Server\nfrom mcpcore.apps import Apps\n\nserver = Server('broken')\n"
                      "apps = Apps(server)\n\n\n@apps.tool('ui://broken/board')\ndef board() -> str:\n    return 'x'\n")
    done = subprocess.run([sys.executable, "-m", "mcpcore", "run", str(script)], input="", capture_output=True,
                          text=True, timeout=60, cwd=ROOT)
    assert done.returncode != 0
    assert ("mcpcore: server 'broken' cannot serve: tool 'board' names the view ui://broken/board, but this server "
            "has no resource there") in done.stderr
    assert "Traceback" not in done.stderr


# -- the example's view in a real browser --------------------------------------

HOST = """<!doctype html>
<html><head><meta charset="utf-8"><title>a minimal MCP Apps host</title></head><body><pre id="out">pending</pre><script>
// What an MCP Apps host does, on the 2026-07-28 wire: find the tool's view, read it, call the tool, render the
// view in an iframe, hand it the input and the result, and forward the tools/call requests the view sends.
const META = {"io.modelcontextprotocol/protocolVersion": "%(version)s", "io.modelcontextprotocol/clientCapabilities":
              {"extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}}}};
let nextId = 1;

async function mcp(method, params, name) {
  const headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                   "MCP-Protocol-Version": "%(version)s", "Mcp-Method": method};
  if (name !== undefined) headers["Mcp-Name"] = name;
  const message = {jsonrpc: "2.0", id: nextId++, method, params: {...params, _meta: META}};
  const response = await fetch("/mcp", {method: "POST", headers, body: JSON.stringify(message)});
  const text = await response.text();
  const data = response.headers.get("content-type").startsWith("text/event-stream")
    ? text.split("\\n").filter(line => line.startsWith("data:")).map(line => line.slice(5)).pop() : text;
  const answer = JSON.parse(data);
  if (answer.error) throw new Error(answer.error.message);
  return answer.result;
}

async function until(found) {  // a bounded wait for the view to draw
  for (let tries = 0; tries < 100; tries++) {
    const value = found();
    if (value) return value;
    await new Promise(resolve => setTimeout(resolve, 50));
  }
  throw new Error("the view did not draw in time");
}

async function run() {
  const out = {forwarded: []};
  const tools = (await mcp("tools/list", {})).tools;
  const uri = tools.find(tool => tool.name === "roll_dice")._meta.ui.resourceUri;
  const view = (await mcp("resources/read", {uri}, uri)).contents[0];
  out.mimeType = view.mimeType;
  const args = {count: 3, sides: 6};
  const result = await mcp("tools/call", {name: "roll_dice", arguments: args}, "roll_dice");
  out.rolled = result.structuredContent;
  const frame = document.createElement("iframe");
  frame.sandbox = "allow-scripts allow-same-origin";  // same origin only so this test can read what it drew
  let initialized;
  const ready = new Promise(resolve => { initialized = resolve; });
  window.addEventListener("message", async (event) => {
    const message = event.data;
    const reply = (result) => frame.contentWindow.postMessage({jsonrpc: "2.0", id: message.id, result}, "*");
    if (message.method === "ui/initialize") {
      reply({protocolVersion: "2026-01-26", hostCapabilities: {}, hostInfo: {name: "test-host", version: "1"},
             hostContext: {}});
    } else if (message.method === "ui/notifications/initialized") {
      initialized();
    } else if (message.method === "tools/call") {
      out.forwarded.push(message.params.name);
      reply(await mcp("tools/call", message.params, message.params.name));
    }
  });
  frame.srcdoc = view.text;
  document.body.appendChild(frame);
  await ready;
  const post = (method, params) => frame.contentWindow.postMessage({jsonrpc: "2.0", method, params}, "*");
  post("ui/notifications/tool-input", {arguments: args});
  post("ui/notifications/tool-result", result);
  const page = frame.contentDocument;
  const text = (id) => page.getElementById(id).textContent;
  out.first = await until(() => text("total").startsWith("Total") && text("total"));
  out.dice = [...page.querySelectorAll(".die")].map(die => Number(die.textContent));
  page.getElementById("total").textContent = "";  // so the next drawing is seen even if it rolls the same
  page.getElementById("again").click();  // the view calls roll_dice itself, through this host
  out.second = await until(() => text("total"));
  page.getElementById("show-history").click();  // and the tool only it may call
  out.history = await until(() => text("history"));
  return out;
}

function show(found) { document.getElementById("out").textContent = JSON.stringify(found); }
run().then(show, error => show({error: error.name, message: error.message}));
</script></body></html>"""


@pytest.mark.usefixtures("http_flavour")
async def test_the_example_view_draws_in_chromium_and_calls_the_server_through_its_host(tmp_path: Path) -> None:
    """A real browser: a minimal host page, served by the server itself (one origin, no CORS), reads the view
    the tool names, renders it in an iframe, hands it the result, and forwards the view's own calls."""
    from http_client import running
    from test_cors import chromium, dump_dom

    from mcpcore.routes import HttpResponse

    browser = chromium()
    server = _fresh_example()

    @server.custom_route("/host", public=True)
    def host(request: Any) -> HttpResponse:
        return HttpResponse(HOST % {"version": VERSION}, content_type="text/html; charset=utf-8")

    async with running(server) as http:
        got = await dump_dom(browser, f"http://127.0.0.1:{http.port}/host", tmp_path / "profile")
    assert "error" not in got, got
    assert got["mimeType"] == MIME_TYPE
    rolled = got["rolled"]
    assert got["dice"] == rolled["rolls"] and got["first"] == f"Total {rolled['total']} on 3d6"
    assert got["second"].endswith(" on 3d6")  # the view rolled again with the same arguments
    assert got["forwarded"] == ["roll_dice", "roll_history"]
    totals = got["history"].removeprefix("Last totals: ").split(", ")
    assert len(totals) == 2 and totals[0] == str(rolled["total"]) and got["second"] == f"Total {totals[1]} on 3d6"


async def test_a_stateless_server_sees_no_2025_declaration_after_initialize() -> None:
    """Each 2025-era POST of a stateless server stands alone, with empty client capabilities: its clients are
    served without views (docs/apps.md says so), while the 2026-07-28 wire declares on every request."""
    from http_client import running

    async with running(_fresh_example(), stateless=True) as http:
        url = f"http://127.0.0.1:{http.port}/mcp"
        async with Client.http(url, era=LEGACY_VERSIONS[0], extensions=DECLARED, strict=True) as client:
            with anyio.fail_after(30):
                assert [tool["name"] for tool in await client.list_tools()] == ["roll_dice"]
        async with Client.http(url, extensions=DECLARED, strict=True) as client:
            with anyio.fail_after(30):
                assert sorted(tool["name"] for tool in await client.list_tools()) == ["roll_dice", "roll_history"]


async def test_a_view_takes_the_other_resource_options() -> None:
    from mcpcore import Icon

    server = Server("iconic")
    apps = Apps(server)
    apps.html("ui://iconic/view", PAGE, title="The view", icons=[Icon("https://example.com/view.png", "image/png")],
              ttl_ms=60_000)
    async with Client(server, extensions=DECLARED, strict=True) as client:
        (listed,) = await client.list_resources()
        assert listed["title"] == "The view" and listed["icons"] == [{"src": "https://example.com/view.png",
                                                                      "mimeType": "image/png"}]
        assert (await client.request("resources/read", {"uri": "ui://iconic/view"})).result["ttlMs"] == 60_000
