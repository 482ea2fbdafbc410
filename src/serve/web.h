// web.h — the page that `specdec serve` answers GET / with (src/serve/web/: HTML, CSS and JavaScript written
// here, no framework, nothing loaded from elsewhere): a prompt, and the stream drawn as the paper's Figure 1 from
// the specdec.marks extension, with the figures of each round and a race against target-only decoding.
//
// The files are built into the binary: web.c includes their bytes with the assembler's .incbin, as they are in the
// tree (the Makefile rebuilds web.o when one changes), so the binary serves them wherever it runs, and what is
// served is what the tree holds — no generated copy to keep in step.
#ifndef SPECDEC_SERVE_WEB_H
#define SPECDEC_SERVE_WEB_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    const char *path;       // the URL path: "/", "/page.css", "/page.js", "/icon.svg"
    const char *type;       // its Content-Type
    const unsigned char *bytes;
    size_t len;
} WebFile;

// Whether a file is served at `path`, and which (*file).
bool web_file(const char *path, WebFile *file);

// The Content-Security-Policy every file is served with: scripts, styles and requests from the server itself only,
// nothing inline, no frames, no forms posted elsewhere.
extern const char WEB_CONTENT_SECURITY_POLICY[];

#endif
