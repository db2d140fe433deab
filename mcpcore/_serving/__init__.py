"""Serving: the `Server` and the request path inside the core.

`server` is the app API (`mcpcore.Server`): it holds the catalogs and settings
and hands each call to the `Dispatcher` (`dispatch`), which routes a request,
checks its `_meta` and runs its method on the 2026-07-28 wire, or passes a call
of a 2025-era session to `legacy`, which serves the same app on that wire. Both
read the server as an `App` (`shape`: a protocol), so neither imports `server`.

Above the app (`_app`) and the public `tasks`, `extensions`, `routes` and
`middleware` it composes; below `mcpcore.transports`, which frame the calls, and
the command line (`_cli`).
"""
