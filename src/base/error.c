// error.c — formatting error messages as one escaped line (see error.h).
#include "base/error.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "base/utf8.h"

// The escaped form of the character at s[0..n) (n ≥ 1) into out (at least 7 bytes, NUL-terminated); returns how
// many bytes of s it stands for. `truncated`: s was cut short here, so an incomplete last character is dropped
// (returns n, writes nothing) rather than shown as bytes.
static size_t escape_char(const unsigned char *s, size_t n, bool truncated, char out[7]) {
    uint32_t cp;
    int len = utf8_decode(s, n, &cp);
    if (len == 0 && truncated && n < UTF8_MAX) {
        unsigned char padded[UTF8_MAX] = {0};
        memcpy(padded, s, n);
        for (size_t k = n; k < UTF8_MAX; k++) padded[k] = 0x80;  // would more bytes have completed it?
        if (utf8_decode(padded, UTF8_MAX, &cp) > 0) {
            out[0] = '\0';
            return n;
        }
    }
    if (len == 0 || cp < 0x20 || cp == 0x7F) {
        const char *named = s[0] == '\n' ? "\\n" : s[0] == '\r' ? "\\r" : s[0] == '\t' ? "\\t" : NULL;
        if (named) snprintf(out, 7, "%s", named);
        else snprintf(out, 7, "\\x%02X", s[0]);
        return 1;
    }
    if (cp >= 0x80 && cp <= 0x9F) {
        snprintf(out, 7, "\\u%04X", (unsigned)cp);
        return (size_t)len;
    }
    memcpy(out, s, (size_t)len);
    out[len] = '\0';
    return (size_t)len;
}

// raw[0..n) escaped into out[0..size), cut at a character boundary and ending in "..." when it does not fit or
// when raw itself was cut short (`cut`: then an incomplete last character is dropped, not shown as bytes).
static void escape_into(char *out, size_t size, const char *raw, size_t n, bool cut) {
    static const char more[] = "...";
    const size_t room = size - sizeof more;  // where "..." must start at the latest
    size_t len = 0, len_in_room = 0;         // escaped bytes written; the last piece boundary within room
    for (size_t i = 0; i < n;) {
        char piece[7];
        i += escape_char((const unsigned char *)raw + i, n - i, cut, piece);
        size_t k = strlen(piece);
        if (len + k >= size) {
            cut = true;
            break;
        }
        memcpy(out + len, piece, k);
        len += k;
        if (len <= room) len_in_room = len;
    }
    if (cut) {
        memcpy(out + len_in_room, more, sizeof more);
    } else {
        out[len] = '\0';
    }
}

int err_fmt(Err *err, const char *fmt, ...) {
    if (!err) return -1;
    char raw[sizeof err->msg];  // escaping never shortens, so more of the raw text could not be shown anyway
    va_list ap;
    va_start(ap, fmt);
    int n_raw = vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    if (n_raw < 0) raw[0] = '\0';
    escape_into(err->msg, sizeof err->msg, raw, strlen(raw), n_raw < 0 || (size_t)n_raw >= sizeof raw);
    return -1;
}

const char *err_escape(char *out, size_t size, const char *s) {
    escape_into(out, size, s, strlen(s), false);
    return out;
}

const char *err_quote(char buf[ERR_QUOTE_LEN + 4], const char *s) {
    size_t n = strnlen(s, ERR_QUOTE_LEN + 1);
    if (n <= ERR_QUOTE_LEN) {
        memcpy(buf, s, n + 1);
        return buf;
    }
    n = ERR_QUOTE_LEN;
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) n--;  // back to the start of a character
    memcpy(buf, s, n);
    memcpy(buf + n, "...", 4);
    return buf;
}
