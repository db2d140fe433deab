"""The stdio ceiling: a raw Python line loop answering every line with a fixed JSON line."""

import sys

REPLY = b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello"}],"resultType":"complete"}}\n'

out = sys.stdout.buffer
for _line in sys.stdin.buffer:
    out.write(REPLY)
    out.flush()
