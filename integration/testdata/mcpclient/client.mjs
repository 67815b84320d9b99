// The official MCP TypeScript client against a running toolhost: what
// TestMCPTypeScriptClient (integration/mcp_clients_test.go) runs with the
// pinned Node. Each check is asserted here; the script prints one JSON
// report, {"checks":[{"name","ok","detail"}]}, and exits 1 when any check
// failed, so the Go test fails on either.
//
// Its one argument is a JSON object: url (the host's /mcp), base (the
// host's http://host:port), tokens {editor, viewer}, item (the id the http
// tool is asked for), text (what the prompt tool summarises).
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';

const cfg = JSON.parse(process.argv[2]);
const checks = [];

// check runs one named check: it passes when fn returns without throwing.
async function check(name, fn) {
  try {
    const detail = await fn();
    checks.push({ name, ok: true, detail: detail ?? '' });
  } catch (err) {
    checks.push({ name, ok: false, detail: err?.stack ?? String(err) });
  }
}

// connect is a client of the host with a bearer token (none when token is
// empty) and any other transport options.
async function connect(token, options = {}) {
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  const transport = new StreamableHTTPClientTransport(new URL(cfg.url), { requestInit: { headers }, ...options });
  const client = new Client({ name: 'toolhost-ts-test', version: '1.0.0' });
  await client.connect(transport);
  return client;
}

// textOf is the text of a result's only text content.
function textOf(res) {
  const texts = res.content.filter((c) => c.type === 'text');
  assert.equal(texts.length, 1, `one text content, got ${JSON.stringify(res.content)}`);
  return texts[0].text;
}

// assertValue checks a successful result carries the value v per MCP: the
// text is the string itself for a string and JSON for any other value;
// structuredContent, when present, is an object: the value when it is an
// object, else {"result": v}.
function assertValue(res, v) {
  assert.notEqual(res.isError, true, `not an error: ${JSON.stringify(res)}`);
  const text = textOf(res);
  if (typeof v === 'string') {
    assert.equal(text, v, 'a string result is its text, unquoted');
  } else {
    assert.deepEqual(JSON.parse(text), v, 'the text is the value as JSON');
  }
  const isObject = v !== null && typeof v === 'object' && !Array.isArray(v);
  if (res.structuredContent !== undefined) {
    assert.deepEqual(res.structuredContent, isObject ? v : { result: v }, 'structuredContent');
  } else {
    assert.ok(!isObject, 'an object result is structuredContent');
  }
  assert.match(res._meta?.['toolhost/run'] ?? '', /^r/, 'the run id in _meta');
  return text;
}

// hostGet is a GET of the host's HTTP API with a token.
async function hostGet(path, token) {
  const resp = await fetch(cfg.base + path, { headers: { Authorization: `Bearer ${token}` } });
  assert.equal(resp.status, 200, `GET ${path}: ${resp.status} ${await resp.clone().text()}`);
  return resp.json();
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const editor = await connect(cfg.tokens.editor);

await check('tools/list', async () => {
  const { tools } = await editor.listTools();
  const names = tools.map((t) => t.name);
  for (const want of ['get_item', 'get_item_doc', 'summarise', 'item_name', 'py_value', 'py_steps', 'run_python']) {
    assert.ok(names.includes(want), `${want} is listed: ${names}`);
  }
  return names.join(' ');
});

// Every kind.
await check('http: a string', async () => assertValue(
  await editor.callTool({ name: 'get_item', arguments: { id: cfg.item } }), `item ${cfg.item}`));
await check('http: an object', async () => {
  const res = await editor.callTool({ name: 'get_item_doc', arguments: { id: cfg.item } });
  const doc = res.structuredContent;
  assert.equal(doc?.status, 200, `the response as structuredContent: ${JSON.stringify(res)}`);
  assert.deepEqual(doc.body, { id: cfg.item, name: `item ${cfg.item}` });
  return assertValue(res, doc);
});
await check('prompt with the fake model: a string', async () => assertValue(
  await editor.callTool({ name: 'summarise', arguments: { text: cfg.text } }), `echo: Summarise: ${cfg.text}`));
await check('graph: a string', async () => assertValue(
  await editor.callTool({ name: 'item_name', arguments: { id: cfg.item } }), `item ${cfg.item}`));

// Every result type, from python.
const values = {
  object: { a: 1, nested: { b: [true, null] } },
  string: 'plain words, not JSON',
  list: [1, 'two', { three: 3 }],
  number: 42,
  bool: true,
  null: null,
};
for (const [kind, v] of Object.entries(values)) {
  await check(`python: ${kind}`, async () => assertValue(
    await editor.callTool({ name: 'py_value', arguments: { kind } }), v));
}
await check('python: an error', async () => {
  const res = await editor.callTool({ name: 'py_value', arguments: { kind: 'error' } });
  assert.equal(res.isError, true, `isError: ${JSON.stringify(res)}`);
  assert.match(textOf(res), /the tool was asked to fail/);
  return textOf(res);
});
await check('an argument error', async () => {
  const res = await editor.callTool({ name: 'get_item', arguments: {} });
  assert.equal(res.isError, true, `isError: ${JSON.stringify(res)}`);
  assert.match(textOf(res), /\bid\b/, 'the error names the missing param');
  return textOf(res);
});

// Progress: what the tool prints, as notifications/progress before the result.
await check('progress', async () => {
  const updates = [];
  const res = await editor.callTool({ name: 'py_steps', arguments: {} }, CallToolResultSchema, {
    onprogress: (p) => updates.push(p),
  });
  assertValue(res, 3);
  const messages = updates.map((u) => u.message ?? '').join('\n');
  for (const step of ['step 1', 'step 2', 'step 3']) {
    assert.ok(messages.includes(step), `"${step}" came as progress: ${JSON.stringify(updates)}`);
  }
  assert.ok(messages.indexOf('step 1') < messages.indexOf('step 2') && messages.indexOf('step 2') < messages.indexOf('step 3'), 'in order');
  for (let i = 1; i < updates.length; i++) {
    assert.ok(updates[i].progress > updates[i - 1].progress, `progress increases: ${JSON.stringify(updates)}`);
  }
  return `${updates.length} notifications`;
});

// sessionRun is the ledger's record of the one run_python of a session
// once it has ended, waiting up to 15 s for it.
async function sessionRun(session) {
  const since = Date.now();
  let run;
  while (Date.now() - since < 15000) {
    const { runs } = await hostGet(`/api/v1/runs?session=${session}`, cfg.tokens.editor);
    run = runs.find((r) => r.tool === 'run_python');
    if (run?.stopped) break;
    await sleep(200);
  }
  assert.ok(run, `the run is in the ledger of session ${session} within 15 s of the cancel`);
  return run;
}

// sleepInSession starts a run_python that prints, then sleeps 30 s, in a
// new session, and resolves once its output came (so the run is going).
async function sleepInSession(client, signal) {
  const session = `ts-cancel-${Date.now()}`;
  let sawOutput = false;
  const call = client.callTool(
    { name: 'run_python', arguments: { code: 'import time\nprint("sleeping", flush=True)\ntime.sleep(30)\n' }, _meta: { 'toolhost/session': session } },
    CallToolResultSchema,
    { signal, onprogress: () => { sawOutput = true; }, timeout: 60000 },
  );
  call.catch(() => {});
  const started = Date.now();
  while (!sawOutput && Date.now() - started < 30000) await sleep(50);
  assert.ok(sawOutput, 'the run started (its output came as progress)');
  return { session, call };
}

// Cancel by AbortController: the SDK sends notifications/cancelled (the
// client stays connected); the run in the session must end cancelled, long
// before the 30 s its code sleeps.
await check('cancel by abort', async () => {
  const ac = new AbortController();
  const { session, call } = await sleepInSession(editor, ac.signal);
  ac.abort('the test aborts the call');
  await assert.rejects(call, 'the aborted call rejects');
  const run = await sessionRun(session);
  assert.equal(run.stopped, 'cancelled', `the run ended cancelled: ${JSON.stringify(run)}`);
  assert.ok(run.duration_ms < 20000, `it ended well before its 30 s: ${run.duration_ms} ms`);
  return `stopped=${run.stopped} after ${run.duration_ms} ms`;
});

// A client that hangs up mid-call (closes its transport) cancels the run too.
await check('cancel by hang-up', async () => {
  const client = await connect(cfg.tokens.editor);
  const { session, call } = await sleepInSession(client);
  await client.close();
  await assert.rejects(call, 'the call of a closed client rejects');
  const run = await sessionRun(session);
  assert.equal(run.stopped, 'cancelled', `the run ended cancelled: ${JSON.stringify(run)}`);
  assert.ok(run.duration_ms < 20000, `it ended well before its 30 s: ${run.duration_ms} ms`);
  return `stopped=${run.stopped} after ${run.duration_ms} ms`;
});

await editor.close();

// Auth.
for (const [name, token] of [['no token', ''], ['a wrong token', 'not-a-token-of-this-host']]) {
  await check(`auth: ${name}`, async () => {
    const err = await connect(token).then(
      (c) => { c.close(); return null; },
      (e) => e,
    );
    assert.ok(err, 'connecting fails');
    assert.equal(err.code, 401, `a 401: ${err}`);
    return String(err.message);
  });
}
await check('auth: a viewer token lists but may not call', async () => {
  const viewer = await connect(cfg.tokens.viewer);
  try {
    const { tools } = await viewer.listTools();
    assert.ok(tools.some((t) => t.name === 'get_item'), 'a viewer sees the tools');
    const res = await viewer.callTool({ name: 'get_item', arguments: { id: cfg.item } });
    assert.equal(res.isError, true, `a viewer's call is refused: ${JSON.stringify(res)}`);
    assert.match(textOf(res), /^forbidden/, 'with forbidden');
    return textOf(res);
  } finally {
    await viewer.close();
  }
});
await check('auth: an editor token calls', async () => {
  const c = await connect(cfg.tokens.editor);
  try {
    return assertValue(await c.callTool({ name: 'get_item', arguments: { id: cfg.item } }), `item ${cfg.item}`);
  } finally {
    await c.close();
  }
});

// OAuth: a client that would sign in with OAuth learns at once that the host
// takes bearer tokens only; it never goes to register, authorize or get a
// token. The SDK's error names the OAuth metadata it could not load; the
// host's answer that stopped it says why.
await check('auth: an OAuth client fails fast', async () => {
  const requested = [];
  const redirects = [];
  const provider = {
    get redirectUrl() { return 'http://127.0.0.1:1/callback'; },
    get clientMetadata() { return { client_name: 'toolhost-ts-test', redirect_uris: ['http://127.0.0.1:1/callback'] }; },
    clientInformation: () => undefined,
    saveClientInformation: () => {},
    tokens: () => undefined,
    saveTokens: () => {},
    redirectToAuthorization: (url) => { redirects.push(String(url)); },
    saveCodeVerifier: () => {},
    codeVerifier: () => 'verifier',
  };
  const recordingFetch = async (url, init) => {
    const resp = await fetch(url, init);
    requested.push({ path: new URL(String(url)).pathname, status: resp.status, body: await resp.clone().text() });
    return resp;
  };
  const t0 = Date.now();
  const err = await connect('', { authProvider: provider, fetch: recordingFetch }).then(
    (c) => { c.close(); return null; },
    (e) => e,
  );
  const ms = Date.now() - t0;
  const paths = requested.map((r) => `${r.path} ${r.status}`).join(', ');
  assert.ok(err, 'connecting fails');
  assert.ok(ms < 5000, `at once: ${ms} ms`);
  assert.match(String(err.message), /OAuth/, `the error is about OAuth: ${err}`);
  assert.deepEqual(redirects, [], 'never sent to authorize');
  for (const r of requested) {
    assert.doesNotMatch(r.path, /\/(authorize|register|token)$/, `requested ${paths}`);
  }
  const last = requested[requested.length - 1];
  assert.ok(last && last.status >= 400, `the last answer refused: ${paths}`);
  assert.match(last.body, /bearer tokens only/i, `the host's last answer says it takes bearer tokens only: ${last.body}`);
  return `${err.message} (${ms} ms; requested ${paths})`;
});

console.log(JSON.stringify({ checks }));
process.exit(checks.every((c) => c.ok) ? 0 : 1);
