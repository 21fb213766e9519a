// Static checks of the Dockerfile (no daemon or registry here to build it): dockerfile-utils' linter finds no
// problem, every stage a COPY --from or FROM names exists, the cpu and cuda targets exist and end as an unprivileged
// user with a HEALTHCHECK and `dsv4 serve` as the command, and base images are pinned to a tag.
//   node check_dockerfile.js Dockerfile  -> prints the `serve` flags of every CMD (one per line) for the caller
const fs = require("fs");
const assert = require("assert/strict");
const { validate } = require("dockerfile-utils");
const { DockerfileParser } = require("dockerfile-ast");

const path = process.argv[2];
const text = fs.readFileSync(path, "utf8");
const problems = validate(text);
assert.deepEqual(problems.map((p) => `line ${p.range.start.line + 1}: ${p.message}`), [], "dockerfile-utils");

const dockerfile = DockerfileParser.parse(text);
const stages = new Map();  // name -> instructions
const buildArgs = new Map();  // ARGs before the first FROM, with their defaults
const expand = (text) => text.replace(/\$\{(\w+)\}/g, (m, name) => buildArgs.get(name) ?? m);
let current = null;
for (const instruction of dockerfile.getInstructions()) {
  const keyword = instruction.getKeyword();
  const args = instruction.getArguments().map((a) => a.getValue());
  if (keyword === "FROM") {
    const asIndex = args.findIndex((a) => a.toUpperCase() === "AS");
    current = asIndex >= 0 ? args[asIndex + 1] : `stage${stages.size}`;
    const image = expand(args[0]);
    assert.ok(stages.has(image) || /^[^$]+:[\w.-]+$/.test(image), `FROM ${image}: pin a tag`);
    stages.set(current, { from: image, instructions: [] });
    continue;
  }
  if (!current) {
    assert.equal(keyword, "ARG", `${keyword} before the first FROM`);  // build arguments of the FROM lines
    const [name, value] = args[0].split("=");
    assert.ok(value, `ARG ${name} before FROM needs a default`);
    buildArgs.set(name, value);
    continue;
  }
  stages.get(current).instructions.push({ keyword, args, text: instruction.getTextContent() });
}
for (const [name, stage] of stages) {
  for (const { keyword, args } of stage.instructions) {
    const from = args.find((a) => a.startsWith("--from="));
    if (keyword === "COPY" && from) assert.ok(stages.has(from.slice(7)), `${name}: COPY ${from}: no such stage`);
  }
}

// The last USER / HEALTHCHECK / CMD of a target, following its FROM chain.
function effective(name, keyword) {
  for (let stage = stages.get(name); stage; stage = stages.get(stage.from)) {
    const found = stage.instructions.filter((i) => i.keyword === keyword);
    if (found.length) return found[found.length - 1];
  }
  return null;
}
const flags = new Set();
for (const target of ["cpu", "cuda"]) {
  assert.ok(stages.has(target), `no '${target}' target`);
  const user = effective(target, "USER");
  assert.ok(user && user.args[0] !== "root" && user.args[0] !== "0", `${target}: runs as root`);
  assert.ok(effective(target, "HEALTHCHECK"), `${target}: no HEALTHCHECK`);
  const cmd = JSON.parse(effective(target, "CMD").text.replace(/^CMD\s+/, ""));
  assert.equal(cmd[0], "serve", `${target}: CMD is not dsv4 serve`);
  const entrypoint = JSON.parse(effective(target, "ENTRYPOINT").text.replace(/^ENTRYPOINT\s+/, ""));
  assert.deepEqual(entrypoint, ["/usr/local/bin/dsv4"]);
  for (const arg of cmd) if (arg.startsWith("--")) flags.add(arg.split("=")[0]);
}
console.log([...flags].join("\n"));
