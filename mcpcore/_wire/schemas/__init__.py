"""The official MCP wire schemas, and checks of what a server sends against them.

`check(message, method)` validates a parsed message as a 2026-07-28 JSON-RPC
message and, when the request's method is known, as that method's specific
response or error type; `check_legacy(message, method)` does the same against
the 2025-11-25 schema for a session's traffic (server-to-client requests
included). Each raises (`jsonschema.ValidationError` or `AssertionError`) on
a message that breaks the schema, and returns it otherwise. Used by
`mcpcore.testing.Client(strict=True)` and by mcpcore's own tests; they need
`jsonschema`, which is not a runtime dependency (imported on first check).

`<version>/schema.json` are unmodified copies of the schemas the specification
project publishes (see NOTICE.md); `MCP_SPEC_DIR` points the checks at another
folder laid out the same way. `ext-tasks/schema.json`, the Tasks extension's own
schema (always the shipped copy), checks task results and `notifications/tasks`.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

__all__ = ["check", "check_legacy", "validator"]

MODERN, LEGACY = "2026-07-28", "2025-11-25"


def schema_path(version: str) -> Path:
    folder = os.environ.get("MCP_SPEC_DIR")
    return (Path(folder) if folder else Path(__file__).resolve().parent) / version / "schema.json"


LEGACY_RESULTS = {
    "initialize": "InitializeResult",
    "ping": "EmptyResult",
    "logging/setLevel": "EmptyResult",
    "resources/subscribe": "EmptyResult",
    "resources/unsubscribe": "EmptyResult",
    "tools/list": "ListToolsResult",
    "tools/call": "CallToolResult",
    "resources/list": "ListResourcesResult",
    "resources/templates/list": "ListResourceTemplatesResult",
    "resources/read": "ReadResourceResult",
    "prompts/list": "ListPromptsResult",
    "prompts/get": "GetPromptResult",
    "completion/complete": "CompleteResult",
}
LEGACY_SERVER_REQUESTS = {"elicitation/create": "ElicitRequest", "sampling/createMessage": "CreateMessageRequest", "roots/list": "ListRootsRequest"}

RESULT_TYPES = {
    "server/discover": "DiscoverResultResponse",
    "tools/list": "ListToolsResultResponse",
    "tools/call": "CallToolResultResponse",
    "resources/list": "ListResourcesResultResponse",
    "resources/templates/list": "ListResourceTemplatesResultResponse",
    "resources/read": "ReadResourceResultResponse",
    "prompts/list": "ListPromptsResultResponse",
    "prompts/get": "GetPromptResultResponse",
    "completion/complete": "CompleteResultResponse",
    "subscriptions/listen": "SubscriptionsListenResultResponse",
}
ERROR_TYPES = {
    -32020: "HeaderMismatchError",
    -32021: "MissingRequiredClientCapabilityError",
    -32022: "UnsupportedProtocolVersionError",
}
NOTIFICATION_TYPES = {
    "notifications/progress": "ProgressNotification",
    "notifications/message": "LoggingMessageNotification",
    "notifications/cancelled": "CancelledNotification",
    "notifications/resources/updated": "ResourceUpdatedNotification",
    "notifications/resources/list_changed": "ResourceListChangedNotification",
    "notifications/tools/list_changed": "ToolListChangedNotification",
    "notifications/prompts/list_changed": "PromptListChangedNotification",
    "notifications/subscriptions/acknowledged": "SubscriptionsAcknowledgedNotification",
}


TASKS_SCHEMA = Path(__file__).resolve().parent / "ext-tasks" / "schema.json"
TASK_RESULTS = {"tasks/get": "GetTaskResult", "tasks/update": "UpdateTaskResult", "tasks/cancel": "CancelTaskResult"}


@functools.lru_cache(maxsize=None)
def _schema(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


@functools.lru_cache(maxsize=None)
def validator(definition: str, path: Path | None = None) -> Any:
    """A `jsonschema` validator for one definition of the 2026-07-28 schema (or the schema at `path`)."""
    from jsonschema import Draft202012Validator

    path = path or schema_path(MODERN)
    schema = _schema(path)
    assert definition in schema["$defs"], f"{definition} is not in the wire schema {path}"
    return Draft202012Validator({"$ref": f"#/$defs/{definition}", "$defs": schema["$defs"]})


def check_legacy(message: Any, method: str | None = None) -> Any:
    """Assert that a message the server sent to a 2025-era session is valid on the 2025-11-25 wire."""
    legacy = functools.partial(validator, path=schema_path(LEGACY))
    legacy("JSONRPCMessage").validate(message)
    if "method" in message:
        if "id" in message:
            definition = LEGACY_SERVER_REQUESTS.get(message["method"])
            assert definition, f"the server sent an unknown request {message['method']!r}"
        else:
            definition = NOTIFICATION_TYPES.get(message["method"])
            assert definition and "subscriptions" not in message["method"], f"unexpected notification {message['method']!r}"
        legacy(definition).validate(message)
    elif "result" in message:
        result = message["result"]
        assert not {"resultType", "ttlMs", "cacheScope"} & set(result), f"2026-only fields in a legacy result: {result}"
        assert "io.modelcontextprotocol/serverInfo" not in result.get("_meta", {}), "no serverInfo stamp on legacy"
        if method in LEGACY_RESULTS:
            legacy(LEGACY_RESULTS[method]).validate(result)
    return message


def check(message: Any, method: str | None = None) -> Any:
    """Assert that a message the server sent is valid on the 2026-07-28 wire."""
    validator("JSONRPCMessage").validate(message)
    if "method" in message:
        assert "id" not in message, "the server must never send requests"
        if message["method"] == "notifications/tasks":
            validator("TaskStatusNotification", TASKS_SCHEMA).validate(message)
            return message
        definition = NOTIFICATION_TYPES.get(message["method"])
        assert definition, f"the server sent an unknown notification {message['method']!r}"
        validator(definition).validate(message)
    elif "error" in message:
        definition = ERROR_TYPES.get(message["error"]["code"], "JSONRPCErrorResponse")
        validator(definition).validate(message)
        assert not -32099 <= message["error"]["code"] <= -32023, "undefined MCP-reserved error code"
    else:
        result = message["result"]
        assert result.get("resultType") in ("complete", "input_required", "task"), "every result needs resultType"
        assert "io.modelcontextprotocol/serverInfo" in result.get("_meta", {}), "every result carries serverInfo"
        if result["resultType"] == "task":  # the Tasks extension's handle, for a tools/call only
            assert method in (None, "tools/call"), f"a task handle answers tools/call, not {method}"
            validator("CreateTaskResult", TASKS_SCHEMA).validate(result)
        elif method in TASK_RESULTS:
            validator(TASK_RESULTS[method], TASKS_SCHEMA).validate(result)
        elif method in RESULT_TYPES:
            validator(RESULT_TYPES[method]).validate(message)
    return message
