-- wrk script: every request is one 2026-07-28 tools/call with the headers a
-- conforming client sends. The tool and its arguments come from the command
-- line: wrk ... -s mcp.lua -- <tool> '<arguments JSON>' [<extra _meta JSON members>]
local version = "2026-07-28"

function init(args)
  local tool = args[1] or "echo"
  local arguments = args[2] or '{"text":"hello"}'
  local extra = args[3] and ("," .. args[3]) or ""
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Accept"] = "application/json, text/event-stream"
  wrk.headers["MCP-Protocol-Version"] = version
  wrk.headers["Mcp-Method"] = "tools/call"
  wrk.headers["Mcp-Name"] = tool
  wrk.body = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"' .. tool ..
    '","arguments":' .. arguments .. ',"_meta":{"io.modelcontextprotocol/protocolVersion":"' .. version ..
    '","io.modelcontextprotocol/clientCapabilities":{}' .. extra .. '}}}'
end
