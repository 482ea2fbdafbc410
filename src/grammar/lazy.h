// lazy.h — a grammar that leaves text free until a trigger appears, and constrains what follows it: llama.cpp's lazy
// grammars (their trigger words) written as one ordinary GBNF grammar, so that the masks, grammar-forced drafting
// and the exactness of speculative decoding under it are those of any grammar (docs/structured.md).
//
// The free text is any text that does not contain the trigger: a regular language, written as one rule per state of
// the trigger's Knuth–Morris–Pratt automaton (Knuth, Morris & Pratt, "Fast pattern matching in strings", 1977).
// State k holds when the longest tail of the text read that begins the trigger is its first k characters; reading
// c moves to δ(k, c), the longest prefix of the trigger that ends the text then; reaching the whole trigger moves to
// the constrained part. Every state may end (a text without the trigger is a sentence), and every reference is a
// tail call, so a parse's stack does not grow with the text. The free text is text, so valid UTF-8: as under any
// grammar, special tokens (without bytes) are refused in it, the end-of-text token aside.
#ifndef SPECDEC_GRAMMAR_LAZY_H
#define SPECDEC_GRAMMAR_LAZY_H

#include "grammar/text.h"

enum { LAZY_TRIGGER_MAX = 64 };

// Appends the rules NAME-0 … NAME-(m−1) to t: NAME-0 derives any text free of `trigger` (m printable ASCII
// characters, 1 ≤ m ≤ LAZY_TRIGGER_MAX), optionally followed by the trigger and then what the rule `then` derives.
// `token` (NULL: none), a GBNF token reference (grammar.h: the tokenizer's token for the trigger, "<[TOOL_CALLS]>"),
// triggers too, wherever it comes: the model may open the constrained part with the token or spell its text.
// Returns -1 (nothing appended) for a trigger outside that.
int lazy_gbnf(Text *t, const char *name, const char *trigger, const char *token, const char *then);

#endif
