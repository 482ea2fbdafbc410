// grammar.h — context-free grammars in GBNF, and a recogniser that reads text byte by byte.
//
// GBNF is llama.cpp's notation for grammars (its grammars/README.md), an extended Backus–Naur form:
//     root  ::= "{" space pair ("," space pair)* "}"     # a comment runs to the end of the line
//     pair  ::= [a-z]+ ":" space value
//     space ::= [ \t\n]{0,2}
// A rule is `name ::= alternatives` and ends at the end of its line (inside parentheses, or after `|` or `::=`, a
// newline is only space). Names are letters, digits and `-`. A sequence's items: "literal" strings, character
// classes `[a-z_]` and `[^"\\]` (ranges, negation), `.` (any character), rule references, `( … )` groups, each
// optionally followed by `*`, `+`, `?`, `{m}`, `{m,}`, `{m,n}` or `{,n}` (at most GRAMMAR_MAX_REPEAT). Escapes in
// literals and classes: \t \n \r \\ \" \[ \] \- and \xHH, \uHHHH, \UHHHHHHHH. The grammar's language is what `root`
// derives; text is matched as Unicode characters, whose UTF-8 bytes the recogniser reads one by one.
//
// A token reference names a token of the vocabulary by its text, as llama.cpp's grammars do: `<|python_tag|>`,
// `<tool_call>` (the angle brackets are the token's own), and `<[TOOL_CALLS]>` for a token in square brackets
// (Mistral's control tokens; there the angle brackets only enclose it). It matches that token alone, not its text
// spelled in other tokens: a grammar may make the model write a special token that text never encodes to, and no
// other. Each token named is a marker of the grammar, read as one character beyond Unicode (GRAMMAR_MARKER_BASE +
// its index) that no character class admits, `.` and negated classes included; the vocabulary spells marker k as
// the one byte GRAMMAR_MARKER_BYTE + k, which no UTF-8 text holds (grammar/vocabulary.h gives those bytes to the
// named tokens, and none to the ordinary tokens that hold such a byte, which no valid text holds either).
//
// Refused, each naming line and column (grammar:LINE:COLUMN: …): syntax errors, an undefined rule, a rule defined
// twice, a character class that is empty or runs backwards, escapes outside Unicode, llama.cpp's token references
// by number (`<[ID]>`) and negated ones (`!<…>`), and left recursion (a rule that can reach itself without reading a character, such as `a ::= a "x"` or
// `b ::= ("x"?)*`), which a top-down recogniser cannot run.
//
// The recogniser is a nondeterministic pushdown automaton: its state is the set of every parse still possible, each
// a stack of positions in the grammar (the top: the character class to match next; below it, where each enclosing
// rule continues), plus the bytes read of a character not yet complete — forgotten once the code point no longer
// matters (every parse's class admits all the characters those bytes can finish, or none), so that such states
// are one whatever the bytes. Reading a character advances every stack
// whose top matches it and drops the others; a stack that finishes a rule returns to the position below. Stacks do
// not grow with repetition (a rule reference last in its alternative is a tail call).
#ifndef SPECDEC_GRAMMAR_H
#define SPECDEC_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

enum {
    GRAMMAR_MAX_REPEAT = 2000,  // the largest m or n in {m,n}
    GRAMMAR_MAX_STACKS = 1024,  // parses a state holds at most; a byte that would need more is refused
    GRAMMAR_MAX_DEPTH = 512,    // rules open at once in one parse; deeper nesting is refused
    GRAMMAR_MAX_CELLS = 1 << 16,  // positions in all of a state's stacks together; more is refused
    GRAMMAR_MARKERS_MAX = 8,    // tokens a grammar references (the bytes 0xF8..0xFF)
    GRAMMAR_MARKER_BYTE = 0xF8, // marker k's byte: GRAMMAR_MARKER_BYTE + k
};

// Marker k's character: GRAMMAR_MARKER_BASE + k, past U+10FFFF.
#define GRAMMAR_MARKER_BASE 0x110000u

typedef enum {
    GRAMMAR_END,    // the end of an alternative: return to the enclosing rule
    GRAMMAR_CHARS,  // one character from a class: ranges[first .. first + n_ranges), or their complement
    GRAMMAR_RULE,   // a reference to rules[rule]
} GrammarElementKind;

typedef struct {
    uint32_t lo, hi;  // code points lo..hi, inclusive
} GrammarRange;

typedef struct {
    GrammarElementKind kind;
    bool negated;       // CHARS: every character but the ranges ("." is the negation of no range)
    int first, n;       // CHARS: its ranges, ascending, neither overlapping nor adjacent; RULE: first = the rule
} GrammarElement;

typedef struct {
    char *name;         // as written; generated rules (groups, repetitions) are named after theirs: "root/3"
    int first_alt, n_alts;  // alt_start[first_alt .. first_alt + n_alts)
    // A link of a bounded repetition's chain (x{m,n} ends in R_{n−m}, where R_k ::= x R_{k−1} | "" and R_1 ::= x | ""):
    // k, the items it may still read, and the rule R_{k−1} (−1 for R_1). 0 and −1 for every other rule. R_k and
    // R_{k−1} differ only in that reference, so an element of one has its counterpart at the same offset in the other.
    int repeats_left, repeat_tail;
} GrammarRule;

// A parsed grammar: immutable, shared by every state that reads against it.
typedef struct Grammar {
    GrammarRule *rules;
    int n_rules, root;
    int *alt_start;             // each alternative's first element in elements[]; it runs to a GRAMMAR_END
    GrammarElement *elements;
    GrammarRange *ranges;
    int n_elements, n_ranges, n_alts;
    char *markers[GRAMMAR_MARKERS_MAX];  // the texts of the tokens referenced, marker k's at [k]
    int n_markers;
} Grammar;

// Parses GBNF text[0..n) (need not be NUL-terminated). `source` names it in messages ("grammar.gbnf", "the request's
// grammar"). Returns NULL with err set, naming line and column.
Grammar *grammar_parse(const char *text, size_t n, const char *source, Err *err);
void grammar_free(Grammar *g);

// ---- the recogniser ----------------------------------------------------------------------------------------------

// Where reading stands: every parse still possible. A value (copy with grammar_state_copy): the scheduler keeps one
// per committed text and rolls back by copying.
typedef struct {
    const Grammar *grammar;
    int n_stacks;
    int *start;             // [n_stacks + 1]: stack i is cells[start[i] .. start[i+1]), its top last
    int *cells;             // element indices; an empty stack is a finished parse
    uint32_t *hash;         // [n_stacks]: each stack's hash, to merge duplicates
    int *slot;              // [n_slots], a power of two: open addressing by hash, stack index + 1 (0: empty)
    int cap_stacks, cap_cells, n_slots;
    uint32_t partial;       // the bits read so far of a character not yet complete
    int pending;            // continuation bytes it still needs (0: between characters)
    int length;             // that character's length in bytes
} GrammarState;

// The state before any text: the parses of `root`. Returns -1 (out of memory, or a grammar too ambiguous) with err.
int grammar_state_init(GrammarState *s, const Grammar *g, Err *err);
void grammar_state_free(GrammarState *s);
// dst = src (dst initialised, or zeroed); -1 only when out of memory.
int grammar_state_copy(GrammarState *dst, const GrammarState *src);

// Reads one byte: true and the state advanced when some parse can continue with it (a byte inside a character can
// when some character the grammar allows there begins with the bytes so far); false and the state unchanged when
// none can. `next` is scratch that the function may overwrite (a state of the same grammar), so that reading
// allocates nothing once warm.
bool grammar_accept_byte(GrammarState *s, unsigned char byte, GrammarState *next);
// grammar_accept_byte that leaves s as it is: the state after the byte goes to out. false: refused.
bool grammar_advance(const GrammarState *s, unsigned char byte, GrammarState *out);
// Reads text[0..n): true when every byte was accepted; false leaves s at the first refused byte's state.
bool grammar_accept_bytes(GrammarState *s, const char *text, size_t n, GrammarState *next);
// The text so far is a sentence of the grammar: reading may end here.
bool grammar_may_end(const GrammarState *s);
// The text so far is a sentence and no parse can read more: reading must end here.
bool grammar_must_end(const GrammarState *s);
// Whether text[0..n) is a sentence of g: read whole from the start, and may end there. false when out of memory.
bool grammar_recognises(const Grammar *g, const char *text, size_t n);
// A hash of the state (its stacks and the partial character), equal for equal states: the masks' cache key.
uint64_t grammar_state_hash(const GrammarState *s);
bool grammar_state_equal(const GrammarState *a, const GrammarState *b);
// dst = src with every cell e of its stacks replaced by map[e] (stacks that become equal merged), the partial
// character kept. -1 when out of memory or over the state's limits.
int grammar_state_map(GrammarState *dst, const GrammarState *src, const int *map);

#endif
