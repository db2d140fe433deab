"""`python -m mcpcore` is the `mcpcore` console script."""

from .cli import main

main()
