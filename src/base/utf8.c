// utf8.c — decoding, validation and maximal-subpart repair of UTF-8 (see utf8.h).
#include "base/utf8.h"

#include <string.h>

// From the lead byte b: the length of the sequence it starts (0 if b cannot start one) and the range that the
// second byte must fall in (Table 3-7; the later bytes are always 80..BF).
static int lead_byte(unsigned char b, unsigned char *lo, unsigned char *hi) {
    *lo = 0x80;
    *hi = 0xBF;
    if (b < 0x80) return 1;
    if (b < 0xC2) return 0;  // 80..BF are continuation bytes; C0, C1 only start overlong forms
    if (b < 0xE0) return 2;
    if (b < 0xF0) {
        if (b == 0xE0) *lo = 0xA0;  // no overlong 3-byte forms
        if (b == 0xED) *hi = 0x9F;  // no surrogates
        return 3;
    }
    if (b < 0xF5) {
        if (b == 0xF0) *lo = 0x90;  // no overlong 4-byte forms
        if (b == 0xF4) *hi = 0x8F;  // nothing above U+10FFFF
        return 4;
    }
    return 0;
}

// How many bytes at the start of s[0..n) (n ≥ 1) begin a well-formed sequence: 0 if s[0] cannot start one, else
// 1..*total, where *total is the length of the whole sequence; the prefix is complete when it equals *total.
static int well_formed_prefix(const unsigned char *s, size_t n, int *total) {
    unsigned char lo, hi;
    *total = lead_byte(s[0], &lo, &hi);
    if (*total == 0) return 0;
    int k = 1;
    while (k < *total && (size_t)k < n) {
        unsigned char b = s[k];
        if (b < lo || b > hi) break;
        lo = 0x80;
        hi = 0xBF;
        k++;
    }
    return k;
}

int utf8_decode(const unsigned char *s, size_t n, uint32_t *cp) {
    int total;
    int len = well_formed_prefix(s, n, &total);
    if (len == 0 || len < total) return 0;
    static const unsigned char lead_mask[UTF8_MAX + 1] = {0, 0x7F, 0x1F, 0x0F, 0x07};
    uint32_t c = s[0] & lead_mask[len];
    for (int k = 1; k < len; k++) c = (c << 6) | (s[k] & 0x3F);
    *cp = c;
    return len;
}

size_t utf8_invalid_offset(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        if (u[i] < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        int len = utf8_decode(u + i, n - i, &cp);
        if (len == 0) return i;
        i += (size_t)len;
    }
    return n;
}

int utf8_encode(uint32_t cp, char out[UTF8_MAX]) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

size_t utf8_repair(const unsigned char *s, size_t n, bool final, char *out, size_t *out_len) {
    static const char replacement[] = "\xEF\xBF\xBD";  // U+FFFD
    size_t i = 0, o = 0;
    while (i < n) {
        int total;
        int len = well_formed_prefix(s + i, n - i, &total);
        if (len > 0 && len == total) {  // well-formed: copied as it is
            memcpy(out + o, s + i, (size_t)len);
            o += (size_t)len;
            i += (size_t)len;
        } else if (i + (size_t)len == n && len > 0 && !final) {  // cut short by the end: wait for more
            break;
        } else {  // a maximal subpart (or a lone byte that starts nothing): one U+FFFD
            memcpy(out + o, replacement, 3);
            o += 3;
            i += len > 0 ? (size_t)len : 1;
        }
    }
    *out_len = o;
    return i;
}
