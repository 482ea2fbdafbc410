// plots.c — PNG plots of the results with gnuplot (Debian's gnuplot-nox), from the JSON the suites wrote:
//   speedup_vs_gamma.png          measured speed-up against γ per temperature, with Theorem 3.8's curve
//   acceptance_vs_temperature.png α and the acceptance rate of each γ against the temperature
//   verify_cost.png               time(T) / time(1) of a forward over T tokens, target and draft
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static double num(const json_t *o, const char *key) { return json_number_value(json_object_get(o, key)); }

// The median, min and max of a Summary's JSON object o[key].
static void range(const json_t *o, const char *key, double *median, double *min, double *max) {
    const json_t *s = json_object_get(o, key);
    *median = num(s, "median"), *min = num(s, "min"), *max = num(s, "max");
}

static FILE *gnuplot_open(const char *dir, const char *file) {
    FILE *g = popen("gnuplot", "w");
    if (!g) return NULL;
    fprintf(g, "set terminal pngcairo size 900,560 font 'Sans,10'\nset output '%s/%s'\n"
               "set grid lc rgb '#dddddd'\nset key top left box opaque\n", dir, file);
    return g;
}

static void gnuplot_close(FILE *g, const char *dir, const char *file) {
    if (pclose(g) != 0) fprintf(stderr, "run-bench: gnuplot failed on %s/%s\n", dir, file);
}

static void plot_speedup(const json_t *spec, const char *dir) {
    FILE *g = gnuplot_open(dir, "speedup_vs_gamma.png");
    if (!g) return;
    const json_t *temps = json_object_get(spec, "temperatures");
    size_t t;
    const json_t *temp;
    json_array_foreach(temps, t, temp) {
        const json_t *configs = json_object_get(temp, "configs"), *c;
        size_t i;
        fprintf(g, "$fixed%zu << EOD\n", t);
        json_array_foreach(configs, i, c) {
            double median, min, max;
            range(c, "speedup", &median, &min, &max);
            if (json_object_get(c, "gamma")) fprintf(g, "%g %g %g %g\n", num(c, "gamma"), median, min, max);
        }
        fprintf(g, "EOD\n$adaptive%zu << EOD\n", t);
        json_array_foreach(configs, i, c) {
            double median, min, max;
            range(c, "speedup", &median, &min, &max);
            const char *policy = json_string_value(json_object_get(c, "policy"));
            if (strcmp(policy, "heuristic") == 0 || strcmp(policy, "auto") == 0)
                fprintf(g, "%g %g %d\n", num(c, "mean_gamma"), median, strcmp(policy, "auto") == 0 ? 9 : 5);
        }
        double a = num(temp, "alpha"), c_cost = num(temp, "c");
        fprintf(g, "EOD\nf%zu(x) = (1 - %.6f**(x + 1)) / ((1 - %.6f) * (x * %.6f + 1))\n", t, a < 1 ? a : 0.999999,
                a < 1 ? a : 0.999999, c_cost);
    }
    fprintf(g, "set title \"Speed-up over target-only against the draft length γ (median, bars: min–max over prompts)\\n"
               "dashed: Theorem 3.8, (1 − α^{γ+1}) / ((1 − α)(γc + 1)), with the measured α and c; "
               "squares: heuristic, triangles: auto, at their mean γ\"\n"
               "set xlabel 'γ (draft tokens per round)'\nset ylabel 'speed-up'\nset xrange [0.5:8.5]\n"
               "set yrange [0:*]\nset samples 200\nplot 1 with lines lc rgb '#888888' notitle");
    json_array_foreach(temps, t, temp) {
        double T = num(temp, "temperature");
        fprintf(g, ", $fixed%zu using 1:2:3:4 with yerrorlines lc %zu pt 7 title 'temperature %.1f (α = %.2f, c = %.2f)'"
                   ", f%zu(x) with lines lc %zu dt 2 notitle, $adaptive%zu using 1:2:3 with points lc %zu pt variable "
                   "ps 1.5 notitle", t, t + 1, T, num(temp, "alpha"), num(temp, "c"), t, t + 1, t, t + 1);
    }
    fprintf(g, "\n");
    gnuplot_close(g, dir, "speedup_vs_gamma.png");
}

static void plot_acceptance(const json_t *spec, const char *dir) {
    FILE *g = gnuplot_open(dir, "acceptance_vs_temperature.png");
    if (!g) return;
    const json_t *temps = json_object_get(spec, "temperatures"), *temp, *c;
    size_t t, i;
    fprintf(g, "$data << EOD\n");
    json_array_foreach(temps, t, temp) {
        fprintf(g, "%g %g", num(temp, "temperature"), num(temp, "alpha"));
        json_array_foreach(json_object_get(temp, "configs"), i, c)
            if (json_object_get(c, "gamma")) fprintf(g, " %g", num(c, "acceptance"));
        fprintf(g, "\n");
    }
    fprintf(g, "EOD\nset title 'Acceptance against temperature: α = mean Σ min(p, q) over the fixed γ, and accepted "
               "/ drafted for each γ'\nset xlabel 'temperature'\nset ylabel 'probability'\nset yrange [0:1]\n"
               "set xrange [-0.05:1.05]\nset key outside right\n"
               "plot $data using 1:2 with linespoints lw 3 lc rgb 'black' pt 7 title 'α'");
    int column = 3;
    json_array_foreach(json_object_get(json_array_get(temps, 0), "configs"), i, c)
        if (json_object_get(c, "gamma"))
            fprintf(g, ", $data using 1:%d with linespoints pt 6 title 'acceptance, γ = %d'", column++,
                    (int)num(c, "gamma"));
    fprintf(g, "\n");
    gnuplot_close(g, dir, "acceptance_vs_temperature.png");
}

static void plot_verify(const json_t *limit, const char *dir) {
    FILE *g = gnuplot_open(dir, "verify_cost.png");
    if (!g) return;
    const json_t *curves = json_object_get(limit, "verify_cost"), *curve, *point;
    const char *name;
    size_t i;
    json_object_foreach((json_t *)curves, name, curve) {
        fprintf(g, "$%s << EOD\n", name);
        json_array_foreach(curve, i, point) {
            double median, min, max;
            range(point, "ratio", &median, &min, &max);
            fprintf(g, "%g %g %g %g\n", num(point, "T"), median, min, max);
        }
        fprintf(g, "EOD\n");
    }
    fprintf(g, "set title 'Cost of verifying: time of one forward over T new tokens / time of one token "
               "(median, bars: min–max)'\nset xlabel 'T (tokens in the forward = γ + 1)'\nset ylabel 'time(T) / "
               "time(1)'\nset xrange [0.5:16.5]\nset yrange [0:*]\nplot 1 with lines lc rgb '#888888' notitle");
    json_object_foreach((json_t *)curves, name, curve)
        fprintf(g, ", $%s using 1:2:3:4 with yerrorlines pt 7 title '%s'", name, name);
    fprintf(g, "\n");
    gnuplot_close(g, dir, "verify_cost.png");
}

void write_plots(const json_t *results, const char *dir) {
    if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
        fprintf(stderr, "run-bench: no plots: gnuplot is not installed (apt-get install gnuplot-nox)\n");
        return;
    }
    const json_t *spec = json_object_get(results, "speculative"), *limit = json_object_get(results, "limit");
    if (spec) plot_speedup(spec, dir), plot_acceptance(spec, dir);
    if (limit) plot_verify(limit, dir);
    fprintf(stderr, "run-bench: plots in %s\n", dir);
}
