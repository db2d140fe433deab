"""mcpcore: an asyncio-native Model Context Protocol server runtime.

The public API: `Server` and its decorators, the `Context` injected into
tools, content helpers, and `McpError` for protocol-level failures.
"""

__version__ = "0.1.0"

from .call import Call, Writer
from .content import Audio, EmbeddedResource, Image, ResourceLink, ToolResult
from .context import Context
from .inputs import Elicit, ElicitAnswer, ElicitUrl, InputRequired, ListRoots, Root, Sample, SampleAnswer
from .prompts import Message
from .server import Server
from .wire import McpError

__all__ = [
    "Audio",
    "Call",
    "Context",
    "Elicit",
    "ElicitAnswer",
    "ElicitUrl",
    "EmbeddedResource",
    "Image",
    "InputRequired",
    "ListRoots",
    "McpError",
    "Message",
    "ResourceLink",
    "Root",
    "Sample",
    "SampleAnswer",
    "Server",
    "ToolResult",
    "Writer",
    "__version__",
]
