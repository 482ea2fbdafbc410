// pages.h — memory straight from the kernel, on 2 MB huge pages where it allows: the model's weights, and its KV
// cache where that pays (model/kvcache.c).
#ifndef SPECDEC_PAGES_H
#define SPECDEC_PAGES_H

#include <stddef.h>

// `bytes` of zeroed anonymous memory, mapped at its first touch, with the kernel asked for huge pages (a hint:
// without them the pages are simply 4 kB). NULL if out of memory.
void *huge_pages_alloc(size_t bytes);

// Gives back what huge_pages_alloc(bytes) returned (p may be NULL).
void huge_pages_free(void *p, size_t bytes);

#endif
