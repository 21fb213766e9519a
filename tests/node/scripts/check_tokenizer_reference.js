// Reference check: our `dsv4 tokenize --jsonl` must produce exactly the ids @huggingface/tokenizers produces.
//
//   node check_tokenizer_reference.js --dsv4 BIN --tokenizer tokenizer.json --work DIR [--seed N]
//
// Generates the corpus (tokenizer_corpus.js, seeded) including every added token of the tokenizer, encodes it
// with the JS reference (add_special_tokens: false; the JS libraries never add BOS anyway) and with dsv4,
// compares line by line and prints the first differences. Exit status 0 only when every line is identical.
'use strict';
const fs = require('fs');
const path = require('path');
const { spawnSync } = require('child_process');
const { Tokenizer } = require('@huggingface/tokenizers');
const { generate } = require('./tokenizer_corpus.js');

function parseArgs(argv) {
  const args = { seed: 20260731 };
  for (let i = 0; i < argv.length; ++i) {
    const key = argv[i].replace(/^--/, '');
    if (!['dsv4', 'tokenizer', 'work', 'seed'].includes(key)) throw new Error(`unknown argument ${argv[i]}`);
    args[key] = argv[++i];
  }
  for (const key of ['dsv4', 'tokenizer', 'work']) if (!args[key]) throw new Error(`missing --${key}`);
  return args;
}

function describe(s) {
  const shown = JSON.stringify(s.length > 200 ? s.slice(0, 200) + '…' : s);
  return `${shown} (${s.length} UTF-16 units)`;
}

function main() {
  const args = parseArgs(process.argv.slice(2));
  const tokenizerJson = JSON.parse(fs.readFileSync(args.tokenizer, 'utf8'));
  const contents = tokenizerJson.added_tokens.map((t) => t.content);
  const corpus = generate(Number(args.seed), contents);
  fs.mkdirSync(args.work, { recursive: true });
  const corpusPath = path.join(args.work, 'corpus.jsonl');
  fs.writeFileSync(corpusPath, corpus.map((s) => JSON.stringify(s)).join('\n') + '\n');

  const reference = new Tokenizer(tokenizerJson, {});
  const expected = corpus.map((s) => Array.from(reference.encode(s, { add_special_tokens: false }).ids));
  fs.writeFileSync(path.join(args.work, 'reference.jsonl'), expected.map((ids) => JSON.stringify(ids)).join('\n') + '\n');

  const run = spawnSync(args.dsv4, ['tokenize', '--tokenizer', args.tokenizer, '--jsonl', corpusPath],
                        { encoding: 'utf8', maxBuffer: 1 << 30 });
  if (run.status !== 0) {
    console.error(`dsv4 tokenize failed (status ${run.status}): ${run.stderr}`);
    process.exit(1);
  }
  const actualLines = run.stdout.split('\n').filter((l) => l.length > 0);
  if (actualLines.length !== corpus.length) {
    console.error(`dsv4 printed ${actualLines.length} lines for ${corpus.length} inputs`);
    process.exit(1);
  }
  let different = 0;
  for (let i = 0; i < corpus.length; ++i) {
    const expectedLine = JSON.stringify(expected[i]);
    if (actualLines[i] === expectedLine) continue;
    if (++different <= 10) {
      console.error(`line ${i + 1}: ${describe(corpus[i])}\n  reference ${expectedLine}\n  dsv4      ${actualLines[i]}`);
    }
  }
  const chars = corpus.reduce((n, s) => n + s.length, 0);
  console.log(`tokenizer reference (${path.basename(args.tokenizer)}): ${corpus.length} strings, ${chars} UTF-16 units`);
  console.log(`${corpus.length - different} passed, ${different} failed`);
  process.exit(different === 0 ? 0 : 1);
}

main();
