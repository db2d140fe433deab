"""The bench server (mcpcore_bench.py) as an ASGI app, for uvicorn:

    MCPCORE_BENCH_ASYNC=1 uvicorn --app-dir benchmarks/servers asgi_bench:app --port 8000 --http h11
"""

from mcpcore_bench import server

from mcpcore import asgi

app = asgi.app(server)  # the built-in server's defaults
