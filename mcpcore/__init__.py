"""mcpcore: an asyncio-native Model Context Protocol server runtime.

The public API: `Server` and its decorators, the `Context` injected into
tools, `Depends` for values made per call, content helpers, `ToolError` for failures the model should read, and
`McpError` (with `InvalidParams` and `ResourceNotFound`) for protocol-level failures.
"""

__version__ = "0.1.0"

from ._app.content import Audio, EmbeddedResource, Image, ResourceLink, ToolResult
from ._app.context import Context
from ._app.depends import Depends
from ._app.prompts import Message
from ._app.typeschema import Field
from ._runtime.call import Call, Writer
from ._runtime.clientstate import ClientState, ClientStateFull, ClientStateLimits
from ._runtime.idempotency import IdempotencyLimits
from ._runtime.results import ResultBudget, ResultStoreLimits
from ._serving.server import Server
from ._wire.icons import Icon
from ._wire.inputs import Elicit, ElicitAnswer, ElicitUrl, InputRequired, ListRoots, Root, Sample, SampleAnswer
from ._wire.jsonrpc import InvalidParams, McpError, ResourceNotFound, ToolError

__all__ = [
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
