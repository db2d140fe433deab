"""The app: user functions turned into tools, resources and prompts.

A function is read once at registration (`signature`, `docstrings`, `typeschema`);
its arguments are coerced and checked per call (`coercion`, `_wire.validation`), it
gets a `Context` (`context`), and what it returns becomes content (`content`). Each
kind has its module (`tools`, `resources`, `prompts`, `completions`) and lives in
an ordered, pageable `Catalog` (`catalog`).

Above the runtime (`_runtime`); below the public `tasks` and `extensions`, and the
server (`_serving`) that registers and serves them.
"""
