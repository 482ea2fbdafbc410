// web.c — the page's files, built into the binary (see web.h).
#include "serve/web.h"

#include <string.h>

// Each file's bytes between two symbols, from the assembler's .incbin (paths relative to the tree's root, where
// make runs the compiler), in the read-only data section.
#define EMBED(name, file)                                                                                         \
    __asm__(".pushsection .rodata\n"                                                                              \
            ".global " #name "_start\n" #name "_start:\n"                                                         \
            ".incbin \"" file "\"\n"                                                                              \
            ".global " #name "_end\n" #name "_end:\n"                                                             \
            ".popsection\n");                                                                                     \
    extern const unsigned char name##_start[], name##_end[]

EMBED(web_index_html, "src/serve/web/index.html");
EMBED(web_page_css, "src/serve/web/page.css");
EMBED(web_page_js, "src/serve/web/page.js");
EMBED(web_icon_svg, "src/serve/web/icon.svg");

const char WEB_CONTENT_SECURITY_POLICY[] =
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

static const struct {
    const char *path, *type;
    const unsigned char *start, *end;
} files[] = {
    {"/", "text/html; charset=utf-8", web_index_html_start, web_index_html_end},
    {"/page.css", "text/css; charset=utf-8", web_page_css_start, web_page_css_end},
    {"/page.js", "text/javascript; charset=utf-8", web_page_js_start, web_page_js_end},
    {"/icon.svg", "image/svg+xml", web_icon_svg_start, web_icon_svg_end},
};

bool web_file(const char *path, WebFile *file) {
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        if (strcmp(path, files[i].path) == 0) {
            *file = (WebFile){.path = files[i].path, .type = files[i].type, .bytes = files[i].start,
                              .len = (size_t)(files[i].end - files[i].start)};
            return true;
        }
    return false;
}
