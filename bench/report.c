// report.c — tables, the machine record and the result files (see bench.h).
#include <cblas.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

void out(Bench *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    va_start(ap, fmt);
    vfprintf(b->md, fmt, ap);
    va_end(ap);
}

void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "\nrun-bench: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

const char *fmt_range(char *buf, size_t size, Summary s, double scale, int decimals) {
    if (s.n <= 1) snprintf(buf, size, "%.*f", decimals, s.median * scale);
    else snprintf(buf, size, "%.*f [%.*f–%.*f]", decimals, s.median * scale, decimals, s.min * scale, decimals,
                  s.max * scale);
    return buf;
}

json_t *summary_json(Summary s) {
    return json_pack("{s:f, s:f, s:f, s:i}", "median", s.median, "min", s.min, "max", s.max, "n", s.n);
}

json_t *summaries_json(const double *v, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_real(v[i]));
    return a;
}

// ---- the machine --------------------------------------------------------------------------------------------

// The first line of a command's output (without its newline), or "" if it prints none.
static void first_line(const char *cmd, char *buf, size_t size) {
    buf[0] = '\0';
    FILE *p = popen(cmd, "r");
    if (!p) return;
    if (!fgets(buf, (int)size, p)) buf[0] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    pclose(p);
}

long l3_bytes(void) {  // as lscpu: sysfs describes the cache this (virtual) CPU sees, which cpuid may not
    char size[32];
    first_line("cat /sys/devices/system/cpu/cpu0/cache/index3/size 2>/dev/null", size, sizeof size);
    long kib = atol(size);
    return kib > 0 ? kib * 1024 : 0;
}

json_t *machine_json(const Bench *b, const char **cpu) {
    char model[256] = "unknown", date[32];
    const char *commit = SPECDEC_COMMIT;  // the build's (Makefile)
    first_line("sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null", model, sizeof model);
    time_t t = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
    struct utsname u;
    uname(&u);
    int n;
    const Kernels *const *variants = kernels_available(&n);
    json_t *isas = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(isas, json_string(variants[i]->name));
    json_t *j = json_pack("{s:s, s:i, s:I, s:s, s:o, s:i, s:s, s:s, s:s, s:s}", "cpu", model[0] ? model : "unknown",
                          "cpus_online", (int)sysconf(_SC_NPROCESSORS_ONLN), "l3_bytes", (json_int_t)l3_bytes(), "isa",
                          b->kernels->name, "isa_available", isas, "threads", pool_size(b->pool), "date", date,
                          "commit", commit[0] ? commit : "unknown", "kernel", u.release, "openblas",
                          openblas_get_config());
    *cpu = json_string_value(json_object_get(j, "cpu"));
    return j;
}

// ---- files --------------------------------------------------------------------------------------------------

// Writes through path.tmp, renamed into place once complete.
static void write_file(const char *path, const char *text, size_t len) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f || fwrite(text, 1, len, f) != len || fclose(f) || rename(tmp, path))
        die("%s: cannot write: %s", path, strerror(errno));
}

void make_out_folder(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s", dir);
    for (char *p = path + 1;; p++) {  // each folder of the path in turn, as mkdir -p
        if (*p != '/' && *p != '\0') continue;
        const char end = *p;
        *p = '\0';
        struct stat st;
        if (mkdir(path, 0777) && (errno != EEXIST || stat(path, &st) || !S_ISDIR(st.st_mode)))
            die("--out %s: cannot make the folder %s: %s", dir, path,
                errno == EEXIST ? "a file is there" : strerror(errno));
        if (!(*p = end)) return;
    }
}

void write_results(Bench *b) {
    const char *dir = b->opt.out_dir;
    char *json = json_dumps(b->results, JSON_INDENT(1) | JSON_REAL_PRECISION(6) | JSON_PRESERVE_ORDER);
    if (!json) die("out of memory for the JSON results");
    char stamp[32], path[4096];
    const char *date = json_string_value(json_object_get(json_object_get(b->results, "machine"), "date"));
    snprintf(stamp, sizeof stamp, "%.19s", date);
    for (char *p = stamp; *p; p++) *p = *p == ':' ? '-' : *p;
    snprintf(path, sizeof path, "%s/results-%s.json", dir, stamp);
    write_file(path, json, strlen(json));
    fprintf(stderr, "run-bench: wrote %s, latest.json and latest.md in %s\n", path, dir);
    snprintf(path, sizeof path, "%s/latest.json", dir);
    write_file(path, json, strlen(json));
    free(json);
    fflush(b->md);
    snprintf(path, sizeof path, "%s/latest.md", dir);
    write_file(path, b->md_text, b->md_len);
    if (b->opt.plots) write_plots(b->results, dir);
}
