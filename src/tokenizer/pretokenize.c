// pretokenize.c — a hand-written scanner equivalent to GPT-2's pre-tokenization pattern (see pretokenize.h).
//
// At each position the pattern's alternatives are tried in order, and the first that matches wins:
//   1. a contraction: 's 't 're 've 'm 'll 'd (lower case only);
//   2. an optional U+0020 followed by a run of letters, or of numbers, or of "other" characters (neither white
//      space, letter nor number);
//   3. a run of white space: all of it if it ends the text or is one character long; else all but its last
//      character, which then starts the next piece: "\s+(?!\S)" backs off one character so as not to end just
//      before a non-space, and that last character is matched next, with the word (a U+0020) or alone ("\s+").
#include "tokenizer/pretokenize.h"

#include <stdbool.h>
#include <stdint.h>
#include <utf8proc.h>

#include "base/utf8.h"

typedef enum { LETTER, NUMBER, SPACE, OTHER } CharClass;

// Unicode's White_Space property (PropList.txt; unchanged since Unicode 6.3).
static bool is_white_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
           c == 0x3000;
}

// The class of code point c in the pattern's terms.
static CharClass classify(uint32_t c) {
    if (c < 0x80) {
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return LETTER;
        if (c >= '0' && c <= '9') return NUMBER;
    }
    if (is_white_space(c)) return SPACE;
    switch (utf8proc_category((utf8proc_int32_t)c)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
        return LETTER;
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
        return NUMBER;
    default:
        return OTHER;
    }
}

// The class of the character at s[pos] (pos < len, valid UTF-8); *next is set to the offset just after it.
static CharClass char_at(const unsigned char *s, size_t len, size_t pos, size_t *next) {
    uint32_t c = s[pos];
    int n = 1;
    if (c >= 0x80) n = utf8_decode(s + pos, len - pos, &c);
    *next = pos + (size_t)n;
    return classify(c);
}

// The end of the run of characters of class cls that continues at s[from]; each character of the run moves
// *last to its start.
static size_t run_end(const unsigned char *s, size_t len, size_t from, CharClass cls, size_t *last) {
    size_t p = from;
    while (p < len) {
        size_t next;
        if (char_at(s, len, p, &next) != cls) break;
        *last = p;
        p = next;
    }
    return p;
}

// Length of the contraction ('s 't 're 've 'm 'll 'd) at the start of s[0..n), or 0 if there is none.
static size_t contraction_length(const unsigned char *s, size_t n) {
    if (n < 2 || s[0] != '\'') return 0;
    if (s[1] == 's' || s[1] == 't' || s[1] == 'm' || s[1] == 'd') return 2;
    if (n < 3) return 0;
    if ((s[1] == 'r' && s[2] == 'e') || (s[1] == 'v' && s[2] == 'e') || (s[1] == 'l' && s[2] == 'l')) return 3;
    return 0;
}

size_t pretokenize_next(const char *text, size_t len, size_t pos) {
    const unsigned char *s = (const unsigned char *)text;
    size_t contraction = contraction_length(s + pos, len - pos);
    if (contraction) return pos + contraction;

    size_t after;  // just after the run's first character
    CharClass cls = char_at(s, len, pos, &after);
    if (s[pos] == ' ' && after < len) {  // " ?": the space joins a following letter, number or other run
        size_t after_next;
        CharClass next = char_at(s, len, after, &after_next);
        if (next != SPACE) {
            cls = next;
            after = after_next;
        }
    }
    size_t last = pos;  // start of the run's last character
    size_t end = run_end(s, len, after, cls, &last);
    if (cls != SPACE || end == len || last == pos) return end;
    return last;  // "\s+(?!\S)": the last white-space character goes with what follows
}
