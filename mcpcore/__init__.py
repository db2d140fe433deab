"""mcpcore: an asyncio-native Model Context Protocol server runtime.

The public API: `Server` and its decorators, the `Context` injected into
tools, content helpers, `ToolError` for failures the model should read, and
`McpError` (with `InvalidParams` and `ResourceNotFound`) for protocol-level failures.
"""

__version__ = "0.1.0"

from .call import Call, Writer
from .content import Audio, EmbeddedResource, Image, ResourceLink, ToolResult
from .context import Context
from .inputs import Elicit, ElicitAnswer, ElicitUrl, InputRequired, ListRoots, Root, Sample, SampleAnswer
from .prompts import Message
from .server import Server
from .typeschema import Field
from .wire import InvalidParams, McpError, ResourceNotFound, ToolError

__all__ = [
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
