"""A server for end-to-end tests: tools that misbehave in the ways real tools do."""

import logging
import os
import subprocess
import sys

import anyio

from mcpcore import Context, Server

server = Server("e2e", version="0.0.1")


@server.tool
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool
def chatty(text: str) -> str:
    """Print to stdout, log, and run a child process that writes to stdout."""
    print("print() output must not reach the protocol stream")
    sys.stdout.write("neither must sys.stdout.write\n")
    logging.getLogger("chatty").warning("nor logging")
    subprocess.run([sys.executable, "-c", "print('nor a child process')"], check=True)
    os.write(1, b"nor a raw write to fd 1\n")
    return text


@server.tool
async def wait_for_cancel(marker: str) -> str:
    """Block until cancelled; record the cancellation in the file `marker`."""
    try:
        await anyio.sleep_forever()
    finally:
        with open(marker, "w") as out:
            out.write("cancelled")
    return "unreachable"


@server.tool
async def sleep_then_reply(seconds: float) -> str:
    """Sleep, then answer (used to check that EOF waits for in-flight calls)."""
    await anyio.sleep(seconds)
    return f"slept {seconds}"


@server.tool
async def log_levels(ctx: Context) -> str:
    """Send one log message at each of three levels."""
    await ctx.debug("debug detail")
    await ctx.info("info note")
    await ctx.error("error report")
    return "logged"


@server.tool
def fails(text: str) -> str:
    """Raise, so the traceback goes to the log and the model gets an isError result."""
    raise ValueError(f"tool failure marker {text}")
