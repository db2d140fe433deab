"""A second stdio reference: a blocking Python line loop answering every line with a fixed JSON line.

No event loop at all, so it shows what a plain read-write loop costs; the ceiling
an asyncio server is held to is `ceiling_stdio.py`.
"""

import sys

REPLY = b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello"}],"resultType":"complete"}}\n'

out = sys.stdout.buffer
for _line in sys.stdin.buffer:
    out.write(REPLY)
    out.flush()
