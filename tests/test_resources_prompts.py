"""Resources and templates (resources/list, templates/list, read), prompts
(list, get) and argument completion (completion/complete)."""

import base64
import json
import threading
from typing import Annotated, Any

import pytest

from conftest import request
from memory import error_of, exchange, result_of
from mcpcore import Context, EmbeddedResource, Image, McpError, Message, ResourceLink, Server
from wire_schema import validator

pytestmark = pytest.mark.anyio


def strict(definition: str, result: dict) -> dict:
    """Validate against the exact result type (the response unions also admit
    InputRequiredResult, which accepts almost anything with a resultType)."""
    validator(definition).validate(result)
    return result


async def read(server: Server, uri: str) -> dict:
    return strict("ReadResourceResult", await result_of(server, request("resources/read", uri=uri)))


async def get_prompt(server: Server, name: str, arguments: Any = None) -> dict:
    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    return strict("GetPromptResult", await result_of(server, request("prompts/get", **params)))


def complete_request(ref: Any, argument: Any, **extra: Any) -> dict:
    return request("completion/complete", ref=ref, argument=argument, **extra)


async def complete(server: Server, ref: dict, name: str, value: str, **extra: Any) -> dict:
    result = await result_of(server, complete_request(ref, {"name": name, "value": value}, **extra))
    return strict("CompleteResult", result)["completion"]


# -- static resources -----------------------------------------------------------------


async def test_text_resource_is_read_as_text_plain_at_its_uri() -> None:
    server = Server("r")

    @server.resource("file:///readme.txt")
    def readme() -> str:
        return "hello"

    assert (await read(server, "file:///readme.txt"))["contents"] == [
        {"uri": "file:///readme.txt", "mimeType": "text/plain", "text": "hello"}
    ]


async def test_declared_mime_type_is_used_for_text() -> None:
    server = Server("r")
    server.add_resource(lambda: "# Title", "file:///doc.md", name="doc", mime_type="text/markdown")
    assert (await read(server, "file:///doc.md"))["contents"] == [
        {"uri": "file:///doc.md", "mimeType": "text/markdown", "text": "# Title"}
    ]


async def test_bytes_resource_is_read_as_a_base64_blob() -> None:
    server = Server("r")
    data = bytes(range(256))
    server.add_resource(lambda: data, "file:///data.bin", name="data")
    server.add_resource(lambda: bytearray(b"\x89PNG"), "file:///logo.png", name="logo", mime_type="image/png")
    assert (await read(server, "file:///data.bin"))["contents"] == [
        {"uri": "file:///data.bin", "mimeType": "application/octet-stream", "blob": base64.b64encode(data).decode()}
    ]
    assert (await read(server, "file:///logo.png"))["contents"] == [
        {"uri": "file:///logo.png", "mimeType": "image/png", "blob": base64.b64encode(b"\x89PNG").decode()}
    ]


@pytest.mark.parametrize(
    "value",
    [{"a": 1, "b": [True, None]}, [1, 2, 3], 42, 3.5, True, None, ["x", "y"]],
)
async def test_json_value_resource_is_read_as_application_json_text(value: Any) -> None:
    server = Server("r")
    server.add_resource(lambda: value, "config://app", name="config")
    contents = (await read(server, "config://app"))["contents"]
    assert len(contents) == 1
    assert contents[0]["uri"] == "config://app"
    assert contents[0]["mimeType"] == "application/json"
    assert json.loads(contents[0]["text"]) == value


async def test_embedded_resource_list_gives_one_content_item_per_resource() -> None:
    server = Server("r")

    @server.resource("file:///dir")
    def directory():
        return [
            EmbeddedResource("file:///dir/a.txt", text="A", mime_type="text/plain"),
            EmbeddedResource("file:///dir/b.bin", blob=b"\x00B"),
        ]

    assert (await read(server, "file:///dir"))["contents"] == [
        {"uri": "file:///dir/a.txt", "mimeType": "text/plain", "text": "A"},
        {"uri": "file:///dir/b.bin", "blob": base64.b64encode(b"\x00B").decode()},
    ]


async def test_single_embedded_resource_keeps_its_own_uri_and_mime_type() -> None:
    server = Server("r")
    server.add_resource(lambda: EmbeddedResource("file:///real.csv", text="a,b", mime_type="text/csv"),
                        "alias://csv", name="csv")
    assert (await read(server, "alias://csv"))["contents"] == [
        {"uri": "file:///real.csv", "mimeType": "text/csv", "text": "a,b"}
    ]


async def test_async_resource_with_context_reads_request_facts() -> None:
    server = Server("r")

    @server.resource("whoami://client")
    async def whoami(ctx: Context) -> dict:
        return {"client": ctx.client_info["name"], "request": ctx.request_id}

    result = await result_of(server, request("resources/read", "rid", uri="whoami://client"))
    assert json.loads(result["contents"][0]["text"]) == {"client": "mcpcore-tests", "request": "rid"}


async def test_sync_resource_runs_in_a_worker_thread() -> None:
    server = Server("r")
    threads = []

    @server.resource("thread://name")
    def where() -> str:
        threads.append(threading.current_thread())
        return "ok"

    await read(server, "thread://name")
    assert len(threads) == 1 and threads[0] is not threading.main_thread()


async def test_resources_list_shows_metadata_in_registration_order() -> None:
    server = Server("r")

    @server.resource("file:///z.txt", title="Zed", mime_type="text/plain")
    def zed() -> str:
        """The last letter."""
        return "z"

    server.add_resource(lambda: "a", "file:///a.txt", name="a_file", description="First letter")
    result = strict("ListResourcesResult", await result_of(server, request("resources/list")))
    assert result["resources"] == [
        {"uri": "file:///z.txt", "name": "zed", "title": "Zed", "description": "The last letter.", "mimeType": "text/plain"},
        {"uri": "file:///a.txt", "name": "a_file", "description": "First letter"},
    ]


async def test_unknown_uri_is_invalid_params_with_the_uri_in_data() -> None:
    server = Server("r")
    server.add_resource(lambda: "x", "file:///exists.txt", name="exists")
    server.add_resource(lambda id: id, "notes://{id}", name="note")
    error = await error_of(server, request("resources/read", uri="file:///missing.txt"))
    assert error["code"] == -32602
    assert error["data"] == {"uri": "file:///missing.txt"}
    assert "file:///missing.txt" in error["message"]


async def test_read_without_a_string_uri_is_invalid_params() -> None:
    server = Server("r")
    server.add_resource(lambda: "x", "file:///exists.txt", name="exists")
    assert (await error_of(server, request("resources/read")))["code"] == -32602
    assert (await error_of(server, request("resources/read", uri=["file:///exists.txt"])))["code"] == -32602


async def test_exception_in_a_resource_is_an_internal_error_naming_what_failed_but_not_how() -> None:
    server = Server("r")

    @server.resource("file:///broken")
    def broken() -> str:
        raise OSError("disk gone")

    server.add_resource(lambda: "fine", "file:///fine", name="fine")
    assert await error_of(server, request("resources/read", uri="file:///broken")) == {
        "code": -32603,
        "message": "Reading 'file:///broken' failed (OSError)",  # "disk gone" stays in the server's log
        "data": {"uri": "file:///broken"},
    }
    assert (await read(server, "file:///fine"))["contents"][0]["text"] == "fine"


async def test_mcp_error_raised_in_a_resource_is_sent_as_is() -> None:
    server = Server("r")

    @server.resource("secret://vault")
    def vault() -> str:
        raise McpError(-32602, "Resource not found", {"uri": "secret://vault"})

    assert await error_of(server, request("resources/read", uri="secret://vault")) == {
        "code": -32602,
        "message": "Resource not found",
        "data": {"uri": "secret://vault"},
    }


# -- resource templates ---------------------------------------------------------------------


def notes_server(seen: list) -> Server:
    server = Server("r")

    @server.resource("notes://{owner}/{id}", description="A user's note", mime_type="text/markdown")
    def note(owner: str, id: int) -> str:
        seen.append((owner, id))
        return f"# note {id} of {owner}"

    return server


async def test_template_variables_are_passed_with_int_hints_converted() -> None:
    seen: list = []
    contents = (await read(notes_server(seen), "notes://ada/0042"))["contents"]
    assert contents == [{"uri": "notes://ada/0042", "mimeType": "text/markdown", "text": "# note 42 of ada"}]
    assert seen == [("ada", 42)]
    assert type(seen[0][1]) is int


@pytest.mark.parametrize("uri", ["notes://ada/forty-two", "notes://ada/", "notes://ada/4.2"])
async def test_non_numeric_value_for_an_int_variable_is_invalid_params(uri: str) -> None:
    seen: list = []
    error = await error_of(notes_server(seen), request("resources/read", uri=uri))
    assert error["code"] == -32602
    assert error["data"] == {"uri": uri}
    assert "'id'" in error["message"] and "int" in error["message"]
    assert seen == []


async def test_uri_not_matching_the_template_shape_is_not_found() -> None:
    seen: list = []
    error = await error_of(notes_server(seen), request("resources/read", uri="notes://ada/1/extra"))
    assert error["code"] == -32602
    assert error["data"] == {"uri": "notes://ada/1/extra"}
    assert seen == []


async def test_float_template_variables_are_converted_and_values_percent_decoded() -> None:
    server = Server("r")
    seen = []

    @server.resource("geo://{place}/{lat},{lon}")
    def geo(place: str, lat: float, lon: float) -> str:
        seen.append((place, lat, lon))
        return "ok"

    await read(server, "geo://New%20York/40.7,-74.0")
    assert seen == [("New York", 40.7, -74.0)]


async def test_reserved_and_query_expansion_templates_match() -> None:
    server = Server("r")

    @server.resource("repo:///{+path}{?rev}")
    def source(path: str, rev: str = "HEAD") -> str:
        return f"{path}@{rev}"

    assert (await read(server, "repo:///src/app/main.py?rev=abc"))["contents"][0]["text"] == "src/app/main.py@abc"
    assert (await read(server, "repo:///README"))["contents"][0]["text"] == "README@HEAD"


async def test_static_resource_wins_over_a_matching_template() -> None:
    server = Server("r")
    server.add_resource(lambda id: f"template {id}", "notes://{id}", name="note")
    server.add_resource(lambda: "pinned", "notes://pinned", name="pinned")
    assert (await read(server, "notes://pinned"))["contents"][0]["text"] == "pinned"
    assert (await read(server, "notes://other"))["contents"][0]["text"] == "template other"


async def test_resource_templates_list_shows_templates_with_metadata() -> None:
    server = notes_server([])
    server.add_resource(lambda path: path, "file:///{+path}", name="files", title="Project Files")
    result = strict("ListResourceTemplatesResult", await result_of(server, request("resources/templates/list")))
    assert result["resourceTemplates"] == [
        {"uriTemplate": "notes://{owner}/{id}", "name": "note", "description": "A user's note", "mimeType": "text/markdown"},
        {"uriTemplate": "file:///{+path}", "name": "files", "title": "Project Files"},
    ]
    assert (await result_of(server, request("resources/list")))["resources"] == []


def test_template_whose_function_lacks_a_variable_parameter_is_refused() -> None:
    with pytest.raises(ValueError, match="owner"):
        Server("r").add_resource(lambda id: id, "notes://{owner}/{id}", name="bad")


def test_template_function_with_var_keyword_accepts_any_variables() -> None:
    template = Server("r").add_resource(lambda **kw: kw, "notes://{owner}/{id}", name="any")
    assert template.describe() == {"uriTemplate": "notes://{owner}/{id}", "name": "any"}


@pytest.mark.parametrize("template", ["notes://{owner", "notes://{a}/{a}", "notes://{bad name}"])
def test_malformed_uri_templates_are_refused(template: str) -> None:
    with pytest.raises(ValueError):
        Server("r").add_resource(lambda **kw: "x", template, name="bad")


# -- prompts/get --------------------------------------------------------------------------


async def test_string_prompt_becomes_one_user_message_with_the_docstring_description() -> None:
    server = Server("p")

    @server.prompt
    def review(code: str) -> str:
        """Review some code."""
        return f"Please review:\n{code}"

    result = await get_prompt(server, "review", {"code": "x = 1"})
    assert result["description"] == "Review some code."
    assert result["messages"] == [{"role": "user", "content": {"type": "text", "text": "Please review:\nx = 1"}}]


async def test_message_helpers_set_roles_and_content_blocks() -> None:
    server = Server("p")

    @server.prompt
    def dialogue(question: str):
        return [
            Message("user", question),
            Message("assistant", "Let me look at the picture."),
            Message("user", Image(b"\x01\x02", "image/jpeg")),
            Message("assistant", ResourceLink("file:///a.txt", "a.txt")),
        ]

    result = await get_prompt(server, "dialogue", {"question": "What is this?"})
    assert result["messages"] == [
        {"role": "user", "content": {"type": "text", "text": "What is this?"}},
        {"role": "assistant", "content": {"type": "text", "text": "Let me look at the picture."}},
        {"role": "user", "content": {"type": "image", "data": base64.b64encode(b"\x01\x02").decode(), "mimeType": "image/jpeg"}},
        {"role": "assistant", "content": {"type": "resource_link", "uri": "file:///a.txt", "name": "a.txt"}},
    ]
    assert "description" not in result


async def test_single_assistant_message_is_returned_with_the_assistant_role() -> None:
    server = Server("p")
    server.add_prompt(lambda: Message("assistant", "I am ready."), name="ready")
    assert (await get_prompt(server, "ready"))["messages"] == [
        {"role": "assistant", "content": {"type": "text", "text": "I am ready."}}
    ]


async def test_list_of_strings_and_blocks_becomes_user_messages_in_order() -> None:
    server = Server("p")
    server.add_prompt(
        lambda: ["first", EmbeddedResource("file:///ctx.txt", text="context")], name="two"
    )
    assert (await get_prompt(server, "two"))["messages"] == [
        {"role": "user", "content": {"type": "text", "text": "first"}},
        {"role": "user", "content": {"type": "resource", "resource": {"uri": "file:///ctx.txt", "text": "context"}}},
    ]


async def test_async_prompt_with_context_and_defaults() -> None:
    server = Server("p")

    @server.prompt(name="summarize", title="Summarize")
    async def make(ctx: Context, text: str, style: str = "short") -> str:
        return f"{style}:{text}:{ctx.request_id}"

    result = await result_of(server, request("prompts/get", 12, name="summarize", arguments={"text": "t"}))
    assert result["messages"][0]["content"]["text"] == "short:t:12"


async def test_missing_required_prompt_argument_is_invalid_params_naming_it() -> None:
    server = Server("p")
    called = []

    @server.prompt
    def translate(text: str, language: str, tone: str = "neutral") -> str:
        called.append(True)
        return text

    error = await error_of(server, request("prompts/get", name="translate", arguments={"text": "hi"}))
    assert error["code"] == -32602
    assert "'language'" in error["message"]
    error = await error_of(server, request("prompts/get", name="translate"))
    assert error["code"] == -32602
    assert "'text'" in error["message"]
    assert called == []


async def test_unknown_prompt_argument_is_invalid_params_naming_it() -> None:
    server = Server("p")
    server.add_prompt(lambda text: text, name="echo")
    error = await error_of(server, request("prompts/get", name="echo", arguments={"text": "a", "colour": "red"}))
    assert error["code"] == -32602
    assert "'colour'" in error["message"]


async def test_prompt_with_var_keyword_accepts_extra_arguments() -> None:
    server = Server("p")
    server.add_prompt(lambda **kw: ",".join(f"{k}={v}" for k, v in sorted(kw.items())), name="free")
    result = await get_prompt(server, "free", {"b": "2", "a": "1"})
    assert result["messages"][0]["content"]["text"] == "a=1,b=2"


@pytest.mark.parametrize("value", [3, True, None, ["x"], {"k": "v"}])
async def test_non_string_prompt_argument_values_are_invalid_params(value: Any) -> None:
    server = Server("p")
    server.add_prompt(lambda text: text, name="echo")
    error = await error_of(server, request("prompts/get", name="echo", arguments={"text": value}))
    assert error["code"] == -32602
    assert "string" in error["message"]


@pytest.mark.parametrize("arguments", [["text"], "text=1", 5])
async def test_prompt_arguments_that_are_not_an_object_are_invalid_params(arguments: Any) -> None:
    server = Server("p")
    server.add_prompt(lambda text="x": text, name="echo")
    error = await error_of(server, request("prompts/get", name="echo", arguments=arguments))
    assert error["code"] == -32602


async def test_unknown_prompt_is_invalid_params_with_its_name() -> None:
    server = Server("p")
    server.add_prompt(lambda: "x", name="known")
    error = await error_of(server, request("prompts/get", name="unknown"))
    assert error["code"] == -32602
    assert error["data"] == {"name": "unknown"}
    assert (await error_of(server, request("prompts/get")))["code"] == -32602


async def test_message_with_an_invalid_role_is_an_internal_error() -> None:
    server = Server("p")
    server.add_prompt(lambda: Message("system", "You are a bot."), name="sys")
    assert await error_of(server, request("prompts/get", name="sys")) == {"code": -32603, "message": "Internal error"}


# -- prompts/list -----------------------------------------------------------------------------


async def test_prompts_list_describes_arguments_with_annotated_descriptions_and_required_flags() -> None:
    server = Server("p")

    @server.prompt(title="Code review")
    def code_review(
        code: Annotated[str, "The code to review"],
        language: Annotated[str, "Programming language"] = "python",
        focus: str = "bugs",
    ) -> str:
        """Ask for a code review."""
        return code

    @server.prompt
    def plain(ctx: Context) -> str:
        return "no arguments"

    result = strict("ListPromptsResult", await result_of(server, request("prompts/list")))
    assert result["prompts"] == [
        {
            "name": "code_review",
            "title": "Code review",
            "description": "Ask for a code review.",
            "arguments": [
                {"name": "code", "description": "The code to review", "required": True},
                {"name": "language", "description": "Programming language", "required": False},
                {"name": "focus", "required": False},
            ],
        },
        {"name": "plain"},  # no docstring: no description, not an empty one
    ]


async def test_explicit_prompt_description_overrides_the_docstring() -> None:
    server = Server("p")

    @server.prompt(description="Explicit")
    def documented() -> str:
        """Docstring."""
        return "x"

    assert (await result_of(server, request("prompts/list")))["prompts"][0]["description"] == "Explicit"
    assert (await get_prompt(server, "documented"))["description"] == "Explicit"


# -- completion/complete ------------------------------------------------------------------------

LANGUAGES = ["python", "pytorch", "pyside", "rust", "ruby"]
FRAMEWORKS = {"python": ["flask", "fastapi", "django"], "ruby": ["rails", "sinatra"]}


def completion_server() -> Server:
    server = Server("c")

    @server.prompt
    def code_review(language: str, framework: str = "", level: str = "") -> str:
        return language

    @server.resource("repo://{owner}/{name}")
    def repo(owner: str, name: str) -> str:
        return f"{owner}/{name}"

    server.add_resource(lambda: "x", "file:///static.txt", name="static")

    @server.completion(prompt="code_review", argument="language")
    def languages(value: str) -> list[str]:
        return [lang for lang in LANGUAGES if lang.startswith(value)]

    @server.completion(prompt="code_review", argument="framework")
    def frameworks(value: str, context: dict) -> list[str]:
        return [f for f in FRAMEWORKS.get(context.get("language", ""), []) if f.startswith(value)]

    @server.completion(resource="repo://{owner}/{name}", argument="owner")
    async def owners(value: str) -> list[str]:
        return [o for o in ("octocat", "octopus", "mona") if o.startswith(value)]

    @server.completion(resource="repo://{owner}/{name}", argument="name")
    async def names(value: str, context: dict) -> list[str]:
        return [f"{context.get('owner', '?')}-{n}" for n in ("hello", "world") if n.startswith(value)]

    @server.completion(resource="file:///static.txt", argument="line")
    def lines(value: str):
        return range(1, 4)

    return server


PROMPT_REF = {"type": "ref/prompt", "name": "code_review"}
REPO_REF = {"type": "ref/resource", "uri": "repo://{owner}/{name}"}


async def test_sync_prompt_completion_without_context_filters_by_the_partial_value() -> None:
    assert await complete(completion_server(), PROMPT_REF, "language", "py") == {
        "values": ["python", "pytorch", "pyside"],
        "total": 3,
        "hasMore": False,
    }


async def test_sync_prompt_completion_with_context_receives_resolved_arguments() -> None:
    server = completion_server()
    completion = await complete(server, PROMPT_REF, "framework", "f", context={"arguments": {"language": "python"}})
    assert completion == {"values": ["flask", "fastapi"], "total": 2, "hasMore": False}
    assert (await complete(server, PROMPT_REF, "framework", ""))["values"] == []


async def test_async_resource_completion_without_context() -> None:
    assert await complete(completion_server(), REPO_REF, "owner", "oct") == {
        "values": ["octocat", "octopus"],
        "total": 2,
        "hasMore": False,
    }


async def test_async_resource_completion_with_context() -> None:
    completion = await complete(completion_server(), REPO_REF, "name", "w", context={"arguments": {"owner": "mona"}})
    assert completion == {"values": ["mona-world"], "total": 1, "hasMore": False}


async def test_completion_for_a_static_resource_uri_converts_values_to_strings() -> None:
    completion = await complete(completion_server(), {"type": "ref/resource", "uri": "file:///static.txt"}, "line", "")
    assert completion == {"values": ["1", "2", "3"], "total": 3, "hasMore": False}


async def test_completion_values_are_capped_at_100_with_total_and_has_more() -> None:
    server = Server("c")
    server.add_prompt(lambda n: n, name="pick")
    server.completion(prompt="pick", argument="n")(lambda value: [f"{value}{i}" for i in range(250)])
    completion = await complete(server, {"type": "ref/prompt", "name": "pick"}, "n", "v")
    assert completion["values"] == [f"v{i}" for i in range(100)]
    assert completion["total"] == 250
    assert completion["hasMore"] is True


async def test_exactly_100_completion_values_have_no_more() -> None:
    server = Server("c")
    server.add_prompt(lambda n: n, name="pick")
    server.completion(prompt="pick", argument="n")(lambda value: [str(i) for i in range(100)])
    completion = await complete(server, {"type": "ref/prompt", "name": "pick"}, "n", "")
    assert (len(completion["values"]), completion["total"], completion["hasMore"]) == (100, 100, False)


async def test_unregistered_argument_of_a_known_reference_completes_to_nothing() -> None:
    server = completion_server()
    assert await complete(server, PROMPT_REF, "level", "a") == {"values": [], "total": 0, "hasMore": False}
    assert await complete(server, PROMPT_REF, "not_an_argument", "") == {"values": [], "total": 0, "hasMore": False}


@pytest.mark.parametrize(
    "ref",
    [
        {"type": "ref/prompt", "name": "missing_prompt"},
        {"type": "ref/resource", "uri": "repo://{nobody}"},
        {"type": "ref/resource", "uri": "file:///nothing.txt"},
    ],
)
async def test_completion_for_an_unknown_reference_is_invalid_params(ref: dict) -> None:
    error = await error_of(completion_server(), complete_request(ref, {"name": "x", "value": ""}))
    assert error["code"] == -32602
    assert error["data"] == {"ref": ref}


async def test_prompt_reference_does_not_match_a_resource_of_the_same_name() -> None:
    ref = {"type": "ref/prompt", "name": "repo://{owner}/{name}"}
    assert (await error_of(completion_server(), complete_request(ref, {"name": "owner", "value": ""})))["code"] == -32602


@pytest.mark.parametrize(
    ("ref", "argument"),
    [
        (None, {"name": "language", "value": "p"}),
        ("code_review", {"name": "language", "value": "p"}),
        (PROMPT_REF, None),
        (PROMPT_REF, ["language", "p"]),
        ({"type": "ref/tool", "name": "code_review"}, {"name": "language", "value": "p"}),
        ({"type": "ref/prompt"}, {"name": "language", "value": "p"}),
        ({"type": "ref/prompt", "name": 5}, {"name": "language", "value": "p"}),
        ({"type": "ref/resource", "name": "repo://{owner}/{name}"}, {"name": "owner", "value": "o"}),
        (PROMPT_REF, {"value": "p"}),
        (PROMPT_REF, {"name": "language"}),
        (PROMPT_REF, {"name": "language", "value": 7}),
        (PROMPT_REF, {"name": ["language"], "value": "p"}),
    ],
)
async def test_badly_shaped_completion_requests_are_invalid_params(ref: Any, argument: Any) -> None:
    params: dict[str, Any] = {}
    if ref is not None:
        params["ref"] = ref
    if argument is not None:
        params["argument"] = argument
    error = await error_of(completion_server(), request("completion/complete", **params))
    assert error["code"] == -32602


@pytest.mark.parametrize("context", [["language", "python"], "language=python", {"arguments": "python"}])
async def test_completion_context_that_is_not_an_object_of_arguments_is_invalid_params(context: Any) -> None:
    message = complete_request(PROMPT_REF, {"name": "framework", "value": ""}, context=context)
    error = await error_of(completion_server(), message)
    assert error["code"] == -32602


async def test_completion_without_registered_completions_is_method_not_found() -> None:
    server = Server("c")
    server.add_prompt(lambda language: language, name="code_review")
    error = await error_of(server, complete_request(PROMPT_REF, {"name": "language", "value": ""}))
    assert error["code"] == -32601


def test_completion_registration_needs_exactly_one_reference() -> None:
    server = Server("c")
    with pytest.raises(ValueError, match="exactly one"):
        server.completion(argument="x")
    with pytest.raises(ValueError, match="exactly one"):
        server.completion(argument="x", prompt="p", resource="r://x")


async def test_completion_result_messages_are_complete_results_with_server_info() -> None:
    writer = await exchange(completion_server(), complete_request(PROMPT_REF, {"name": "language", "value": "r"}))
    result = writer.response["result"]
    assert result["resultType"] == "complete"
    assert result["completion"]["values"] == ["rust", "ruby"]
    assert writer.notifications == []


async def test_a_json_resource_returning_an_empty_list_sends_the_json_text() -> None:
    server = Server("empty")
    server.add_resource(lambda: [], "mem://empty")
    result = await result_of(server, request("resources/read", uri="mem://empty"))
    assert result["contents"] == [{"uri": "mem://empty", "mimeType": "application/json", "text": "[]"}]


async def test_a_template_read_without_a_required_query_variable_is_invalid_params() -> None:
    server = Server("q")
    server.add_resource(lambda term: f"found {term}", "search://q{?term}")
    error = await error_of(server, request("resources/read", uri="search://q"))
    assert error["code"] == -32602 and "gives no value for term" in error["message"]
    assert (await read(server, "search://q?term=c++"))["contents"][0]["text"] == "found c++"


async def test_a_prompt_that_raises_names_the_prompt_not_the_exception_text() -> None:
    server = Server("p")

    @server.prompt
    def fragile() -> str:
        raise KeyError("secret-internal-key")

    error = await error_of(server, request("prompts/get", name="fragile"))
    assert error["code"] == -32603 and error["message"] == "Prompt 'fragile' failed (KeyError)"
    assert "secret" not in str(error)
