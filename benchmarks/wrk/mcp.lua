-- wrk script: every request is one 2026-07-28 request with the headers a
-- conforming client sends. By default a tools/call whose tool and arguments come
-- from the command line:
--   wrk ... -s mcp.lua -- <tool> '<arguments JSON>' [<extra _meta JSON members>]
-- e.g. `-- progress3 '{}' '"progressToken":"p"'` asks for progress (an SSE answer).
-- A first argument holding a slash names a method without a tool instead (tool
-- names cannot hold one): `-- tools/list`.
local version = "2026-07-28"

function init(args)
  local target = args[1] or "echo"
  local extra = (args[3] and args[3] ~= "") and ("," .. args[3]) or ""
  local meta = '"_meta":{"io.modelcontextprotocol/protocolVersion":"' .. version ..
    '","io.modelcontextprotocol/clientCapabilities":{}' .. extra .. '}'
  local method, params = "tools/call", nil
  if target:find("/", 1, true) then
    method, params = target, "{" .. meta .. "}"
  else
    params = '{"name":"' .. target .. '","arguments":' .. (args[2] or '{"text":"hello"}') .. "," .. meta .. "}"
    wrk.headers["Mcp-Name"] = target
  end
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Accept"] = "application/json, text/event-stream"
  wrk.headers["MCP-Protocol-Version"] = version
  wrk.headers["Mcp-Method"] = method
  wrk.body = '{"jsonrpc":"2.0","id":1,"method":"' .. method .. '","params":' .. params .. "}"
end
