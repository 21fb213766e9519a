// 64 concurrent streams (DSV4_E2E_STREAMS) with per-request isolation checks: each stream's greedy output equals
// what the same request produces when run alone, token for token (compared through the text and the per-token
// logprob entries), and every stream gets exactly its own id, choices and usage.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const OpenAI = require('openai');

const client = new OpenAI({ baseURL: `${process.env.DSV4_BASE_URL}/v1`, apiKey: process.env.DSV4_API_KEY,
  maxRetries: 0, timeout: 600000 });
const model = process.env.DSV4_MODEL;
const streams = Number(process.env.DSV4_E2E_STREAMS || 64);
const maxTokens = Number(process.env.DSV4_E2E_TOKENS || 24);

function request(i) {
  // Distinct prompts and lengths, so a mix-up between requests shows.
  return { model, prompt: `Request ${i}: ${'word '.repeat(i % 9)}tell me about the number ${i * 7919}.`,
    max_tokens: maxTokens - (i % 5), temperature: 0, logprobs: 0 };
}

async function streamed(i) {
  const stream = await client.completions.create({ ...request(i), stream: true,
    stream_options: { include_usage: true } });
  const out = { text: '', tokens: [], ids: new Set(), finish: null, usage: null };
  for await (const chunk of stream) {
    out.ids.add(chunk.id);
    if (chunk.usage) out.usage = chunk.usage;
    for (const choice of chunk.choices) {
      assert.equal(choice.index, 0);
      out.text += choice.text;
      if (choice.logprobs) out.tokens.push(...choice.logprobs.tokens);
      if (choice.finish_reason) out.finish = choice.finish_reason;
    }
  }
  return out;
}

test(`${streams} concurrent streams equal their solo runs`, async () => {
  const started = Date.now();
  const results = await Promise.all(Array.from({ length: streams }, (_, i) => streamed(i)));
  const concurrentMs = Date.now() - started;
  for (let i = 0; i < streams; ++i) {
    const r = results[i];
    assert.equal(r.ids.size, 1, `stream ${i} mixed response ids`);
    assert.ok(r.finish, `stream ${i} has no finish_reason`);
    assert.equal(r.usage.completion_tokens, r.tokens.length, `stream ${i}: one logprob entry per token`);
  }
  const allIds = new Set(results.map((r) => [...r.ids][0]));
  assert.equal(allIds.size, streams, 'response ids must be unique');
  for (let i = 0; i < streams; ++i) {
    const alone = await client.completions.create(request(i));
    const choice = alone.choices[0];
    assert.equal(results[i].text, choice.text, `stream ${i} text differs from its solo run`);
    assert.deepEqual(results[i].tokens, choice.logprobs.tokens, `stream ${i} tokens differ from its solo run`);
    assert.equal(results[i].finish, choice.finish_reason);
    assert.equal(results[i].usage.completion_tokens, alone.usage.completion_tokens);
  }
  console.log(`# ${streams} streams x <=${maxTokens} tokens concurrently in ${concurrentMs} ms`);
});
