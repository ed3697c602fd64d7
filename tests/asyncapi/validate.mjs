// validate.mjs: checks documents of `luastream asyncapi` with the official
// AsyncAPI parser (@asyncapi/parser, installed into tests/asyncapi/node_modules
// by ./dev from the committed lockfile).
//
//   node tests/asyncapi/validate.mjs FILE [SAME-AS-FILE]
//
// Parses FILE (JSON or YAML) and prints each diagnostic as
// `FILE: SEVERITY CODE at PATH: MESSAGE`. Exits 1 when there is an error or
// a warning; with SAME-AS-FILE (the same document in the other format), also
// when the two parse to different documents.
// Prints `FILE: valid AsyncAPI VERSION` when all is well.
import { readFileSync } from 'node:fs';
import { Parser, DiagnosticSeverity } from '@asyncapi/parser';

const SEVERITY = {
  [DiagnosticSeverity.Error]: 'error',
  [DiagnosticSeverity.Warning]: 'warning',
  [DiagnosticSeverity.Information]: 'info',
  [DiagnosticSeverity.Hint]: 'hint',
};

const parser = new Parser();

async function parse(file) {
  const text = readFileSync(file, 'utf8');
  const { document, diagnostics } = await parser.parse(text, { source: file });
  let bad = 0;
  for (const d of diagnostics) {
    const severity = SEVERITY[d.severity] ?? String(d.severity);
    if (d.severity === DiagnosticSeverity.Error || d.severity === DiagnosticSeverity.Warning) bad++;
    console.log(`${file}: ${severity} ${d.code} at ${(d.path || []).join('.') || '(root)'}: ${d.message}`);
  }
  return { document, bad };
}

// A value with every object's keys sorted: documents equal as data compare equal.
function canonical(v) {
  if (Array.isArray(v)) return v.map(canonical);
  if (v && typeof v === 'object') {
    const out = {};
    for (const k of Object.keys(v).sort()) out[k] = canonical(v[k]);
    return out;
  }
  return v;
}

const [file, other] = process.argv.slice(2);
if (!file) {
  console.error('usage: node validate.mjs FILE [SAME-AS-FILE]');
  process.exit(2);
}
const first = await parse(file);
let failed = first.bad > 0 || !first.document;
if (other) {
  const second = await parse(other);
  failed ||= second.bad > 0 || !second.document;
  if (first.document && second.document) {
    const a = JSON.stringify(canonical(first.document.json()));
    const b = JSON.stringify(canonical(second.document.json()));
    if (a !== b) {
      console.log(`${file} and ${other}: not the same document`);
      failed = true;
    }
  }
}
if (failed) process.exit(1);
console.log(`${file}: valid AsyncAPI ${first.document.version()}${other ? `, the same document as ${other}` : ''}`);
