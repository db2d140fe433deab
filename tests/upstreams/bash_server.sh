#!/usr/bin/env bash
# A stdio MCP server in Bash and jq that speaks only protocol 2026-07-28, the way a minimal Bash SDK
# does: it reads one JSON-RPC message per line, answers each request with one line, in order (one at a
# time: a `slow` call holds up the requests behind it), ignores notifications, and exits on EOF.
# mcpcore's gateway tests put it upstream. A `case` on the method picks the answer; jq builds every
# answer from the request line (never evaluated by the shell).
#
# Serves: server/discover; tools echo {text}, add {a, b}, slow {seconds} (sleeps, 0 to 60 s; a
# progress notification first when the request has a progressToken) and ask (an input_required
# result with a form elicitation and requestState; the retry with inputResponses answers with the
# name given); two static text resources; the prompt greet {name}.
set -u

command -v jq >/dev/null 2>&1 || { echo "bash_server.sh: jq is not installed" >&2; exit 127; }

readonly VERSION=2026-07-28
readonly SERVER_INFO='{"name": "bash-upstream", "version": "1.0.0"}'
readonly ASK_STATE=bash-upstream/ask/1  # the requestState `ask` issues; tampering can only fail the call

# Helpers shared by every jq program below; `.` is the request.
readonly LIB='
def stamp: {"io.modelcontextprotocol/serverInfo": $server};
def respond(result): {jsonrpc: "2.0", id, result: (result + {_meta: stamp})};
def complete(result): respond({resultType: "complete"} + result);
def cached(result): complete(result + {ttlMs: 60000, cacheScope: "public"});  # the lists, read, discover
def failure(code; message): {jsonrpc: "2.0", id, error: {code: code, message: message}};
def failure(code; message; data): data as $data | failure(code; message) | .error.data = $data;
def text(value): {content: [{type: "text", text: value}]};
def tool_error(message): text(message) + {isError: true};
def arguments: .params.arguments // {};
def capabilities: .params._meta["io.modelcontextprotocol/clientCapabilities"];
def request_id: (type == "string") or (type == "number" and . == floor);  # never null on 2026-07-28
'

# What a line is: "verdict US method US name", US the unit separator \x1f (one field each for `read`:
# control characters in a field become "?", so a method matches only when it is exactly one of the
# `case` below). The verdict is parse, invalid, notification, initialize, no-meta, old-version,
# bad-arguments or ok; `name` is params.name (a tool's or a prompt's) when it is a string.
readonly CLASSIFY='
def meta: (.params | objects | ._meta | objects) // {};
def verdict:
  if type != "object" or .jsonrpc != "2.0" or (.method | type) != "string" then "invalid"
  elif has("id") | not then "notification"
  elif .id | request_id | not then "invalid"
  elif .method == "initialize" then "initialize"
  elif (meta["io.modelcontextprotocol/protocolVersion"] | type) != "string"
    or (meta["io.modelcontextprotocol/clientCapabilities"] | type) != "object" then "no-meta"
  elif meta["io.modelcontextprotocol/protocolVersion"] != $version then "old-version"
  elif (arguments | type) != "object" then "bad-arguments"
  else "ok" end;
if try (fromjson | true) catch false
then fromjson | [verdict, (objects | .method | strings), (objects | .params | objects | .name | strings)]
  | map(gsub("[[:cntrl:]]"; "?")) | join("\u001f")
else "parse" end
'

TOOLS='cached({tools: [
  {name: "echo", description: "Returns the text it is given.",
   inputSchema: {type: "object", properties: {text: {type: "string"}}, required: ["text"]}},
  {name: "add", description: "Adds two numbers.",
   inputSchema: {type: "object", properties: {a: {type: "number"}, b: {type: "number"}}, required: ["a", "b"]}},
  {name: "slow", description: "Sleeps for the given number of seconds (0 to 60), then says so.",
   inputSchema: {type: "object", properties: {seconds: {type: "number", minimum: 0, maximum: 60}},
                 required: ["seconds"]}},
  {name: "ask", description: "Asks the user for their name (form elicitation) and greets them.",
   inputSchema: {type: "object", properties: {}}}
]})'

ECHO='if (arguments.text | type) == "string" then complete(text(arguments.text))
  else complete(tool_error("echo needs the argument text, a string")) end'

ADD='if (arguments.a | type) == "number" and (arguments.b | type) == "number"
  then complete(text(arguments.a + arguments.b | tostring) + {structuredContent: {sum: (arguments.a + arguments.b)}})
  else complete(tool_error("add needs the arguments a and b, both numbers")) end'

# The seconds `slow` sleeps, rounded to milliseconds (a plain decimal), or nothing when out of range.
SLOW_SECONDS='arguments.seconds | numbers | select(0 <= . and . <= 60) | . * 1000 | round / 1000'
SLOW_PROGRESS='.params._meta.progressToken // empty
  | {jsonrpc: "2.0", method: "notifications/progress",
     params: {progressToken: ., progress: 0, total: 1, message: "sleeping \($seconds) s"}}'
SLOW_DONE='complete(text("slept \($seconds) s"))'

# ask: a form elicitation (only to a client that declared one) and, on the retry, the answer.
ASK='def form: capabilities.elicitation | if type == "object" then has("form") or (has("url") | not) else false end;
def question: {user_name: {method: "elicitation/create", params: {mode: "form", message: "What is your name?",
  requestedSchema: {type: "object", properties: {name: {type: "string", title: "Name"}}, required: ["name"]}}}};
((.params.inputResponses | objects | .user_name | objects) // {}) as $answer
| (($answer.content | objects | .name | strings) // null) as $name
| if form | not then
    failure(-32021; "ask needs form elicitation: declare it in clientCapabilities"; {requiredCapabilities: {elicitation: {form: {}}}})
  elif .params.requestState != null and .params.requestState != $state then
    failure(-32602; "requestState is not one this server issued")
  elif $answer.action == "accept" and $name != null then complete(text("Hello, \($name)!"))
  elif $answer.action == "decline" or $answer.action == "cancel" then complete(text("No name: the user chose to \($answer.action)."))
  else respond({resultType: "input_required", inputRequests: question, requestState: $state}) end'

RESOURCES='cached({resources: [
  {uri: "bash://upstream/greeting", name: "greeting", mimeType: "text/plain"},
  {uri: "bash://upstream/readme", name: "readme", mimeType: "text/markdown"}
]})'

READ='{"bash://upstream/greeting": {mimeType: "text/plain", text: "Hello from Bash."},
  "bash://upstream/readme": {mimeType: "text/markdown", text: "# bash-upstream\n\nA stdio MCP server in Bash and jq.\n"}
} as $files
| if (.params.uri | type) != "string" then failure(-32602; "resources/read needs params.uri, a string")
  elif $files[.params.uri] == null then failure(-32602; "Resource not found: \(.params.uri)"; {uri: .params.uri})
  else cached({contents: [{uri: .params.uri} + $files[.params.uri]]}) end'

PROMPTS='cached({prompts: [{name: "greet", description: "A greeting for someone.",
  arguments: [{name: "name", description: "Who to greet", required: true}]}]})'

GREET='if (arguments.name | type) != "string" then failure(-32602; "greet needs the argument name")
  else complete({description: "A greeting", messages: [{role: "user",
    content: {type: "text", text: "Say hello to \(arguments.name)."}}]}) end'

DISCOVER='cached({supportedVersions: [$version], capabilities: {tools: {}, resources: {}, prompts: {}},
  instructions: "A test upstream in Bash: echo, add, slow and ask; two text resources; the prompt greet."})'

# jq with the helpers and the values they use; the program and other jq options follow.
q() {
    local program=$1
    shift
    jq --arg version "$VERSION" --argjson server "$SERVER_INFO" --arg state "$ASK_STATE" "$@" "$LIB $program"
}

# One line built by program $1 from the request line; options for jq follow. A program that fails
# still answers, with -32603: no request goes unanswered.
answer() {
    local response
    if response=$(q "$@" -c <<<"$line") && [[ -n $response ]]; then
        printf '%s\n' "$response"
    else
        q '{jsonrpc: "2.0", id, error: {code: -32603, message: "Internal error"}}' -c <<<"$line"
    fi
}

# Sleep in the shell itself (a read that times out on a pipe no one writes to): a server killed
# mid-sleep leaves no `sleep` behind, nor one holding its stdout open.
pause() { read -r -t "$1" <> <(:) || true; }

slow() {
    local seconds
    seconds=$(q "$SLOW_SECONDS" -r <<<"$line")
    if [[ ! $seconds =~ ^[0-9]+(\.[0-9]+)?$ ]]; then
        answer 'complete(tool_error("slow needs the argument seconds, a number from 0 to 60"))'
        return
    fi
    q "$SLOW_PROGRESS" -c --arg seconds "$seconds" <<<"$line"  # nothing without a progressToken
    pause "$seconds"
    answer "$SLOW_DONE" --arg seconds "$seconds"
}

while IFS= read -r line || [[ -n $line ]]; do
    [[ $line =~ ^[[:space:]]*$ ]] && continue  # a blank line carries no message
    IFS=$'\x1f' read -r verdict method name < <(q "$CLASSIFY" -R -r <<<"$line")
    case $verdict in
        parse) # the id cannot be read, so the response has none (2026-07-28 types id as string | integer)
            jq -n -c '{jsonrpc: "2.0", error: {code: -32700, message: "Parse error: the line is not one JSON value"}}' ;;
        invalid) # the id only when it is one (a non-object line has none)
            answer '(if type == "object" and (.id | request_id) then {jsonrpc: "2.0", id} else {jsonrpc: "2.0"} end)
              + {error: {code: -32600, message: "Invalid Request: send a JSON-RPC 2.0 request (string or integer id) or notification"}}' ;;
        notification) ;;  # notifications/cancelled included: one request runs at a time, so it comes too late
        initialize)
            # A 2025-era client opens with initialize. versioning.mdx, Compatibility Matrix (Legacy client,
            # Modern server): "the server rejects `initialize` with a JSON-RPC error; the exact code is
            # implementation-defined", and "A server that supports only modern versions SHOULD name the
            # protocol versions it supports in any error it returns to an `initialize` request". So:
            # UnsupportedProtocolVersion (-32022), the version it asked for and the one supported.
            answer 'failure(-32022; "Unsupported protocol version: this server speaks only \($version) (no initialize; send _meta with each request)";
              {supported: [$version], requested: (.params.protocolVersion? // "" | if type == "string" then . else tojson end)})' ;;
        no-meta) # basic/index.mdx, _meta: "A request missing any required field is malformed; ... -32602"
            answer 'failure(-32602; "Invalid params: _meta must carry io.modelcontextprotocol/protocolVersion and io.modelcontextprotocol/clientCapabilities")' ;;
        bad-arguments)
            answer 'failure(-32602; "Invalid params: arguments must be an object")' ;;
        old-version) # versioning.mdx: "it MUST respond with an UnsupportedProtocolVersionError"
            answer 'failure(-32022; "Unsupported protocol version"; {supported: [$version], requested: .params._meta["io.modelcontextprotocol/protocolVersion"]})' ;;
        ok)
            case $method in
                server/discover) answer "$DISCOVER" ;;
                tools/list) answer "$TOOLS" ;;
                tools/call)
                    case $name in
                        echo) answer "$ECHO" ;;
                        add) answer "$ADD" ;;
                        slow) slow ;;
                        ask) answer "$ASK" ;;
                        # tools.mdx, Error Handling: an unknown tool is a protocol error, -32602
                        *) answer 'failure(-32602; if (.params.name | type) == "string" then "Unknown tool: \(.params.name)"
                                else "tools/call needs params.name, a string" end)' ;;
                    esac ;;
                resources/list) answer "$RESOURCES" ;;
                resources/read) answer "$READ" ;;
                prompts/list) answer "$PROMPTS" ;;
                prompts/get)
                    case $name in
                        greet) answer "$GREET" ;;
                        *) answer 'failure(-32602; "Unknown prompt: \(.params.name)")' ;;
                    esac ;;
                # changelog.mdx, 5: "Remove `ping`, `logging/setLevel`, and `notifications/roots/list_changed`"
                ping) answer 'failure(-32601; "Method not found: ping (removed in protocol 2026-07-28)")' ;;
                *) answer 'failure(-32601; "Method not found: \(.method)")' ;;
            esac ;;
    esac
done
exit 0
