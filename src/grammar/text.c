// text.c — a growing string for writing grammars (text.h).
#include "grammar/text.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/utf8.h"

void text_add(Text *t, const char *fmt, ...) {
    if (t->failed) return;
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (t->n + (size_t)len + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 256;
        while (cap < t->n + (size_t)len + 1) cap *= 2;
        char *grown = realloc(t->s, cap);
        if (!grown) {
            t->failed = true;
            return;
        }
        t->s = grown;
        t->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(t->s + t->n, (size_t)len + 1, fmt, ap);
    va_end(ap);
    t->n += (size_t)len;
}

void text_literal(Text *t, const char *s, size_t n) {
    text_add(t, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') text_add(t, "\\%c", c);
        else if (c < 0x20 || c == 0x7F) text_add(t, "\\x%02X", c);
        else text_add(t, "%c", c);
    }
    text_add(t, "\"");
}

void text_class_char(Text *t, uint32_t cp) {
    if (cp == '\\' || cp == ']' || cp == '[' || cp == '-') text_add(t, "\\%c", (char)cp);
    else if (cp < 0x20 || cp == 0x7F || cp == '^') text_add(t, "\\x%02X", (unsigned)cp);
    else {
        char buf[UTF8_MAX + 1];
        buf[utf8_encode(cp, buf)] = '\0';
        text_add(t, "%s", buf);
    }
}

char *text_take(Text *t) {
    if (!t->s && !t->failed) text_add(t, "%s", "");
    char *s = t->failed ? NULL : t->s;
    if (t->failed) free(t->s);
    *t = (Text){0};
    return s;
}
