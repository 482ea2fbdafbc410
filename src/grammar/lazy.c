// lazy.c — text free until a trigger, then a grammar: the trigger's KMP automaton as GBNF rules (lazy.h).
#include "grammar/lazy.h"

#include <string.h>

// δ(k, c): the length of the longest prefix of trigger[0..m) that ends trigger[0..k) followed by c (m: the whole
// trigger has been read).
static int kmp_next(const char *trigger, int m, int k, char c) {
    for (int l = k + 1 < m ? k + 1 : m; l > 0; l--) {  // l = k + 1 first: trigger[0..k) c itself
        if (trigger[l - 1] != c) continue;
        if (memcmp(trigger, trigger + k - (l - 1), (size_t)(l - 1)) == 0) return l;
    }
    return 0;
}

int lazy_gbnf(Text *t, const char *name, const char *trigger, const char *token, const char *then) {
    const int m = (int)strlen(trigger);
    if (m < 1 || m > LAZY_TRIGGER_MAX) return -1;
    for (int i = 0; i < m; i++)
        if (trigger[i] < 0x20 || trigger[i] > 0x7E) return -1;
    for (int k = 0; k < m; k++) {
        // NAME-k ::= "" | [^ the trigger's characters ] NAME-0 | "c" NAME-δ(k, c) for each of them [| TOKEN then]
        text_add(t, "%s-%d ::= \"\" | [^", name, k);
        for (int i = 0; i < m; i++)
            if (!memchr(trigger, trigger[i], (size_t)i)) text_class_char(t, (unsigned char)trigger[i]);
        text_add(t, "] %s-0", name);
        for (int i = 0; i < m; i++) {
            if (memchr(trigger, trigger[i], (size_t)i)) continue;  // each character once
            const int next = kmp_next(trigger, m, k, trigger[i]);
            text_add(t, " | ");
            text_literal(t, &trigger[i], 1);
            if (next == m) text_add(t, " %s", then);
            else text_add(t, " %s-%d", name, next);
        }
        if (token) text_add(t, " | %s %s", token, then);
        text_add(t, "\n");
    }
    return 0;
}
