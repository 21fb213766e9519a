// Measures when SSE chunks of one streamed completion arrive (through Caddy in the caddy suite). Prints JSON:
// {"status", "chunks", "gaps_ms": [...], "first_ms", "total_ms", "done"}. Usage: node stream_timing.js URL
'use strict';
const started = Date.now();
(async () => {
  const response = await fetch(process.argv[2], {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ prompt: 'tick', max_tokens: 6, stream: true }),
  });
  const arrivals = [];
  let text = '';
  const decoder = new TextDecoder();
  for await (const piece of response.body) {
    text += decoder.decode(piece, { stream: true });
    const events = text.split('\n\n');
    text = events.pop();
    for (const event of events) if (event.startsWith('data: ')) arrivals.push({ t: Date.now() - started, event });
  }
  const data = arrivals.filter((a) => a.event !== 'data: [DONE]');
  const gaps = data.slice(1).map((a, i) => a.t - data[i].t);
  console.log(JSON.stringify({ status: response.status, chunks: data.length, gaps_ms: gaps,
    first_ms: data.length ? data[0].t : -1, total_ms: Date.now() - started,
    done: arrivals.length > 0 && arrivals[arrivals.length - 1].event === 'data: [DONE]',
    protocol: response.headers.get('alt-svc') }));
})().catch((e) => {
  console.log(JSON.stringify({ error: String(e) }));
  process.exit(1);
});
