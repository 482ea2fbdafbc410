// encode.mjs — the reference GPT-2 tokenizer for specdec's parity test: js-tiktoken's r50k_base.
//
//   node tests/oracle/encode.mjs FILE [--allow-special | --pieces]
//
// Reads FILE as UTF-8 and prints one line of numbers separated by spaces: its token ids, or with --pieces the
// length in UTF-8 bytes of each piece that GPT-2's pre-tokenization pattern (r50k_base's own) splits it into.
// Special tokens such as "<|endoftext|>" are plain text unless --allow-special, as in specdec.
import { readFileSync } from "node:fs";
import { getEncoding } from "js-tiktoken";
import r50k from "js-tiktoken/ranks/r50k_base";

const [file, flag] = process.argv.slice(2);
const text = readFileSync(file, "utf8");
let out;
if (flag === "--pieces") {
  out = Array.from(text.matchAll(new RegExp(r50k.pat_str, "ug")), (m) => Buffer.byteLength(m[0]));
} else {
  const enc = getEncoding("r50k_base");
  out = flag === "--allow-special" ? enc.encode(text, "all") : enc.encode(text, [], []);
}
process.stdout.write(out.join(" ") + "\n");
