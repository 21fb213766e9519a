// A battery of malformed HTTP and JSON sent over raw sockets; afterwards the server must still answer correctly.
// Every response that comes back must be a well-formed HTTP response with a 4xx status (never 5xx, never a hang).
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const net = require('node:net');

const url = new URL(process.env.DSV4_BASE_URL);
const key = process.env.DSV4_API_KEY;

// Sends raw bytes, returns everything received until the server closes or 20 s pass.
function raw(bytes, { closeWrite = false } = {}) {
  return new Promise((resolve) => {
    const socket = net.connect({ host: url.hostname, port: Number(url.port) });
    const chunks = [];
    const timer = setTimeout(() => socket.destroy(), 20000);
    socket.on('connect', () => {
      socket.write(Buffer.from(bytes, 'latin1'));  // one byte per char: invalid UTF-8 stays invalid
      if (closeWrite) socket.end();
    });
    socket.on('data', (d) => {
      chunks.push(d);
      // One complete response is enough: stop once the body length is satisfied.
      const text = Buffer.concat(chunks).toString('latin1');
      const head = text.indexOf('\r\n\r\n');
      const length = /content-length: (\d+)/i.exec(text);
      if (head >= 0 && length && text.length >= head + 4 + Number(length[1])) socket.destroy();
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(Buffer.concat(chunks).toString('latin1'));
    });
  });
}

const post = (path, body, extra = '') =>
  `POST ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\n` +
  `Content-Length: ${Buffer.byteLength(body, 'latin1')}\r\n${extra}\r\n${body}`;

const nested = (n) => '{"messages":[{"role":"user","content":"x"}],"tools":' + '['.repeat(n) + ']'.repeat(n) + '}';
const jsonBodies = [
  '', ' ', '{', '}', '[', 'null', 'true', '0', '"str"', '{"messages":', '{"messages":[{"role":"user","content":"x"}]',
  '{"messages":[{"role":"user","content":"x"}],}', "{'messages':[]}", '{"messages":[{"role":"user","content":NaN}]}',
  '{"messages":[{"role":"user","content":"x"}],"max_tokens":Infinity}',
  '{"messages":[{"role":"user","content":"x"}],"max_tokens":1e999}',
  '{"messages":[{"role":"user","content":"x"}],"temperature":-1e999}',
  '{"messages":[{"role":"user","content":"x"}],"n":-0.0,"seed":18446744073709551616}',
  '{"messages":[{"role":"user","content":"\\ud800"}]}', '{"messages":[{"role":"user","content":"\u0000"}],"max_tokens":1.5}',
  '{"messages":[{"role":"user","content":"x"}],"logit_bias":{"-1":5}}',
  '{"messages":[{"role":"user","content":"x"}],"stop":[""]}',
  '{"messages":[{"role":"user","content":"x"}],"stop_token_ids":[4294967296]}',
  '{"messages":[{"role":"user","content":"x"}],"tool_choice":{"function":null}}',
  '{"messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"not json"}}]}]}',
  '{"messages":[{"role":"tool","content":"orphan result"}]}',
  '{"messages":[{"role":"user","content":[{"type":"text"}]}]}',
  '{"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":[]}',
  '{"prompt":[[],[]]}', '{"prompt":[-1]}', '{"prompt":[1.5]}', '{"prompt":[[1],"a",[2]]}', '{"prompt":{"a":1}}',
  nested(5000), nested(70),
  '{"messages":[{"role":"user","content":"\xff\xfe\xfd"}]}',
];

// Some bodies are valid after all (e.g. unparsable tool-call arguments are accepted, as DeepSeek's encoder does):
// cap their generation so the real engine answers quickly. Broken JSON stays broken.
function capped(body) {
  try {
    const value = JSON.parse(body);
    if (value && typeof value === 'object' && !Array.isArray(value) && !('max_tokens' in value)) {
      return JSON.stringify({ ...value, max_tokens: 2 });
    }
  } catch (e) {
    // not JSON: sent as is
  }
  return body;
}

test('malformed JSON bodies get 4xx JSON errors', async () => {
  for (const path of ['/v1/chat/completions', '/v1/completions', '/tokenize', '/detokenize']) {
    for (const original of jsonBodies) {
      const body = capped(original);
      const response = await raw(post(path, body));
      const status = /^HTTP\/1\.1 (\d{3})/.exec(response);
      assert.ok(status, `no HTTP response for ${path} ${body.slice(0, 60)}`);
      const code = Number(status[1]);
      // A few bodies are valid for some routes (e.g. an orphan tool result is still a 400 on chat; {"prompt":...}
      // on /tokenize); none may crash the server or produce a 5xx.
      assert.ok(code < 500, `${path} ${body.slice(0, 60)} -> ${code}`);
      if (code >= 400) {
        const error = JSON.parse(response.slice(response.indexOf('\r\n\r\n') + 4)).error;
        assert.equal(typeof error.message, 'string', response);
        assert.equal(typeof error.type, 'string', response);
      }
    }
  }
});

test('malformed HTTP never crashes the server', async () => {
  const cases = [
    'GARBAGE\r\n\r\n',
    'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"short":',
    'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n',
    'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n',
    'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n',
    'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n' + 'X-Long: ' + 'a'.repeat(100000) + '\r\n\r\n',
    'GET /' + 'a'.repeat(20000) + ' HTTP/1.1\r\nHost: x\r\n\r\n',
    'GET /v1/models/%00%ff HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ' + key + '\r\n\r\n',
    'POST /v1/completions HTTP/1.1\r\n\r\n',
    '\x00\x01\x02\x03\xff\xfe\r\n\r\n',
    'GET /health HTTP/9.9\r\n\r\n',
  ];
  for (const request of cases) {
    const response = await raw(request, { closeWrite: true });
    const status = /^HTTP\/1\.1 (\d{3})/.exec(response);
    if (status) assert.ok(Number(status[1]) < 500, `${JSON.stringify(request.slice(0, 50))} -> ${status[1]}`);
  }
  // A client that sends half a request and vanishes.
  await raw('POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{"mess', { closeWrite: true });
});

test('the server still answers correctly afterwards', async () => {
  const response = await fetch(`${process.env.DSV4_BASE_URL}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${key}` },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'still there?' }], max_tokens: 4 }),
  });
  assert.equal(response.status, 200);
  const body = await response.json();
  assert.equal(body.object, 'chat.completion');
  assert.ok(body.usage.completion_tokens >= 1);
});
