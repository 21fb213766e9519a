// Deterministic corpus generator for the tokenizer reference check (seeded; same output on every machine).
//
//   node tokenizer_corpus.js [--seed N] [--tokenizer tokenizer.json] > corpus.jsonl
//   node tokenizer_corpus.js --text prose|code --bytes N [--seed N] > text.txt   (raw text, for benchmarks)
//
// Writes one JSON string per line: ASCII prose, code, numbers and digit runs, CJK, kana, Hangul, Arabic and other
// scripts, emoji (ZWJ sequences, skin tones, flags, keycaps), combining marks, whitespace runs (tabs, CR, CRLF,
// NBSP, U+3000, the U+2000 block...), very long words, random code point soup, and, when --tokenizer is given,
// every added/special token of that tokenizer alone and glued to text.
//
// Deliberate exclusions (the JS reference differs from HF's Rust+Oniguruma there, not our bug):
//   * U+0085 (NEL): JavaScript's \s does not match it, Oniguruma's does.
//   * U+FEFF (BOM / ZWNBSP): JavaScript's \s matches it, Oniguruma's does not.
//   * code points assigned after Unicode 13: node's regex tables are newer than Debian's Oniguruma 6.9.8, so
//     \p{L}/\p{N}/... disagree on them. Every range below was assigned by Unicode 13 or earlier.
//   * surrogates and noncharacters (not encodable / not text).
'use strict';
const fs = require('fs');

const FORBIDDEN = new Set([0x85, 0xfeff]);

// mulberry32: a small, well-distributed 32-bit PRNG.
function makeRng(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (lo, hi) => lo + Math.floor(next() * (hi - lo + 1));  // inclusive
  const pick = (arr) => arr[int(0, arr.length - 1)];
  return { next, int, pick };
}

const cp = (c) => String.fromCodePoint(c);
const rangeChar = (rng, lo, hi) => cp(rng.int(lo, hi));

const WORDS = ('the of and to in a is that for it as was with be by on not he this are or his from at which but ' +
  'have an they you were her she there their one all we can has been if more when will would who so no model ' +
  'token server request stream context latency throughput weights expert attention cache prefix decode ' +
  'encoding quickly brown fox jumps over lazy dog Internationalization naïve café résumé coöperate Zürich').split(' ');
const CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "n't"];
const PUNCT = ['.', ',', '!', '?', ';', ':', '...', ' -- ', ' - ', '(', ')', '"', "'", '—', '–', '…', '«', '»', '“', '”'];

function prose(rng) {
  const sentences = rng.int(1, 4);
  let out = '';
  for (let s = 0; s < sentences; ++s) {
    const n = rng.int(3, 18);
    const words = [];
    for (let i = 0; i < n; ++i) {
      let w = rng.pick(WORDS);
      if (i === 0) w = w[0].toUpperCase() + w.slice(1);
      if (rng.next() < 0.08) w += rng.pick(CONTRACTIONS);
      if (rng.next() < 0.1) w += rng.pick(PUNCT);
      if (rng.next() < 0.03) w = w.toUpperCase();
      words.push(w);
    }
    out += words.join(rng.next() < 0.1 ? '  ' : ' ') + rng.pick(['.', '!', '?', '.', '."']) + rng.pick([' ', ' ', '\n', '\n\n', '']);
  }
  return out;
}

const IDENTS = ['x', 'i', 'n', 'buf', 'tokenizer', 'kv_cache', 'forward', 'self', 'std', 'vector', 'size_t', 'ctx',
  'MAX_LEN', 'fooBar', 'BazQux', '_private', '__init__', 'HTTPServer', 'utf8_decode', 'a1b2', 'résumé'];
const CODE_TEMPLATES = [
  (r, id) => `def ${id()}(${id()}, ${id()}=None):\n    return ${id()}[${r.int(0, 99)}] + ${r.int(0, 9999)}\n`,
  (r, id) => `for (int ${id()} = 0; ${id()} < ${r.int(1, 4096)}; ++${id()}) {\n\t${id()}[${id()}] += ${id()}->${id()};\n}`,
  (r, id) => `#include <${id()}.h>\n#define ${id().toUpperCase()} 0x${r.int(0, 0xffffff).toString(16)}\n`,
  (r, id) => `const ${id()} = await fetch(\`/api/v1/${id()}?q=\${${id()}}\`);  // TODO: ${id()}`,
  (r, id) => `{"${id()}": [${r.int(0, 9)}, ${r.int(10, 999)}, ${r.int(1000, 99999)}], "${id()}": {"k": "v\\n", "b": true, "n": null}}`,
  (r, id) => `SELECT ${id()}, COUNT(*) FROM ${id()} WHERE ${id()} >= ${r.int(0, 100)} AND ${id()} <> '${id()}';`,
  (r, id) => `$ ${id()} --${id()}=${r.int(1, 64)} | grep -E '^[a-z]+$' > /tmp/${id()}.log 2>&1 && echo "$?"`,
  (r, id) => `    if ${id()} is not None and ${id()} != ${id()}:\r\n        raise ValueError(f"bad {${id()}!r}")\r\n`,
  (r, id) => `template <typename T> T* ${id()}(const T& ${id()}) noexcept { return &${id()}<<${r.int(1, 8)}; }`,
  (r, id) => `<div class="${id()}">${id()} &amp; ${id()}</div>\n<!-- ${id()} -->`,
  (r, id) => `fn ${id()}(&mut self, ${id()}: &[u8]) -> Result<Vec<u32>, Box<dyn Error>> { Ok(vec![]) }`,
  (r, id) => `    ${id()}:\n      - name: ${id()}\n        value: "${r.int(0, 1e6)}"\n`,
];
function code(rng) {
  const id = () => rng.pick(IDENTS);
  let out = '';
  const n = rng.int(1, 3);
  for (let i = 0; i < n; ++i) out += rng.pick(CODE_TEMPLATES)(rng, id) + (rng.next() < 0.5 ? '\n' : '');
  return out;
}

function digits(rng, n) {
  let s = '';
  for (let i = 0; i < n; ++i) s += String(rng.int(0, 9));
  return s;
}
const NUMBER_FORMS = [
  (r) => digits(r, r.int(1, 40)),
  (r) => `${digits(r, r.int(1, 6))}.${digits(r, r.int(1, 8))}`,
  (r) => `${r.int(1, 999)},${digits(r, 3)},${digits(r, 3)}`,
  (r) => `${r.int(1900, 2100)}-${String(r.int(1, 12)).padStart(2, '0')}-${String(r.int(1, 28)).padStart(2, '0')}T${digits(r, 2)}:${digits(r, 2)}:${digits(r, 2)}Z`,
  (r) => `0x${r.int(0, 0x7fffffff).toString(16).toUpperCase()}`,
  (r) => `v${r.int(0, 20)}.${r.int(0, 99)}.${r.int(0, 999)}-rc${r.int(0, 9)}`,
  (r) => `${digits(r, r.int(1, 5))}${r.pick(['px', 'ms', 'GB', 'km/h', '%', '°C', 'th', 'x'])}`,
  (r) => `+${r.int(1, 99)} (${digits(r, 3)}) ${digits(r, 3)}-${digits(r, 4)}`,
  (r) => `${r.pick(['$', '€', '£', '¥', '₹'])}${r.int(0, 99999)}.${digits(r, 2)}`,
  (r) => `${digits(r, r.int(1, 4))} ${digits(r, r.int(1, 4))}\t${digits(r, r.int(1, 9))}`,
  // Other-script and compatibility digits: Arabic-Indic, Devanagari, fullwidth, superscripts, fractions, roman.
  (r) => Array.from({ length: r.int(1, 8) }, () => cp(r.pick([0x0660, 0x06f0, 0x0966, 0xff10, 0x0e50]) + r.int(0, 9))).join(''),
  (r) => `x${r.pick(['²', '³', '¹', '⁴', '₂'])} ${r.pick(['½', '¾', '⅓', 'Ⅻ', 'ⅷ', '①', '⑳'])}${digits(r, r.int(0, 4))}`,
  (r) => `${r.pick(WORDS)}${digits(r, r.int(1, 7))}${r.pick(WORDS)}`,
];
function numbers(rng) {
  const n = rng.int(1, 4);
  const parts = [];
  for (let i = 0; i < n; ++i) parts.push(rng.pick(NUMBER_FORMS)(rng));
  return parts.join(rng.pick([' ', ', ', '\n', '', ' and ']));
}

function scriptRun(rng, ranges, lo, hi) {
  let s = '';
  const n = rng.int(lo, hi);
  for (let i = 0; i < n; ++i) {
    const [a, b] = rng.pick(ranges);
    s += rangeChar(rng, a, b);
  }
  return s;
}
const CJK = [[0x4e00, 0x9fa5], [0x4e00, 0x62ff], [0x9fa6, 0x9fef], [0x3400, 0x4db5], [0x20000, 0x2a6d6], [0xf900, 0xfa2d]];
const CJK_PUNCT = ['。', '、', '「', '」', '（', '）', '！', '？', '：', '；', '《', '》', '·', '〜'];
const KANA = [[0x3041, 0x3096], [0x30a1, 0x30fa], [0x30fc, 0x30fe], [0x309d, 0x309f], [0xff66, 0xff9d], [0x31f0, 0x31ff]];
const HANGUL = [[0xac00, 0xd7a3], [0x1100, 0x1112], [0x1161, 0x1175], [0x3131, 0x318e]];
const SCRIPTS = {
  arabic: [[0x0621, 0x063a], [0x0641, 0x064a], [0x064b, 0x0652], [0x0671, 0x06d3], [0x060c, 0x060c], [0x061f, 0x061f]],
  hebrew: [[0x05d0, 0x05ea], [0x05b0, 0x05bd]],
  cyrillic: [[0x0410, 0x044f], [0x0401, 0x0401], [0x0451, 0x0451]],
  greek: [[0x0391, 0x03a9], [0x03b1, 0x03c9], [0x0386, 0x038f]],
  devanagari: [[0x0905, 0x0939], [0x093e, 0x094d], [0x0966, 0x096f]],
  thai: [[0x0e01, 0x0e30], [0x0e31, 0x0e3a], [0x0e40, 0x0e4e]],
  latin_ext: [[0x00c0, 0x00ff], [0x0100, 0x017f], [0x0180, 0x024f], [0x1e00, 0x1eff]],
  ethiopic: [[0x1200, 0x1248]],
  armenian: [[0x0531, 0x0556], [0x0561, 0x0586]],
};
function cjkText(rng) {
  let out = '';
  const n = rng.int(1, 5);
  for (let i = 0; i < n; ++i) {
    const kind = rng.int(0, 5);
    if (kind <= 1) out += scriptRun(rng, CJK, 1, 12);
    else if (kind === 2) out += scriptRun(rng, KANA, 1, 10);
    else if (kind === 3) out += scriptRun(rng, HANGUL, 1, 8) + (rng.next() < 0.5 ? ' ' : '');
    else if (kind === 4) out += rng.pick(CJK_PUNCT);
    else out += rng.pick([' ', rng.pick(WORDS), digits(rng, rng.int(1, 5)), '\u3000', '\n']);
  }
  return out;
}
function otherScripts(rng) {
  const names = Object.keys(SCRIPTS);
  let out = '';
  const n = rng.int(1, 5);
  for (let i = 0; i < n; ++i) {
    out += scriptRun(rng, SCRIPTS[rng.pick(names)], 1, 12);
    out += rng.pick([' ', ' ', '، ', '. ', '\n', '', '-', digits(rng, 2)]);
  }
  return out;
}

const EMOJI = [[0x1f600, 0x1f64f], [0x1f300, 0x1f5ff], [0x1f680, 0x1f6d5], [0x1f90c, 0x1f9ff], [0x2600, 0x26ff], [0x2700, 0x27bf]];
const PEOPLE = [0x1f468, 0x1f469, 0x1f467, 0x1f466, 0x1f9d1, 0x1f44b, 0x1f44d, 0x1f64b, 0x1f3c3];
function emoji(rng) {
  let out = '';
  const n = rng.int(1, 6);
  for (let i = 0; i < n; ++i) {
    const kind = rng.int(0, 6);
    if (kind === 0) out += scriptRun(rng, EMOJI, 1, 3);
    else if (kind === 1) out += cp(rng.pick(PEOPLE)) + cp(rng.int(0x1f3fb, 0x1f3ff));  // skin tone
    else if (kind === 2) {  // ZWJ sequence, maybe with skin tones
      const parts = [];
      for (let k = rng.int(2, 4); k > 0; --k) parts.push(cp(rng.pick(PEOPLE)) + (rng.next() < 0.3 ? cp(rng.int(0x1f3fb, 0x1f3ff)) : ''));
      out += parts.join('\u200d');
    } else if (kind === 3) out += cp(0x1f1e6 + rng.int(0, 25)) + cp(0x1f1e6 + rng.int(0, 25));  // flag
    else if (kind === 4) out += String(rng.int(0, 9)) + '\ufe0f\u20e3';  // keycap
    else if (kind === 5) out += rng.pick(['❤️', '☺️', '✌🏽', '🏳️‍🌈', '👁️‍🗨️', '⚕️']);
    else out += rng.pick([' ', rng.pick(WORDS), '!', '\n']);
  }
  return out;
}

const MARKS = [[0x0300, 0x036f], [0x0483, 0x0487], [0x0591, 0x05bd], [0x064b, 0x065f], [0x093c, 0x094d], [0x20d0, 0x20f0], [0x1ab0, 0x1abe], [0xfe20, 0xfe2f]];
function combining(rng) {
  let out = '';
  const n = rng.int(1, 6);
  for (let i = 0; i < n; ++i) {
    const base = rng.pick(['a', 'e', 'O', 'n', 'z', '1', ' ', '', '\n', '.', 'ж', 'ا', '字', '-']);
    out += base + scriptRun(rng, MARKS, 1, 4) + rng.pick(['', ' ', rng.pick(WORDS)]);
  }
  return out;
}

const SPACES = [' ', ' ', '  ', '\t', '\n', '\r\n', '\r', '\u00a0', '\u3000', '\u2000', '\u2003', '\u2009', '\u200a', '\u2028',
  '\u2029', '\u202f', '\u205f', '\u1680', '\u000b', '\u000c', '\u200b', '\u180e', '\t\t', '\n\n\n', ' \n', '\r\n\r\n'];
function whitespace(rng) {
  let out = rng.next() < 0.3 ? rng.pick(SPACES) : '';
  const n = rng.int(1, 8);
  for (let i = 0; i < n; ++i) {
    let run = '';
    for (let k = rng.int(1, 5); k > 0; --k) run += rng.pick(SPACES);
    out += rng.pick([rng.pick(WORDS), digits(rng, rng.int(1, 4)), rng.pick(PUNCT), '字', '']) + run;
  }
  return out;
}

function longWord(rng) {
  const len = rng.pick([100, 300, 1000, 3000, 8000]);
  const kind = rng.int(0, 6);
  const alphabet = 'abcdefghijklmnopqrstuvwxyz';
  let s = '';
  if (kind === 0) s = 'a'.repeat(len);
  else if (kind === 1) for (let i = 0; i < len; ++i) s += alphabet[rng.int(0, 25)];
  else if (kind === 2) s = digits(rng, len);
  else if (kind === 3) s = ' '.repeat(len) + 'x';
  else if (kind === 4) s = '!@#$%^&*()'.repeat(Math.ceil(len / 10));
  else if (kind === 5) s = scriptRun(rng, CJK, len / 4, len / 4);
  else s = 'ab'.repeat(len / 2) + '\n'.repeat(rng.int(1, 50));
  return s;
}

// Random code points from everything we trust (see the exclusions above), for breadth.
const SOUP = [[0x20, 0x7e], [0x00, 0x1f], [0x7f, 0x84], [0x86, 0x9f], [0xa0, 0x2ff], [0x370, 0x3ff], [0x2000, 0x206f],
  [0x20a0, 0x20bf], [0x2100, 0x214f], [0x2190, 0x23ff], [0x2500, 0x25ff], [0x3000, 0x303f], [0xe000, 0xe0ff],
  [0xff01, 0xff5e], [0x1d400, 0x1d4ff], [0x1f000, 0x1f02b], ...CJK, ...KANA, ...EMOJI, ...MARKS];
function soup(rng) {
  let s = '';
  for (let n = rng.int(1, 40); n > 0; --n) {
    const [a, b] = rng.pick(SOUP);
    const c = rng.int(a, b);
    if (!FORBIDDEN.has(c) && !(c >= 0x2065 && c <= 0x2065)) s += cp(c);
  }
  return s;
}

function specialTokenStrings(rng, contents) {
  const out = [];
  for (const c of contents) out.push(c);  // every added token alone
  for (let i = 0; i < 400; ++i) {
    const a = rng.pick(contents);
    const b = rng.pick(contents);
    const kind = rng.int(0, 7);
    if (kind === 0) out.push(prose(rng).slice(0, rng.int(1, 40)) + a + prose(rng).slice(0, rng.int(0, 40)));
    else if (kind === 1) out.push(a + b + a);
    else if (kind === 2) out.push(`x${a}y${b}z`);
    else if (kind === 3) out.push(a.slice(0, Math.max(1, a.length - 1)) + ' ' + a.slice(1));  // partial tokens
    else if (kind === 4) out.push(` ${a} \n${b}\n`);
    else if (kind === 5) out.push(digits(rng, rng.int(1, 6)) + a + digits(rng, rng.int(1, 6)));
    else if (kind === 6) out.push(cjkText(rng) + a + emoji(rng));
    else out.push(code(rng).slice(0, 60) + a + '\t' + b);
  }
  return out;
}

const FIXED = ['', ' ', '\n', '\r\n', '\t', 'a', 'Hello, world!', "I'm here, they're there; we'll see; it's 5 o'clock.",
  '<｜DSML｜invoke name="get_weather">', '</｜DSML｜tool_calls>', '<think>\n</think>\n\n', 'a  b   c    d',
  ' \u00a0 \u3000 ', '\u00a0\u00a0x', 'x\u3000\u3000', '1234567890123', '٣٤٥٦', '👨‍👩‍👧‍👦', '🇺🇸🇯🇵', 'e\u0301\u0301', '\u0301abc'];

function generate(seed, contents) {
  const rng = makeRng(seed);
  const out = [...FIXED];
  const kinds = [prose, code, numbers, cjkText, otherScripts, emoji, combining, whitespace, soup];
  for (const kind of kinds) for (let i = 0; i < 220; ++i) out.push(kind(rng));
  for (let i = 0; i < 40; ++i) out.push(longWord(rng));
  for (let i = 0; i < 150; ++i) {  // mixtures
    let s = '';
    for (let k = rng.int(2, 5); k > 0; --k) s += rng.pick(kinds)(rng);
    out.push(s);
  }
  out.push(...specialTokenStrings(rng, contents));
  for (const s of out)
    for (const ch of s) if (FORBIDDEN.has(ch.codePointAt(0))) throw new Error('corpus contains an excluded code point');
  return out;
}

function main() {
  const args = process.argv.slice(2);
  let seed = 20260731;
  let tokenizerPath = null;
  let textKind = null;
  let bytes = 1 << 20;
  for (let i = 0; i < args.length; ++i) {
    if (args[i] === '--seed') seed = Number(args[++i]);
    else if (args[i] === '--tokenizer') tokenizerPath = args[++i];
    else if (args[i] === '--text') textKind = args[++i];
    else if (args[i] === '--bytes') bytes = Number(args[++i]);
    else throw new Error(`unknown argument ${args[i]}`);
  }
  if (textKind !== null) {
    const kinds = { prose, code };
    if (!kinds[textKind]) throw new Error(`--text must be prose or code, not ${textKind}`);
    const rng = makeRng(seed);
    const parts = [];
    for (let size = 0; size < bytes;) {
      const part = kinds[textKind](rng) + (textKind === 'prose' ? ' ' : '\n');
      parts.push(part);
      size += Buffer.byteLength(part);
    }
    process.stdout.write(parts.join(''));
    return;
  }
  let contents = [];
  if (tokenizerPath) contents = JSON.parse(fs.readFileSync(tokenizerPath, 'utf8')).added_tokens.map((t) => t.content);
  const lines = generate(seed, contents).map((s) => JSON.stringify(s));
  process.stdout.write(lines.join('\n') + '\n');
}

if (require.main === module) main();
module.exports = { generate };
