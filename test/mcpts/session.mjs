// session.mjs: one session of an official MCP TypeScript client, as a
// host runs it, through a list of steps; reported as JSON lines on stdout.
//
//   MCP_TOKEN=<bearer token> node test/mcpts/session.mjs '<request JSON>'
//
// The request: {"url": "http://…/mcp", "sdk": "v1" | "v2", "steps": [...],
// "answerURL": "http://127.0.0.1:…"}.
//   - "v1" is @modelcontextprotocol/sdk, which speaks 2025-11-25.
//   - "v2" is @modelcontextprotocol/client with versionNegotiation 'auto',
//     which reaches 2026-07-28 where the server offers it.
// A step is {"list": true} or {"tool": "<name>", "arguments": {…}}.
// With "answerURL", the client declares the elicitation capability and
// plays its user by posting each question's params there: the JSON
// answer is the user's (in v2, at 2026-07-28, the SDK fulfils the
// input_required rounds itself, through this same handler).
//
// Lines:
//   {"event":"connected","protocolVersion":"…"}
//   {"event":"listed","tools":["…"]}
//   {"event":"asked","message":"…"}        the server asked the user
//   {"event":"result","result":{…}}         a call's answer
//   {"event":"error","message":"…"}         a step failed; no more steps run
// The script exits 0 after its steps or an error, 1 when it cannot connect.
import * as v1 from '@modelcontextprotocol/sdk/client/index.js';
import * as v1http from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import * as v2 from '@modelcontextprotocol/client';

const say = (event, fields) => process.stdout.write(JSON.stringify({ event, ...fields }) + '\n');

const req = JSON.parse(process.argv[2] ?? '{}');
const requestInit = { headers: { Authorization: `Bearer ${process.env.MCP_TOKEN ?? ''}` } };
const info = { name: 'once-e2e-ts-' + req.sdk, version: '0.0.1' };
const capabilities = req.answerURL ? { elicitation: { form: {} } } : {};
const answer = async (request) => {
  say('asked', { message: request.params.message ?? '' });
  const res = await fetch(req.answerURL, { method: 'POST', body: JSON.stringify(request.params) });
  return await res.json();
};
// A call waits for its outcome up to the gateway's call timeout.
const timeout = 170_000;

let client, transport, version, callTool;
if (req.sdk === 'v2') {
  client = new v2.Client(info, { capabilities, versionNegotiation: { mode: 'auto' } });
  if (req.answerURL) {
    client.setRequestHandler('elicitation/create', answer);
  }
  transport = new v2.StreamableHTTPClientTransport(new URL(req.url), { requestInit });
  version = () => client.getNegotiatedProtocolVersion();
  callTool = (params) => client.callTool(params, { timeout });
} else {
  client = new v1.Client(info, { capabilities });
  if (req.answerURL) {
    client.setRequestHandler(ElicitRequestSchema, answer);
  }
  transport = new v1http.StreamableHTTPClientTransport(new URL(req.url), { requestInit });
  version = () => transport.protocolVersion;
  callTool = (params) => client.callTool(params, undefined, { timeout });
}
try {
  await client.connect(transport);
} catch (err) {
  say('error', { message: `connect: ${err?.message ?? err}` });
  process.exit(1);
}
say('connected', { protocolVersion: version() ?? null });

for (const step of req.steps ?? []) {
  try {
    if (step.list) {
      const list = await client.listTools();
      say('listed', { tools: list.tools.map((t) => t.name) });
    } else {
      const result = await callTool({ name: step.tool, arguments: step.arguments ?? {} });
      say('result', { result });
    }
  } catch (err) {
    say('error', { message: String(err?.message ?? err) });
    break;
  }
}
// The transport may hold a connection open: leave without waiting for it.
process.exit(0);
