// bench.mjs — js-tiktoken's r50k_base encode throughput, for specdec's tokenizer benchmark.
//
//   node tests/oracle/bench.mjs FILE
//
// Encodes FILE (UTF-8) once to warm up, then repeatedly for at least a second, and prints one line:
// "<MB/s> <tokens>", MB being 10^6 bytes of UTF-8 input.
import { readFileSync } from "node:fs";
import { getEncoding } from "js-tiktoken";

const bytes = readFileSync(process.argv[2]);
const text = bytes.toString("utf8");
const enc = getEncoding("r50k_base");
let n = enc.encode(text, [], []).length;
let runs = 0;
const t0 = process.hrtime.bigint();
let seconds = 0;
while (seconds < 1) {
  n = enc.encode(text, [], []).length;
  runs++;
  seconds = Number(process.hrtime.bigint() - t0) / 1e9;
}
console.log(`${((bytes.length * runs) / seconds / 1e6).toFixed(2)} ${n}`);
