// bench_tokenizer.h — encode throughput of specdec's GPT-2 tokenizer beside js-tiktoken's, on the same text.
#ifndef SPECDEC_BENCH_TOKENIZER_H
#define SPECDEC_BENCH_TOKENIZER_H

// Encodes the UTF-8 file text_path (a large text: a few MB of prose and code) with specdec's tokenizer, loaded
// from OpenAI's GPT-2 files in tests/oracle (run from the repository root, after `npm ci --prefix tests/oracle`),
// and with js-tiktoken's r50k_base (`node tests/oracle/bench.mjs`), and prints a Markdown table: best and median
// MB/s over repeated runs, tokens, and the speed-up. Special tokens are text in both. Prints a line saying what is
// missing instead of a row when it cannot run one of them.
void bench_tokenizer(const char *text_path);

#endif
