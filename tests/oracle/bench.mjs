// bench.mjs — js-tiktoken's r50k_base encode throughput, for specdec's tokenizer benchmark.
//
//   node tests/oracle/bench.mjs FILE
//
// Encodes FILE (UTF-8) once to warm up, then again and again for at least two seconds (and at least three
// times), and prints one line: "<best MB/s> <median MB/s> <tokens>", MB being 10^6 bytes of UTF-8 input.
import { readFileSync } from "node:fs";
import { getEncoding } from "js-tiktoken";

const bytes = readFileSync(process.argv[2]);
const text = bytes.toString("utf8");
const enc = getEncoding("r50k_base");
const n = enc.encode(text, [], []).length;
const seconds = [];
for (let total = 0; total < 2 || seconds.length < 3; ) {
  const t0 = process.hrtime.bigint();
  enc.encode(text, [], []);
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  seconds.push(s);
  total += s;
}
seconds.sort((a, b) => a - b);
const mbs = (s) => (bytes.length / s / 1e6).toFixed(2);
console.log(`${mbs(seconds[0])} ${mbs(seconds[Math.floor(seconds.length / 2)])} ${n}`);
