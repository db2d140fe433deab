// The official TypeScript SDK v1 client against an mcpcore server: one run of every feature.
//   node ts_client.mjs stdio COMMAND ARG...  |  node ts_client.mjs http URL  |  node ts_client.mjs http-stateless URL
//   node ts_client.mjs sse URL   (the deprecated HTTP+SSE transport, protocol 2024-11-05; URL is its stream's)
// Prints one JSON object with what it saw; exits 1 on any error. Against a stateless server
// (`http-stateless`) the elicitation cannot work: what the server said instead is recorded.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [kind, target, ...args] = process.argv.slice(2);
const transport = kind === "stdio"
  ? new StdioClientTransport({ command: target, args, stderr: "inherit" })
  : kind === "sse" ? new SSEClientTransport(new URL(target)) : new StreamableHTTPClientTransport(new URL(target));
const client = new Client({ name: "ts-interop", version: "1.0.0" }, { capabilities: { elicitation: {} } });
client.setRequestHandler(ElicitRequestSchema, async () => ({ action: "accept", content: { name: "Ada" } }));

const unicode = "line\u2028separator, nul \u0000, emoji 🙂🚀";
const big = "x".repeat(1024 * 1024);
await client.connect(transport);
// The SSE transport keeps the negotiated version to itself (it sends it as a header).
const seen = { protocolVersion: transport.protocolVersion ?? transport._protocolVersion ?? null, server: client.getServerVersion() };
seen.tools = (await client.listTools()).tools.map((t) => t.name);
seen.bigRoundTrip = (await client.callTool({ name: "echo", arguments: { text: big } })).content[0].text === big;
seen.unicode = (await client.callTool({ name: "echo", arguments: { text: unicode } })).content[0].text === unicode;
seen.resource = (await client.readResource({ uri: "demo://note" })).contents[0].text;
seen.prompt = (await client.getPrompt({ name: "plan", arguments: { city: "Rome" } })).messages[0].content.text;
const progress = [];
await client.callTool({ name: "steps", arguments: {} }, undefined, { onprogress: (p) => progress.push(p.progress) });
seen.progress = progress;
const greeting = client.callTool({ name: "greet", arguments: {} });
seen.greeting = kind === "http-stateless"
  ? await greeting.then((result) => `answered: ${JSON.stringify(result)}`, (error) => `refused: ${error.message}`)
  : (await greeting).content[0].text;
if (kind.startsWith("http")) await transport.terminateSession(); // DELETE
await client.close(); // over sse: closing the stream ends the session
console.log(JSON.stringify(seen));
