// Loads a Chrome trace (switchyard's trace.json) with the trace engine of the Chrome DevTools
// Performance panel (published as @paulirish/trace_engine, the parser Lighthouse uses) and
// prints, as JSON, every thread it found with its name and its number of trace entries.
// Exit 1 when the engine rejects the trace or finds no thread.
//
// usage: node check.mjs TRACE.json
import {analyzeTrace} from '@paulirish/trace_engine/analyze-trace.mjs';

const file = process.argv[2];
if (!file) {
  console.error('usage: node check.mjs TRACE.json');
  process.exit(2);
}
let parsed;
try {
  ({parsedTrace: parsed} = await analyzeTrace(file));
} catch (e) {
  console.error(`error: the trace engine rejected ${file}: ${e.message}`);
  process.exit(1);
}
const threads = [];
for (const [pid, p] of parsed.data.Renderer.processes) {
  for (const [tid, t] of p.threads) {
    threads.push({pid, tid, name: t.name, entries: t.entries.length});
  }
}
console.log(JSON.stringify({threads}));
if (threads.length === 0) {
  console.error(`error: the trace engine found no thread in ${file}`);
  process.exit(1);
}
