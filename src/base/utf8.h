// utf8.h — UTF-8 as the Unicode Standard defines it (§3.9, Table 3-7 "Well-Formed UTF-8 Byte Sequences").
//
// Well-formed: no overlong forms, no surrogates (U+D800..DFFF), nothing above U+10FFFF. Ill-formed input is
// repaired with the "maximal subpart" rule (§3.9, U+FFFD Substitution of Maximal Subparts): each maximal prefix of
// a well-formed sequence that is cut short, and each byte that cannot begin one, becomes one U+FFFD.
#ifndef SPECDEC_UTF8_H
#define SPECDEC_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { UTF8_MAX = 4 };  // bytes in the longest sequence

// Length of the well-formed sequence at s[0..n) (n ≥ 1) and its code point in *cp; 0 when s does not start
// with a complete well-formed sequence.
int utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);

// Offset of the first byte of s[0..n) that does not start a well-formed sequence, or n when all of s is valid.
size_t utf8_invalid_offset(const char *s, size_t n);

// Writes the UTF-8 encoding of cp (a Unicode scalar value) to out and returns its length.
int utf8_encode(uint32_t cp, char out[UTF8_MAX]);

// Copies s[0..n) to out, replacing ill-formed parts by U+FFFD (maximal subparts). out must hold 3n bytes, since
// each byte can become a 3-byte U+FFFD. When `final` is false, an incomplete but so far well-formed sequence at
// the very end is left out, so that more bytes may complete it. Returns the number of bytes of s consumed and
// sets *out_len.
size_t utf8_repair(const unsigned char *s, size_t n, bool final, char *out, size_t *out_len);

#endif
