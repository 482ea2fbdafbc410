// decimal_range.c — the numbers within bounds as GBNF, digit by digit (decimal_range.h).
#include "grammar/decimal_range.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

// The numbers with digits lo[0..n) to hi[0..n) (equal lengths, lo ≤ hi) as GBNF, digit by digit: the first digit
// shared, or split into lo's first digit (then anything ≥ the rest of lo), the digits between (then anything), and
// hi's first digit (then anything ≤ the rest of hi).
static void digits_between(Text *t, const char *lo, const char *hi, int n) {
    if (n == 0) return;
    if (lo[0] == hi[0]) {
        text_add(t, " \"%c\"", lo[0]);
        digits_between(t, lo + 1, hi + 1, n - 1);
        return;
    }
    char nines[DECIMAL_MAX_DIGITS + 1], zeros[DECIMAL_MAX_DIGITS + 1];
    memset(nines, '9', (size_t)n - 1);
    memset(zeros, '0', (size_t)n - 1);
    bool lo_whole = strncmp(lo + 1, zeros, (size_t)n - 1) == 0, hi_whole = strncmp(hi + 1, nines, (size_t)n - 1) == 0;
    char first = lo_whole ? lo[0] : (char)(lo[0] + 1), last = hi_whole ? hi[0] : (char)(hi[0] - 1);
    const char *sep = "";
    text_add(t, " (");
    if (!lo_whole) {
        text_add(t, "\"%c\"", lo[0]);
        digits_between(t, lo + 1, nines, n - 1);
        sep = " | ";
    }
    if (first <= last) {
        text_add(t, "%s[%c-%c]", sep, first, last);
        if (n > 1) text_add(t, " [0-9]{%d}", n - 1);
        sep = " | ";
    }
    if (!hi_whole) {
        text_add(t, "%s\"%c\"", sep, hi[0]);
        digits_between(t, zeros, hi + 1, n - 1);
    }
    text_add(t, ")");
}

// The non-negative integers lo..hi (hi < 0: up to DECIMAL_MAX_DIGITS digits) without leading zeros, as alternatives.
static void naturals_between(Text *t, long long lo, long long hi) {
    char l[DECIMAL_MAX_DIGITS + 2], h[DECIMAL_MAX_DIGITS + 2];
    int n_lo = snprintf(l, sizeof l, "%lld", lo), n_hi = hi < 0 ? DECIMAL_MAX_DIGITS : snprintf(h, sizeof h, "%lld", hi);
    const char *sep = "";
    text_add(t, "(");
    for (int d = n_lo; d <= n_hi; d++) {
        char a[DECIMAL_MAX_DIGITS + 2], b[DECIMAL_MAX_DIGITS + 2];
        if (d == n_lo) memcpy(a, l, (size_t)d + 1);
        else snprintf(a, sizeof a, "1%0*d", d - 1, 0);
        if (d == n_hi && hi >= 0) {
            memcpy(b, h, (size_t)d + 1);
        } else {
            memset(b, '9', (size_t)d);
            b[d] = '\0';
        }
        text_add(t, "%s(\"\"", sep);
        digits_between(t, a, b, d);
        text_add(t, ")");
        sep = " | ";
    }
    text_add(t, ")");
}

// The integers within bounds b: lo..hi, an exclusive bound moved in by one; false when there are none.
static bool integers_within(const Bounds *b, long long *lo, long long *hi) {
    *lo = (long long)ceil(b->lo);
    if (b->lo_exclusive && (double)*lo == b->lo) (*lo)++;
    *hi = (long long)floor(b->hi);
    if (b->hi_exclusive && (double)*hi == b->hi) (*hi)--;
    return !(b->has_lo && b->has_hi && *lo > *hi);
}

// The integers lo..hi (an end open where has_ is false; lo ≤ hi) as alternatives: the negative ones as "-" then
// -min(hi, -1) .. -lo, then the non-negative ones.
static void integers_between(Text *t, bool has_lo, long long lo, bool has_hi, long long hi) {
    const char *sep = "";
    text_add(t, "(");
    if (!has_lo || lo < 0) {
        long long top = has_hi && hi < -1 ? -hi : 1;
        text_add(t, "\"-\" ");
        naturals_between(t, top, has_lo ? -lo : -1);
        sep = " | ";
    }
    if (!has_hi || hi >= 0) {
        text_add(t, "%s", sep);
        naturals_between(t, has_lo && lo > 0 ? lo : 0, has_hi ? hi : -1);
    }
    text_add(t, ")");
}

bool decimal_integers_within(Text *t, const Bounds *b) {
    long long lo, hi;
    if (!integers_within(b, &lo, &hi)) return false;
    integers_between(t, b->has_lo, lo, b->has_hi, hi);
    return true;
}

// A number within whole bounds L and H: an integer within them, with a fraction of zeros or none; or a number
// strictly between whole k and k + 1 for some k with L ≤ k ≤ H - 1 (then it lies inside the bounds whether they are
// exclusive or not) — "I.F" (k = I) for k ≥ 0, "-I.F" (k = -I - 1) for k < 0, F not all zeros.
bool decimal_numbers_within(Text *t, const Bounds *b) {
    long long lo, hi, L = (long long)b->lo, H = (long long)b->hi;
    long long below_lo = b->has_hi && H < 0 ? -H : 0;  // "-I.F": I from max(-H, 0) to -L - 1
    bool positive_fractions = !b->has_hi || H - 1 >= (b->has_lo && L > 0 ? L : 0);
    bool negative_fractions = !b->has_lo || -L - 1 >= below_lo;
    bool integers = integers_within(b, &lo, &hi);
    if (!integers && !positive_fractions && !negative_fractions) return false;
    static const char zero_fraction[] = " (\".\" \"0\"{1,16})?", fraction[] = " \".\" \"0\"{0,15} [1-9] [0-9]{0,15}";
    const char *sep = "";
    text_add(t, "(");
    if (integers) {
        integers_between(t, b->has_lo, lo, b->has_hi, hi);
        text_add(t, "%s", zero_fraction);
        sep = " | ";
    }
    if (positive_fractions) {
        text_add(t, "%s", sep);
        naturals_between(t, b->has_lo && L > 0 ? L : 0, b->has_hi ? H - 1 : -1);
        text_add(t, "%s", fraction);
        sep = " | ";
    }
    if (negative_fractions) {
        text_add(t, "%s\"-\" ", sep);
        naturals_between(t, below_lo, b->has_lo ? -L - 1 : -1);
        text_add(t, "%s", fraction);
    }
    text_add(t, ")");
    return true;
}
