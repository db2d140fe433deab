-- wrk script: tools/call requests inside one 2025-era session opened beforehand
-- (benchmarks/session_load.py opens it):
--   wrk ... -s session.lua -- <Mcp-Session-Id> <protocol version> [<tool> '<arguments JSON>']
-- No _meta (the session holds what it carried); each request has an id of its own,
-- as a session refuses an id already in flight. mcp.lua is the stateless twin: it
-- sends one fixed request, which wrk then need not build per request.
local head, tail = nil, nil
local threads, counter = 0, 0

function setup(thread)
  threads = threads + 1
  thread:set("thread_number", threads)
end

function init(args)
  local tool = args[3] or "echo"
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Accept"] = "application/json, text/event-stream"
  wrk.headers["Mcp-Session-Id"] = args[1]
  wrk.headers["MCP-Protocol-Version"] = args[2]
  wrk.headers["Mcp-Method"] = "tools/call"
  wrk.headers["Mcp-Name"] = tool
  head = '{"jsonrpc":"2.0","id":'
  tail = ',"method":"tools/call","params":{"name":"' .. tool .. '","arguments":' .. (args[4] or '{"text":"hello"}') .. "}}"
end

function request()
  counter = counter + 1
  return wrk.format(nil, nil, nil, head .. ((thread_number or 0) * 1000000000 + counter) .. tail)
end
