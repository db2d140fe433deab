"""Write flow control (transports/_flow.py): a paused transport holds writers until it resumes."""

from __future__ import annotations

import asyncio

import pytest

from mcpcore.transports._flow import WriteFlow

pytestmark = pytest.mark.anyio


async def test_a_cancelled_waiter_does_not_take_the_others_replies_with_it() -> None:
    flow = WriteFlow()
    flow.pause_writing()
    first = asyncio.ensure_future(flow.drain())
    second = asyncio.ensure_future(flow.drain())
    await asyncio.sleep(0)
    first.cancel()
    await asyncio.sleep(0)
    assert not second.done()
    flow.resume_writing()
    await second  # resumes normally: the shared future was not cancelled
    assert first.cancelled() and second.done() and not second.cancelled()
