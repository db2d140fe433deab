"""`python -m mcpcore` is the `mcpcore` console script."""

from ._cli.main import main

main()
