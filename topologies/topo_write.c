/* Writing a topology back out: as a .topo file that parses to the same edges
 * (weights included, bit for bit), and as Graphviz. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topologies/topo_impl.h"

void topo_format_weight(double w, char *buf, size_t cap)
{
    /* A short decimal when one reads back exactly (0.5, 0.25, 0.1)... */
    for (int prec = 1; prec <= 6; prec++) {
        snprintf(buf, cap, "%.*g", prec, w);
        if (strtod(buf, NULL) == w)
            return;
    }
    /* ...else a small fraction, which is what hand-made weights usually
     * are (1/3), and which the parser evaluates as the same division... */
    for (int q = 2; q <= 1000; q++) {
        double p = nearbyint(w * q);
        if (p >= 1 && p < q && p / q == w) {
            snprintf(buf, cap, "%.0f/%d", p, q);
            return;
        }
    }
    /* ...else enough digits to round-trip any double. */
    snprintf(buf, cap, "%.17g", w);
}

static void write_comment(FILE *f, const char *comment)
{
    while (comment && *comment) {
        size_t len = strcspn(comment, "\n");
        fprintf(f, "#%s%.*s\n", len ? " " : "", (int)len, comment);
        comment += len + (comment[len] == '\n');
    }
}

int topo_write(const topo *t, FILE *f, const char *comment)
{
    if (!t || !f || t->n_phases < 1 || !t->phase_at)
        return -EINVAL;
    write_comment(f, comment);
    fprintf(f, "peers %d\n", t->n_peers);
    if (strcmp(t->kind, "explicit") && t->kind[0]) {
        fprintf(f, "generator %s\n", t->kind);
    } else {
        for (int p = 0; p < t->n_phases; p++) {
            fprintf(f, "\nphase %d\n", p);
            size_t b = t->phase_at[p + 1];
            for (size_t k = t->phase_at[p]; k < b;) {
                int src = t->edges[k].src;
                fprintf(f, "%d ->", src);
                for (; k < b && t->edges[k].src == src; k++) {
                    fprintf(f, " %d", t->edges[k].dst);
                    if (t->weighted) {
                        char w[40];
                        topo_format_weight(t->edges[k].weight, w, sizeof w);
                        fprintf(f, ":%s", w);
                    }
                }
                fputc('\n', f);
            }
        }
    }
    fflush(f);
    return ferror(f) ? -EIO : 0;
}

typedef struct dot_edge {
    int src, dst, phase;
    double weight;
} dot_edge;

static int cmp_dot(const void *a, const void *b)
{
    const dot_edge *x = a, *y = b;
    if (x->src != y->src)
        return x->src < y->src ? -1 : 1;
    if (x->dst != y->dst)
        return x->dst < y->dst ? -1 : 1;
    return (x->phase > y->phase) - (x->phase < y->phase);
}

int topo_write_dot(const topo *t, FILE *f)
{
    if (!t || !f || t->n_phases < 1 || !t->phase_at)
        return -EINVAL;
    size_t m = t->phase_at[t->n_phases], c = 0;
    dot_edge *d = malloc((m ? m : 1) * sizeof *d);
    if (!d)
        return -ENOMEM;
    for (int p = 0; p < t->n_phases; p++)
        for (size_t k = t->phase_at[p]; k < t->phase_at[p + 1]; k++)
            if (t->edges[k].src != t->edges[k].dst) /* kept shares are not messages */
                d[c++] = (dot_edge){t->edges[k].src, t->edges[k].dst, p, t->edges[k].weight};
    qsort(d, c, sizeof *d, cmp_dot);

    fprintf(f, "digraph topo {\n");
    fprintf(f, "  label=\"%s: %d peers, %d phase%s (round r uses phase r mod %d)%s\";\n", t->kind, t->n_peers,
            t->n_phases, t->n_phases == 1 ? "" : "s", t->n_phases,
            t->n_phases > 1 ? "; edges are labelled with their phases" : "");
    fprintf(f, "  node [shape=circle];\n");
    for (int i = 0; i < t->n_peers; i++)
        fprintf(f, "  %d;\n", i);
    for (size_t a = 0, b; a < c; a = b) {
        for (b = a; b < c && d[b].src == d[a].src && d[b].dst == d[a].dst; b++)
            ;
        fprintf(f, "  %d -> %d", d[a].src, d[a].dst);
        if (t->n_phases > 1 || t->weighted) {
            fputs(" [label=\"", f);
            for (size_t k = a; k < b; k++) {
                if (k > a)
                    fputc(',', f);
                if (t->n_phases > 1)
                    fprintf(f, "%d", d[k].phase);
                if (t->weighted) {
                    char w[40];
                    topo_format_weight(d[k].weight, w, sizeof w);
                    fprintf(f, "%s%s", t->n_phases > 1 ? "=" : "", w);
                }
            }
            fputs("\"]", f);
        }
        fputs(";\n", f);
    }
    fputs("}\n", f);
    free(d);
    fflush(f);
    return ferror(f) ? -EIO : 0;
}
