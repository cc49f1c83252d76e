// call-tool.mjs: one tools/call through the official MCP TypeScript SDK's
// client, as a host makes it, reported as JSON lines on stdout.
//
//   MCP_TOKEN=<bearer token> node test/mcpts/call-tool.mjs '<request JSON>'
//
// The request: {"url": "http://…/mcp", "tool": "<name>", "arguments": {…},
// "host": {…}}. Without "host" the client keeps the SDK's defaults (a 60 s
// request timeout, no progress); with it, the settings docs/mcp.md gives a
// host: {"progress": true, "timeoutMs": 10000, "resetTimeoutOnProgress": true}.
// With "elicitation": true the client declares the elicitation capability
// and answers every question by accepting it, with "answer" as its content.
//
// Lines, each with "atMs" (milliseconds since the script started):
//   {"event":"connected","protocolVersion":"…"}
//   {"event":"progress","progress":1,"message":"…"}
//   {"event":"asked","message":"…"}       the server asked the user
//   {"event":"result","result":{…}}        the call's answer
//   {"event":"error","message":"…","code":…} the call failed
// The script exits 0 after a result or an error, 1 when it cannot connect.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const started = Date.now();
const say = (event, fields) => {
  process.stdout.write(JSON.stringify({ event, atMs: Date.now() - started, ...fields }) + '\n');
};

const req = JSON.parse(process.argv[2] ?? '{}');
const host = req.host ?? {};
const transport = new StreamableHTTPClientTransport(new URL(req.url), {
  requestInit: { headers: { Authorization: `Bearer ${process.env.MCP_TOKEN ?? ''}` } },
});
const client = new Client({ name: 'once-e2e-ts', version: '0.0.1' },
  host.elicitation ? { capabilities: { elicitation: {} } } : undefined);
if (host.elicitation) {
  client.setRequestHandler(ElicitRequestSchema, (request) => {
    say('asked', { message: request.params.message ?? '' });
    return { action: 'accept', content: host.answer ?? {} };
  });
}
try {
  await client.connect(transport);
} catch (err) {
  say('error', { message: `connect: ${err?.message ?? err}` });
  process.exit(1);
}
say('connected', { protocolVersion: transport.protocolVersion ?? null });

const options = {};
if (host.progress) {
  options.onprogress = (p) => say('progress', { progress: p.progress, message: p.message ?? '' });
}
if (host.timeoutMs) {
  options.timeout = host.timeoutMs;
}
if (host.resetTimeoutOnProgress) {
  options.resetTimeoutOnProgress = true;
}
try {
  const result = await client.callTool({ name: req.tool, arguments: req.arguments ?? {} }, undefined, options);
  say('result', { result });
} catch (err) {
  say('error', { message: String(err?.message ?? err), code: err?.code ?? null });
}
// The transport may hold a dead connection open: leave without waiting for it.
process.exit(0);
