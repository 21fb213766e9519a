// The official `openai` npm SDK (6.49, node 20) against a running server: chat, streaming with usage, reasoning
// fields, tool calls with streamed arguments, tool results, completions with token ids, n > 1, logprobs, errors,
// client aborts, structured outputs (chat.completions.parse with a JSON schema, forced tool calls).
// DSV4_MODE=fake: the FakeEngine's scripted outputs ([[think]], [[tool]], ...) are checked exactly;
// DSV4_MODE=engine (bundled random-weight model): structural checks and greedy self-consistency only.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const OpenAI = require('openai');

const baseURL = `${process.env.DSV4_BASE_URL}/v1`;
const model = process.env.DSV4_MODEL;
const fake = process.env.DSV4_MODE === 'fake';
const client = new OpenAI({ baseURL, apiKey: process.env.DSV4_API_KEY, maxRetries: 0, timeout: 120000 });
const user = (content) => [{ role: 'user', content }];
const tools = [
  { type: 'function', function: { name: 'get_weather', parameters: { type: 'object',
    properties: { city: { type: 'string' }, days: { type: 'integer' } }, required: ['city'] } } },
  { type: 'function', function: { name: 'get_time', parameters: { type: 'object',
    properties: { zone: { type: 'string' } } } } },
];

async function collect(stream) {
  const out = { content: '', reasoning: '', reasoningContent: '', finish: null, usage: null, chunks: 0, toolCalls: [],
    argumentDeltas: 0, roles: 0 };
  for await (const chunk of stream) {
    out.chunks += 1;
    if (chunk.usage) out.usage = chunk.usage;
    for (const choice of chunk.choices) {
      const d = choice.delta;
      if (d.role) out.roles += 1;
      if (d.content) out.content += d.content;
      if (d.reasoning) out.reasoning += d.reasoning;
      if (d.reasoning_content) out.reasoningContent += d.reasoning_content;
      for (const call of d.tool_calls || []) {
        const slot = (out.toolCalls[call.index] ||= { id: '', name: '', arguments: '' });
        if (call.id) slot.id = call.id;
        if (call.function?.name) slot.name = call.function.name;
        if (call.function?.arguments) {
          slot.arguments += call.function.arguments;
          out.argumentDeltas += 1;
        }
      }
      if (choice.finish_reason) out.finish = choice.finish_reason;
    }
  }
  return out;
}

test('models.list names the served model', async () => {
  const models = await client.models.list();
  assert.deepEqual(models.data.map((m) => m.id), [model]);
});

test('chat: non-streaming and streaming agree (greedy) and report usage', async () => {
  const request = { model, messages: user('Write one sentence about rivers.'), max_tokens: 12, temperature: 0 };
  const once = await client.chat.completions.create(request);
  assert.equal(once.object, 'chat.completion');
  assert.equal(once.choices.length, 1);
  assert.equal(once.choices[0].message.role, 'assistant');
  assert.ok(['length', 'stop'].includes(once.choices[0].finish_reason));
  assert.equal(once.usage.total_tokens, once.usage.prompt_tokens + once.usage.completion_tokens);
  const streamed = await collect(await client.chat.completions.create({ ...request, stream: true,
    stream_options: { include_usage: true } }));
  assert.equal(streamed.content, once.choices[0].message.content ?? '');
  assert.equal(streamed.finish, once.choices[0].finish_reason);
  assert.equal(streamed.roles, 1);
  assert.deepEqual(streamed.usage.completion_tokens, once.usage.completion_tokens);
  assert.deepEqual(streamed.usage.prompt_tokens, once.usage.prompt_tokens);
});

test('reasoning is returned as reasoning_content and reasoning', async () => {
  const streamed = await collect(await client.chat.completions.create({ model, messages: user('[[think]] 6 x 7?'),
    max_tokens: 40, temperature: 0, reasoning_effort: 'high', stream: true }));
  const once = await client.chat.completions.create({ model, messages: user('[[think]] 6 x 7?'), max_tokens: 40,
    temperature: 0, chat_template_kwargs: { thinking: true } });
  const message = once.choices[0].message;
  assert.equal(message.reasoning_content, message.reasoning);
  assert.equal(streamed.reasoningContent, streamed.reasoning);
  assert.equal(streamed.reasoning, message.reasoning ?? '');
  assert.ok(once.usage.completion_tokens_details.reasoning_tokens > 0);
  if (fake) {
    assert.equal(message.reasoning_content, 'The user asks for six times seven. That is 42.');
    assert.equal(message.content, 'The answer is 42.');
    assert.equal(streamed.content, 'The answer is 42.');
  }
  const chat = await client.chat.completions.create({ model, messages: user('[[think]] 6 x 7?'), max_tokens: 20,
    temperature: 0, reasoning_effort: 'none' });
  assert.equal(chat.choices[0].message.reasoning_content, null);
  assert.equal(chat.usage.completion_tokens_details.reasoning_tokens, 0);
});

test('tools: a streamed call arrives as argument deltas; the result goes back in the next turn', { skip: !fake },
  async () => {
    const streamed = await collect(await client.chat.completions.create({ model, messages: user('[[tool]] weather?'),
      tools, stream: true }));
    assert.equal(streamed.finish, 'tool_calls');
    assert.equal(streamed.toolCalls.length, 1);
    const call = streamed.toolCalls[0];
    assert.equal(call.name, 'get_weather');
    assert.match(call.id, /^call_/);
    assert.deepEqual(JSON.parse(call.arguments), { city: 'Paris', days: 3 });
    assert.ok(streamed.argumentDeltas >= 3, `arguments came in ${streamed.argumentDeltas} pieces`);
    assert.equal(streamed.content, '');

    const once = await client.chat.completions.create({ model, messages: user('[[tool]] weather?'), tools });
    const message = once.choices[0].message;
    assert.equal(once.choices[0].finish_reason, 'tool_calls');
    assert.equal(message.content, null);
    assert.deepEqual(JSON.parse(message.tool_calls[0].function.arguments), { city: 'Paris', days: 3 });

    const followUp = await client.chat.completions.create({ model, tools, messages: [
      ...user('weather?'),
      { role: 'assistant', content: null, tool_calls: message.tool_calls },
      { role: 'tool', tool_call_id: message.tool_calls[0].id, content: 'sunny' },
    ] });
    assert.equal(followUp.choices[0].message.content, 'The weather in Paris is sunny.');
  });

test('tools: parallel calls, parallel_tool_calls=false, tool_choice', { skip: !fake }, async () => {
  const both = await client.chat.completions.create({ model, messages: user('[[parallel]]'), tools });
  assert.deepEqual(both.choices[0].message.tool_calls.map((c) => c.function.name), ['get_weather', 'get_time']);
  const streamed = await collect(await client.chat.completions.create({ model, messages: user('[[parallel]]'), tools,
    stream: true }));
  assert.deepEqual(streamed.toolCalls.map((c) => JSON.parse(c.arguments)), [{ city: 'Paris' }, { zone: 'Asia/Tokyo' }]);
  const one = await client.chat.completions.create({ model, messages: user('[[parallel]]'), tools,
    parallel_tool_calls: false });
  assert.equal(one.choices[0].message.tool_calls.length, 1);
  const named = await client.chat.completions.create({ model, messages: user('[[tool]]'), tools,
    tool_choice: { type: 'function', function: { name: 'get_weather' } } });
  assert.equal(named.choices[0].message.tool_calls[0].function.name, 'get_weather');
});

test('tools on the engine: the response is well formed whatever the model emits', { skip: fake }, async () => {
  const once = await client.chat.completions.create({ model, messages: user('weather in Paris?'), tools,
    max_tokens: 24, temperature: 0 });
  const message = once.choices[0].message;
  assert.ok(['stop', 'length', 'tool_calls'].includes(once.choices[0].finish_reason));
  for (const call of message.tool_calls || []) JSON.parse(call.function.arguments);
  assert.ok(!(message.content || '').includes('DSML'));
});

// Structured outputs: whatever the model (scripted fake or random-weight engine), the output follows the schema.
const itemFormat = { type: 'json_schema', json_schema: { name: 'item', strict: true, schema: {
  type: 'object', additionalProperties: false, required: ['name', 'size', 'count'],
  properties: { name: { type: 'string', maxLength: 8 }, size: { enum: ['S', 'M', 'L'] },
    count: { type: 'integer', minimum: 1, maximum: 9 } } } } };

function checkItem(item) {
  assert.deepEqual(Object.keys(item).sort(), ['count', 'name', 'size']);
  assert.equal(typeof item.name, 'string');
  assert.ok([...item.name].length <= 8, item.name);
  assert.ok(['S', 'M', 'L'].includes(item.size));
  assert.ok(Number.isInteger(item.count) && item.count >= 1 && item.count <= 9);
}

test('structured outputs: chat.completions.parse with a JSON schema, streamed, n > 1, sampled', async () => {
  const parsed = await client.chat.completions.parse({ model, messages: user('Describe an item.'),
    response_format: itemFormat, max_tokens: 400, temperature: 0 });
  assert.equal(parsed.choices[0].finish_reason, 'stop');
  checkItem(parsed.choices[0].message.parsed);
  const sampled = await client.chat.completions.create({ model, messages: user('Describe an item.'),
    response_format: itemFormat, max_tokens: 400, n: 2, temperature: 1, seed: 7 });
  for (const choice of sampled.choices) checkItem(JSON.parse(choice.message.content));
  const streamed = await collect(await client.chat.completions.create({ model, messages: user('Describe an item.'),
    response_format: itemFormat, max_tokens: 400, top_p: 0.9, seed: 3, stream: true }));
  assert.equal(streamed.finish, 'stop');
  checkItem(JSON.parse(streamed.content));
  const cut = await client.chat.completions.create({ model, messages: user('Describe an item.'),
    response_format: itemFormat, max_tokens: 2 });
  assert.equal(cut.choices[0].finish_reason, 'length');
  await assert.rejects(client.chat.completions.create({ model, messages: user('x'), response_format: {
    type: 'json_schema', json_schema: { name: 'bad', schema: { type: 'array', uniqueItems: true } } } }),
  (e) => e instanceof OpenAI.BadRequestError && e.param === 'response_format.json_schema.schema' &&
    e.message.includes('uniqueItems'));
});

test('structured outputs: forced tool calls parse and their arguments validate', async () => {
  const bounded = [
    { type: 'function', function: { name: 'get_weather', parameters: { type: 'object', required: ['city'],
      properties: { city: { type: 'string', maxLength: 6 }, days: { type: 'integer', minimum: 1, maximum: 5 } } } } },
    { type: 'function', function: { name: 'get_time', parameters: { type: 'object', required: ['zone'],
      properties: { zone: { enum: ['UTC', 'CET'] } } } } },
  ];
  for (const tool_choice of ['required', { type: 'function', function: { name: 'get_time' } }]) {
    const once = await client.chat.completions.create({ model, messages: user('What time is it?'), tools: bounded,
      tool_choice, parallel_tool_calls: false, max_tokens: 600, temperature: 0 });
    assert.equal(once.choices[0].finish_reason, 'tool_calls', JSON.stringify(once.choices[0]));
    const calls = once.choices[0].message.tool_calls;
    assert.equal(calls.length, 1);
    const args = JSON.parse(calls[0].function.arguments);
    if (calls[0].function.name === 'get_weather') {
      assert.equal(tool_choice, 'required');
      assert.ok(typeof args.city === 'string' && [...args.city].length <= 6);
      if (args.days !== undefined) assert.ok(Number.isInteger(args.days) && args.days >= 1 && args.days <= 5);
    } else {
      assert.equal(calls[0].function.name, 'get_time');
      assert.ok(['UTC', 'CET'].includes(args.zone));
    }
  }
});

test('completions: token-id prompts give what the same text prompt gives', async () => {
  const text = 'The quick brown fox';
  const tokens = await (await fetch(`${process.env.DSV4_BASE_URL}/tokenize`, { method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${process.env.DSV4_API_KEY}` },
    body: JSON.stringify({ model, prompt: text }) })).json();
  assert.ok(tokens.count > 1);
  const byText = await client.completions.create({ model, prompt: text, max_tokens: 10, temperature: 0 });
  const byIds = await client.completions.create({ model, prompt: tokens.tokens, max_tokens: 10, temperature: 0 });
  assert.equal(byIds.choices[0].text, byText.choices[0].text);
  assert.equal(byIds.usage.prompt_tokens, tokens.count);
  const batch = await client.completions.create({ model, prompt: [tokens.tokens, tokens.tokens], max_tokens: 10,
    temperature: 0 });
  assert.deepEqual(batch.choices.map((c) => c.index), [0, 1]);
  assert.equal(batch.choices[1].text, byText.choices[0].text);
});

test('n > 1: indexed choices; greedy choices are identical', async () => {
  const many = await client.chat.completions.create({ model, messages: user('Count to three.'), n: 3,
    max_tokens: 8, temperature: 0 });
  assert.deepEqual(many.choices.map((c) => c.index), [0, 1, 2]);
  for (const choice of many.choices) assert.equal(choice.message.content, many.choices[0].message.content);
  const streamed = await client.chat.completions.create({ model, messages: user('Count to three.'), n: 2,
    max_tokens: 8, temperature: 0, stream: true });
  const texts = ['', ''];
  for await (const chunk of streamed) for (const c of chunk.choices) texts[c.index] += c.delta.content || '';
  assert.deepEqual(texts, [many.choices[0].message.content ?? '', many.choices[0].message.content ?? '']);
});

test('stop strings cut the output at the first match; the same seed gives the same text', async () => {
  const request = { model, prompt: 'Once upon a time', max_tokens: 24, temperature: 0, ignore_eos: true };
  const full = (await client.completions.create(request)).choices[0].text;
  assert.ok(full.length >= 8, `greedy output too short to pick a stop string from: ${JSON.stringify(full)}`);
  // A stop string taken from the middle of the greedy output: the output must end right before its first match.
  const stop = full.slice(Math.floor(full.length / 2), Math.floor(full.length / 2) + 3);
  const cut = full.slice(0, full.indexOf(stop));
  for (const stream of [false, true]) {
    const response = await client.completions.create({ ...request, stop: [stop], stream });
    let text = '';
    let finish = null;
    let stopReason;
    if (stream) {
      for await (const chunk of response) {
        for (const c of chunk.choices) {
          text += c.text;
          if (c.finish_reason) [finish, stopReason] = [c.finish_reason, c.stop_reason];
        }
      }
    } else {
      [text, finish, stopReason] = [response.choices[0].text, response.choices[0].finish_reason,
        response.choices[0].stop_reason];
    }
    assert.equal(text, cut, `stream=${stream}`);
    assert.equal(finish, 'stop');
    assert.equal(stopReason, stop);
  }
  const sampled = { model, prompt: 'Once upon a time', max_tokens: 12, temperature: 1.0, seed: 1234 };
  const first = await client.completions.create(sampled);
  const second = await client.completions.create(sampled);
  assert.equal(second.choices[0].text, first.choices[0].text);
});

test('logprobs: one entry per generated token, top alternatives', async () => {
  const chat = await client.chat.completions.create({ model, messages: user('Say something.'), max_tokens: 6,
    temperature: 0, logprobs: true, top_logprobs: 2 });
  const entries = chat.choices[0].logprobs.content;
  assert.equal(entries.length, chat.usage.completion_tokens);
  for (const entry of entries) {
    assert.ok(entry.logprob <= 0);
    assert.ok(entry.top_logprobs.length >= 1 && entry.top_logprobs.length <= 2);
    assert.ok(Array.isArray(entry.bytes));
  }
  const completion = await client.completions.create({ model, prompt: 'Say', max_tokens: 5, logprobs: 3 });
  const lp = completion.choices[0].logprobs;
  assert.equal(lp.tokens.length, completion.usage.completion_tokens);
  assert.equal(lp.token_logprobs.length, lp.tokens.length);
  assert.equal(lp.text_offset.length, lp.tokens.length);
});

test('errors surface as SDK error classes with status and param', async () => {
  await assert.rejects(client.chat.completions.create({ model, messages: user('x'), temperature: -1 }), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError);
    assert.equal(e.status, 400);
    assert.equal(e.param, 'temperature');
    return true;
  });
  await assert.rejects(client.chat.completions.create({ model: 'no-such-model', messages: user('x') }), (e) => {
    assert.ok(e instanceof OpenAI.NotFoundError);
    return true;
  });
  await assert.rejects(client.chat.completions.create({ model, messages: user('x'), max_tokens: 100000000 }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'max_tokens');
});

test('a client abort mid-stream frees the request on the server', async () => {
  const controller = new AbortController();
  const stream = await client.chat.completions.create({ model, messages: user('Tell a long story.'),
    max_tokens: 2000, ignore_eos: true, stream: true }, { signal: controller.signal });
  let seen = 0;
  try {
    for await (const chunk of stream) {
      if (chunk.choices[0]?.delta?.content) ++seen;
      if (seen === 3) {
        // Abort and stop reading: chunks that arrived in the same read would otherwise still be yielded.
        controller.abort();
        break;
      }
    }
  } catch (e) {
    assert.ok(e instanceof OpenAI.APIUserAbortError || e.name === 'AbortError', String(e));
  }
  assert.equal(seen, 3);
  const deadline = Date.now() + 10000;
  let metrics = '';
  while (Date.now() < deadline) {
    metrics = await (await fetch(`${process.env.DSV4_BASE_URL}/metrics`,
      { headers: { Authorization: `Bearer ${process.env.DSV4_API_KEY}` } })).text();
    if (/dsv4:client_disconnects_total\{[^}]*\} [1-9]/.test(metrics) &&
        /vllm:num_requests_running\{[^}]*\} 0\n/.test(metrics)) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.match(metrics, /dsv4:client_disconnects_total\{[^}]*\} [1-9]/);
  assert.match(metrics, /vllm:num_requests_running\{[^}]*\} 0\n/);
});
