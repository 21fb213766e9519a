// The chat page at / in real Chromium (Debian's chromium driven by playwright-core): it asks for the API key and keeps
// it, streams an answer, renders markdown, reasoning apart and collapsible, and tool calls, shows the model and
// tokens/s, and its Stop button aborts the request on the server. Run by suite_webui.sh against dsv4_fake_serve.
//   DSV4_BASE_URL, DSV4_API_KEY, DSV4_MODEL, DSV4_CHROMIUM, [DSV4_SCREENSHOT: where to save a screenshot]
const { test, before, after } = require("node:test");
const assert = require("node:assert/strict");
const { chromium } = require("playwright-core");

const base = process.env.DSV4_BASE_URL;
const key = process.env.DSV4_API_KEY;
let browser;
let page;
const pageErrors = [];

before(async () => {
  browser = await chromium.launch({ executablePath: process.env.DSV4_CHROMIUM, args: ["--no-sandbox"] });
  page = await browser.newPage({ viewport: { width: 1100, height: 800 } });
  page.on("pageerror", (error) => pageErrors.push(error.message));
});

after(async () => {
  await browser?.close();
  assert.deepEqual(pageErrors, [], "the page threw");
});

const status = () => page.textContent("#status");
const answers = () => page.locator(".msg.assistant");

async function openSettings() {
  if (await page.isHidden("#settings")) await page.click("#toggle-settings");
}

async function ask(text) {
  const before = await answers().count();
  await page.fill("#prompt", text);
  await page.press("#prompt", "Enter");
  await page.waitForFunction((n) => document.querySelectorAll(".msg.assistant").length > n, before);
  return answers().nth(before);
}

async function finished(answer) {
  await answer.locator(".stats").waitFor();
  return answer.getAttribute("data-outcome");
}

async function metric(name) {
  const response = await fetch(`${base}/metrics`, { headers: { Authorization: `Bearer ${key}` } });
  const line = (await response.text()).split("\n").find((l) => l.startsWith(`${name}{`));
  return line ? Number(line.slice(line.lastIndexOf(" ") + 1)) : NaN;
}

test("asks for the API key once and keeps it", async () => {
  await page.goto(base);
  await page.waitForFunction(() => document.getElementById("status").textContent === "API key needed");
  assert.equal(await page.isVisible("#api-key"), true);
  await page.fill("#api-key", key);
  await page.click("#save-key");
  await page.waitForFunction(() => document.getElementById("status").textContent === "ready");
  assert.equal(await page.textContent("#model-name"), process.env.DSV4_MODEL);
  await page.reload();  // the key survives a reload (localStorage)
  await page.waitForFunction(() => document.getElementById("status").textContent === "ready");
  assert.equal(await page.isHidden("#settings"), true);
});

test("streams the answer as it is generated and shows tokens/s", async () => {
  await openSettings();
  await page.fill("#max-tokens", "40");
  await page.dispatchEvent("#max-tokens", "change");
  await page.click("#toggle-settings");
  // Record every rendering of the answer inside the page (the fake engine makes a token every 10 ms).
  await page.evaluate(() => {
    window.renderedLengths = [];
    new MutationObserver(() => {
      const all = document.querySelectorAll(".msg.assistant .content");
      if (all.length) window.renderedLengths.push(all[all.length - 1].textContent.length);
    }).observe(document.getElementById("messages"), { subtree: true, childList: true, characterData: true });
  });
  const answer = await ask("Hello there");
  await finished(answer);
  const final = (await answer.locator(".content").textContent()).length;
  const lengths = await page.evaluate(() => window.renderedLengths);
  const partial = new Set(lengths.filter((n) => n > 0 && n < final));
  assert.ok(partial.size >= 5, `only ${partial.size} partial renderings before the end: not streamed? ${lengths}`);
  assert.deepEqual(lengths, [...lengths].sort((a, b) => a - b), "the answer shrank while streaming");
  assert.equal(await answer.getAttribute("data-outcome"), "finish: length");
  assert.match(await answer.locator(".stats").textContent(), /^40 tokens · \d+(\.\d)? tok\/s/);
  assert.match(await page.textContent("#speed"), /^\d+(\.\d)? tok\/s$/);
});

test("renders markdown and keeps reasoning apart and collapsible", async () => {
  await openSettings();
  await page.check("#thinking");
  await page.fill("#max-tokens", "");
  await page.dispatchEvent("#max-tokens", "change");
  await page.click("#toggle-settings");
  const answer = await ask("Format this [[markdown]]");
  assert.equal(await finished(answer), "finish: stop");
  const content = answer.locator(".content");
  assert.equal(await content.locator("h2").textContent(), "Plan");
  assert.equal(await content.locator("strong").textContent(), "bold");
  assert.equal(await content.locator("em").textContent(), "italic");
  assert.equal(await content.locator("li").count(), 2);
  assert.equal(await content.locator("a").getAttribute("href"), "https://example.com/docs");
  assert.equal(await content.locator("pre code").textContent(), "def square(x):\n    return x * x  # <not html>");
  assert.equal(await content.locator("not").count(), 0);  // model text is never markup
  const reasoning = answer.locator("details.reasoning");
  assert.match(await reasoning.locator(".reasoning-text").textContent(), /six times seven/);
  assert.doesNotMatch(await content.textContent(), /six times seven/);
  assert.equal(await reasoning.evaluate((d) => d.open), false);  // folded once the answer came
  await reasoning.locator("summary").click();
  assert.equal(await reasoning.evaluate((d) => d.open), true);
});

test("renders tool calls", async () => {
  const answer = await ask("What is the weather in Paris? [[tool]]");
  assert.equal(await finished(answer), "finish: tool_calls");
  assert.equal(await answer.locator(".tool-call .tool-name").textContent(), "get_weather");
  assert.deepEqual(JSON.parse(await answer.locator(".tool-call pre").textContent()), { city: "Paris", days: 3 });
  if (process.env.DSV4_SCREENSHOT) await page.screenshot({ path: process.env.DSV4_SCREENSHOT });
});

test("Stop aborts the generation on the server", async () => {
  await openSettings();
  await page.uncheck("#thinking");
  await page.fill("#max-tokens", "3000");
  await page.dispatchEvent("#max-tokens", "change");
  await page.click("#toggle-settings");
  const disconnects = await metric("dsv4:client_disconnects_total");
  const answer = await ask("Tell me a very long story");
  await answer.locator(".content").waitFor();
  await page.waitForTimeout(100);
  assert.equal(await page.isEnabled("#stop"), true);
  await page.click("#stop");
  assert.equal(await finished(answer), "stopped");
  assert.equal(await page.isEnabled("#send"), true);
  const tokens = Number((await answer.locator(".stats").textContent()).split(" ")[0]);
  assert.ok(tokens > 0 && tokens < 500, `${tokens} tokens before the stop`);
  // The server saw the client leave and aborted the engine request.
  for (let i = 0; i < 50 && (await metric("dsv4:client_disconnects_total")) === disconnects; ++i) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  assert.equal(await metric("dsv4:client_disconnects_total"), disconnects + 1);
  assert.equal(await metric("dsv4:requests_in_flight"), 0);
  // The conversation goes on after a stop.
  await openSettings();
  await page.fill("#max-tokens", "5");
  await page.dispatchEvent("#max-tokens", "change");
  await page.click("#toggle-settings");
  assert.equal(await finished(await ask("And now briefly")), "finish: length");
});
