// hf_encode.mjs — the reference for specdec's tokenizer.json parity tests: Hugging Face's own tokenizers library
// (the Rust implementation, through its prebuilt node bindings, npm "tokenizers").
//
//   node tests/oracle/hf_encode.mjs TOKENIZER_JSON FILE [--allow-special | --add-special]
//
// Reads FILE as UTF-8 and prints its token ids on one line, separated by spaces, as specdec's tokenizer_encode
// gives them: no tokens added (add_special_tokens=False) and special tokens as plain text. Hugging Face always
// matches added tokens, so the special ones get a content that never occurs, a noncharacter (U+FDD0) before their
// own; they keep their ids (taking them out would renumber the tokens after them). With
// --allow-special they stay in (specdec's allow_special); with --add-special, also the post-processor's tokens
// are added (specdec's tokenizer_add_special_tokens after encoding with allow_special).
import { readFileSync } from "node:fs";
import { Tokenizer } from "tokenizers";

const [json, file, flag] = process.argv.slice(2);
const config = JSON.parse(readFileSync(json, "utf8"));
if (!flag) for (const t of config.added_tokens) if (t.special) t.content = "\uFDD0" + t.content;
const tokenizer = Tokenizer.fromString(JSON.stringify(config));
const text = readFileSync(file, "utf8");
const encoding = await tokenizer.encode(text, null, { addSpecialTokens: flag === "--add-special" });
process.stdout.write(encoding.getIds().join(" ") + "\n");
