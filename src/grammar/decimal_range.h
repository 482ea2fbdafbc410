// decimal_range.h — the numbers within bounds as GBNF, digit by digit, as llama.cpp's JSON Schema converter writes
// integer ranges: what json_schema.c writes for minimum, maximum, exclusiveMinimum and exclusiveMaximum.
#ifndef SPECDEC_DECIMAL_RANGE_H
#define SPECDEC_DECIMAL_RANGE_H

#include <stdbool.h>

#include "grammar/text.h"

enum { DECIMAL_MAX_DIGITS = 16 };  // digits of a number's integer part (JSON's `integer` rule bounds it the same)

// The tightest bounds of a numeric schema, each within DECIMAL_MAX_DIGITS digits.
typedef struct {
    bool has_lo, has_hi;            // a bound on that side
    double lo, hi;
    bool lo_exclusive, hi_exclusive;
} Bounds;

// Appends the integers within b as GBNF alternatives (no leading zeros, no "-0"); false, with nothing appended,
// when none lies within them.
bool decimal_integers_within(Text *t, const Bounds *b);

// Appends the numbers within b as GBNF, written without an exponent; b's bounds must be whole numbers. False, with
// nothing appended, when none lies within them.
bool decimal_numbers_within(Text *t, const Bounds *b);

#endif
