#include "base/pages.h"

#include <sys/mman.h>

void *huge_pages_alloc(size_t bytes) {
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    madvise(p, bytes, MADV_HUGEPAGE);
    return p;
}

void huge_pages_free(void *p, size_t bytes) {
    if (p) munmap(p, bytes);
}
