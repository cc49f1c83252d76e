// An MCP host's client, as the official TypeScript SDK builds one, that
// connects to the gateway through OAuth: its first request is answered 401,
// it discovers the gateway's protected-resource metadata and the
// authorization server it names, gets a token with the client_credentials
// grant, lists the tools and makes one call. It prints, as JSON on stdout,
// every HTTP exchange it made (method, URL, status), the protocol version it
// negotiated, the tools and the call's result.
//
//   node oauth-client-credentials.mjs URL CLIENT_ID CLIENT_SECRET TOOL ARGUMENTS_JSON
//
// The CA of the gateway and of the issuer comes from NODE_EXTRA_CA_CERTS.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ClientCredentialsProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';

const [url, clientId, clientSecret, tool, args] = process.argv.slice(2);
if (!args) {
  console.error('usage: oauth-client-credentials.mjs URL CLIENT_ID CLIENT_SECRET TOOL ARGUMENTS_JSON');
  process.exit(2);
}

const exchanges = [];
let protocolVersion;
const recordingFetch = async (input, init) => {
  const res = await fetch(input, init);
  const headers = new Headers(init?.headers);
  if (headers.get('mcp-protocol-version')) {
    protocolVersion = headers.get('mcp-protocol-version');
  }
  exchanges.push({
    method: init?.method ?? 'GET',
    url: String(input instanceof Request ? input.url : input),
    status: res.status,
    wwwAuthenticate: res.headers.get('www-authenticate') ?? undefined,
  });
  return res;
};

const provider = new ClientCredentialsProvider({ clientId, clientSecret });
const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider, fetch: recordingFetch });
const client = new Client({ name: 'e2e-oauth-host', version: '0.0.1' });
try {
  await client.connect(transport);
  const tools = await client.listTools();
  const result = await client.callTool({ name: tool, arguments: JSON.parse(args) });
  console.log(JSON.stringify({
    exchanges,
    protocolVersion: protocolVersion ?? transport.protocolVersion,
    tools: tools.tools.map((t) => t.name),
    result,
  }));
} catch (err) {
  console.log(JSON.stringify({ exchanges, error: String(err?.message ?? err) }));
  process.exitCode = 1;
} finally {
  await client.close().catch(() => {});
}
