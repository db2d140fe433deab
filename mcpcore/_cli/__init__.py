"""The command line: the `mcpcore` console script and running a server in this process.

`main` parses `mcpcore run|dev|inspect|call|read|prompt|config` (settings from
`mcpcore.toml` and the environment beneath it: `settings`); `runner` serves a
`Server` over stdio or HTTP in this process (`Server.run` calls it; `mcpcore.asgi`
and `mcpcore.testing` start transports too, for an ASGI server and a test);
`reload` restarts a child on source changes (`mcpcore dev`); `commands` are the
inner-loop commands; `clientconfig` writes a client's configuration.

The top layer: it may import everything, and nothing imports it but
`mcpcore.__main__` and `Server.run`.
"""
