"""I/O for mcpcore: the stdio transport (and, later, HTTP). Imports `mcpcore`, never the reverse."""
