/* sgp topo: check, show, draw, generate and analyse topology files. The
 * point is that a .topo file can be trusted before a run starts: `check`
 * says what the schedule is, `mix` how fast it averages, `show` what routing
 * does when peers die. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peer/cmd/cli.h"
#include "peer/cmd/commands.h"
#include "topologies/topo.h"

#define SPEC_MAX 256

static void help_topo(FILE *out)
{
    fputs("usage: sgp topo SUBCOMMAND [OPTIONS]\n\n"
          "Check, show, draw, generate and analyse topology (.topo) files; the\n"
          "format is documented in topologies/FORMAT.md.\n\n"
          "Subcommands:\n"
          "  check FILE             validate and describe a topology\n"
          "  show FILE              the schedule, round by round (--rounds, --dead)\n"
          "  dot FILE               Graphviz drawing of the union of the phases\n"
          "  gen KIND --peers N     write a generated topology as a .topo file\n"
          "  mix FILE               rounds of pure push-sum averaging to relative error 1e-6\n\n"
          "Wherever a FILE is expected, a generator can be named instead by giving\n"
          "--peers: 'sgp topo check ring --peers 8', 'sgp topo mix random out=2 seed=7 --peers 16'.\n\n"
          "Run 'sgp topo SUBCOMMAND --help' for its options.\n",
          out);
}

static const char SOURCE_HELP[] =
    "FILE is a .topo file. With --peers N it is instead a generator and its\n"
    "parameters, as on a 'generator' line: ring, exponential, n-peer-exponential\n"
    "[out=K], bipartite-exponential, torus [rows=R cols=C], complete, star\n"
    "[center=C], random [out=K seed=S phases=P].\n\n";

/* Positional words joined by spaces: "random out=2 seed=7". */
static int join_words(const char *cmd, int n, char **w, char *buf, size_t cap)
{
    buf[0] = 0;
    for (int i = 0; i < n; i++) {
        size_t len = strlen(buf);
        if (len + strlen(w[i]) + 2 > cap)
            return cli_usage(cmd, "generator specification too long");
        snprintf(buf + len, cap - len, "%s%s", i ? " " : "", w[i]);
    }
    return 0;
}

/* The topology named by the positional arguments: a file, or with --peers a
 * generator. Returns 0, 1 (reported) or CLI_USAGE (reported). */
static int load_source(const char *cmd, int npos, char **pos, long peers, topo *t, char *label, size_t cap)
{
    parse_error e;
    if (npos < 1)
        return cli_usage(cmd, "expected a topology FILE (or a generator name with --peers N)");
    if (peers > 0) {
        char spec[SPEC_MAX];
        if (join_words(cmd, npos, pos, spec, sizeof spec))
            return CLI_USAGE;
        int rc = topo_generate(t, spec, (int)peers, NULL, &e);
        if (rc == -EINVAL)
            return cli_usage(cmd, "%s", e.msg);
        if (rc < 0) {
            fprintf(stderr, "%s: %s\n", cmd, e.msg);
            return 1;
        }
        snprintf(label, cap, "%s on %ld peer%s", t->kind, peers, peers == 1 ? "" : "s");
        return 0;
    }
    if (npos > 1)
        return cli_usage(cmd, "unexpected argument '%s'", pos[1]);
    int rc = topo_load(t, pos[0], &e);
    if (rc < 0) {
        if (rc == -ENOENT && !strchr(pos[0], '/') && !strchr(pos[0], '.'))
            fprintf(stderr, "%s: %s (to use a generator, give --peers N)\n", pos[0], e.msg);
        else {
            char err[600];
            fprintf(stderr, "%s\n", parse_error_text(&e, err, sizeof err));
        }
        return 1;
    }
    snprintf(label, cap, "%s", pos[0]);
    return 0;
}

/* Shared option loop: -h, --peers and the caller's own options. Returns -1 to
 * continue into the command, else the exit status. */
typedef int (*opt_fn)(const char *cmd, int c, const char *arg, void *ctx);

static int parse_opts(const char *cmd, int argc, char **argv, const char *shorts, const struct option *longs,
                      void (*help)(void), long *peers, opt_fn fn, void *ctx)
{
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, shorts, longs, NULL)) != -1) {
        if (c == 'h') {
            help();
            return 0;
        }
        if (c == '?' || c == ':')
            return cli_getopt_error(cmd, c, argv);
        if (c == 'n') {
            if (cli_long(cmd, "--peers", optarg, 1, TOPO_MAX_PEERS, peers))
                return CLI_USAGE;
            continue;
        }
        int rc = fn ? fn(cmd, c, optarg, ctx) : cli_usage(cmd, "unknown option '%s'", argv[optind - 1]);
        if (rc)
            return rc;
    }
    return -1;
}

/* ---- check ------------------------------------------------------------------ */

static void help_check(void)
{
    fputs("usage: sgp topo check FILE [--peers N]\n\n"
          "Validate a topology and describe it: peers, phases, edges per round, degrees,\n"
          "mixing weights, connectivity. Exit status 0 when valid; otherwise 1 with\n"
          "'file:line: message' on stderr.\n\n",
          stdout);
    fputs(SOURCE_HELP, stdout);
    fputs("Options:\n"
          "  -n, --peers N       FILE names a generator for N peers\n"
          "  -h, --help          this text\n",
          stdout);
}

static const struct option SOURCE_LONG[] = {
    {"peers", required_argument, 0, 'n'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};

static void degree_range(const topo *t, int in, int *lo, int *hi)
{
    const size_t stride = (size_t)t->n_peers + 1;
    *lo = 1 << 30, *hi = 0;
    for (int p = 0; p < t->n_phases; p++)
        for (int i = 0; i < t->n_peers; i++) {
            int d;
            if (in) {
                const size_t *at = t->in_at + (size_t)p * stride;
                d = (int)(at[i + 1] - at[i]);
            } else {
                const size_t *at = t->out_at + (size_t)p * stride;
                d = 0;
                for (size_t k = at[i]; k < at[i + 1]; k++)
                    d += t->edges[k].dst != i;
            }
            if (d < *lo)
                *lo = d;
            if (d > *hi)
                *hi = d;
        }
}

static void describe(const topo *t, const char *label)
{
    printf("%s: valid\n", label);
    printf("  peers         %d\n", t->n_peers);
    if (strcmp(t->kind, "explicit"))
        printf("  schedule      generator %s, %d phase%s", t->kind, t->n_phases, t->n_phases == 1 ? "" : "s");
    else
        printf("  schedule      explicit, %d phase%s", t->n_phases, t->n_phases == 1 ? "" : "s");
    printf(t->n_phases == 1 ? " (static)\n" : " (round r uses phase r mod %d)\n", t->n_phases);

    size_t emin = (size_t)-1, emax = 0;
    for (int p = 0; p < t->n_phases; p++) {
        size_t c = 0;
        for (size_t k = t->phase_at[p]; k < t->phase_at[p + 1]; k++)
            c += t->edges[k].src != t->edges[k].dst;
        emin = c < emin ? c : emin;
        emax = c > emax ? c : emax;
    }
    if (emin == emax)
        printf("  edges/round   %zu messages\n", emin);
    else
        printf("  edges/round   %zu..%zu messages\n", emin, emax);
    int lo, hi;
    degree_range(t, 0, &lo, &hi);
    printf(lo == hi ? "  out-degree    %d per round" : "  out-degree    %d..%d per round", lo, hi);
    printf(" (the kept share not counted)\n");
    degree_range(t, 1, &lo, &hi);
    printf(lo == hi ? "  in-degree     %d per round\n" : "  in-degree     %d..%d per round\n", lo, hi);
    if (t->weighted)
        printf("  mixing        explicit weights (each sender's shares, its kept share included, sum to 1)\n");
    else
        printf("  mixing        uniform (a peer with d out-neighbours keeps 1/(d+1) and sends 1/(d+1) on each)\n");
    printf("  connectivity  strongly connected over one period\n");
    char note[300];
    if (topo_note(t, note, sizeof note))
        printf("  note: %s\n", note);
}

static int topo_check(int argc, char **argv)
{
    const char *cmd = "sgp topo check";
    long peers = 0;
    int rc = parse_opts(cmd, argc, argv, ":hn:", SOURCE_LONG, help_check, &peers, NULL, NULL);
    if (rc >= 0)
        return rc;
    topo t = {0};
    char label[320];
    if ((rc = load_source(cmd, argc - optind, argv + optind, peers, &t, label, sizeof label)))
        return rc;
    describe(&t, label);
    topo_free(&t);
    return 0;
}

/* ---- show ------------------------------------------------------------------- */

static void help_show(void)
{
    fputs("usage: sgp topo show FILE [--rounds R] [--dead LIST] [--peers N]\n\n"
          "Print the schedule round by round: every sender's targets with the share each\n"
          "gets, and the share it keeps. With --dead, targets are routed around the dead\n"
          "peers as the peer does at run time (the rule is in topologies/FORMAT.md).\n\n",
          stdout);
    fputs(SOURCE_HELP, stdout);
    fputs("Options:\n"
          "  -r, --rounds R      rounds to print, from round 0 (default: one period)\n"
          "  -d, --dead LIST     peers believed dead, comma-separated (e.g. 3,5)\n"
          "  -n, --peers N       FILE names a generator for N peers\n"
          "  -h, --help          this text\n",
          stdout);
}

typedef struct show_opts {
    long rounds;
    const char *dead;
} show_opts;

static int show_opt(const char *cmd, int c, const char *arg, void *ctx)
{
    show_opts *o = ctx;
    if (c == 'r')
        return cli_long(cmd, "--rounds", arg, 1, 100000, &o->rounds);
    if (c == 'd') {
        o->dead = arg;
        return 0;
    }
    return cli_usage(cmd, "unknown option");
}

static int parse_dead(const char *cmd, const char *list, int n, uint8_t *alive)
{
    char buf[32];
    for (const char *s = list; *s;) {
        size_t len = strcspn(s, ",");
        if (len == 0 || len >= sizeof buf)
            return cli_usage(cmd, "--dead expects peer ids separated by commas, got '%s'", list);
        memcpy(buf, s, len);
        buf[len] = 0;
        long id;
        if (cli_long(cmd, "--dead", buf, 0, n - 1, &id))
            return CLI_USAGE;
        alive[id] = 0;
        s += len + (s[len] == ',');
    }
    return 0;
}

static void show(const topo *t, const char *label, long rounds, const uint8_t *alive)
{
    printf("%s: %d peers, %d phase%s, %s mixing\n", label, t->n_peers, t->n_phases, t->n_phases == 1 ? "" : "s",
           t->weighted ? "explicit" : "uniform");
    if (alive) {
        printf("dead:");
        for (int i = 0; i < t->n_peers; i++)
            if (!alive[i])
                printf(" %d", i);
        printf("\n");
    }
    for (long r = 0; r < rounds; r++) {
        int p = (int)(r % t->n_phases);
        printf("round %ld (phase %d)\n", r, p);
        const size_t *at = t->out_at + (size_t)p * ((size_t)t->n_peers + 1);
        for (int i = 0; i < t->n_peers; i++) {
            if (alive && !alive[i])
                continue;
            topo_out o;
            topo_route(t, r, i, alive, &o);
            if (o.n == 0 && at[i] == at[i + 1])
                continue; /* sends nothing, keeps everything, as scheduled */
            printf("  %d ->", i);
            for (int k = 0; k < o.n; k++) {
                char w[40];
                topo_format_weight(o.weight[k], w, sizeof w);
                printf(" %d:%s", o.peer[k], w);
            }
            char keep[40];
            topo_format_weight(o.keep, keep, sizeof keep);
            printf("   keeps %s", keep);
            /* Name the dead targets this sender was routed around; the
             * replacement takes the dead target's place in the list. */
            int any = 0;
            for (size_t j = at[i]; alive && j < at[i + 1]; j++)
                if (t->edges[j].dst != i && !alive[t->edges[j].dst])
                    printf(any++ ? ",%d" : "   (routed around dead %d", t->edges[j].dst);
            printf(any ? ")\n" : "\n");
        }
    }
}

static int topo_show(int argc, char **argv)
{
    const char *cmd = "sgp topo show";
    static const struct option longs[] = {{"rounds", required_argument, 0, 'r'},
                                          {"dead", required_argument, 0, 'd'},
                                          {"peers", required_argument, 0, 'n'},
                                          {"help", no_argument, 0, 'h'},
                                          {0, 0, 0, 0}};
    long peers = 0;
    show_opts o = {0};
    int rc = parse_opts(cmd, argc, argv, ":hn:r:d:", longs, help_show, &peers, show_opt, &o);
    if (rc >= 0)
        return rc;
    topo t = {0};
    char label[320];
    if ((rc = load_source(cmd, argc - optind, argv + optind, peers, &t, label, sizeof label)))
        return rc;
    uint8_t *alive = NULL;
    if (o.dead) {
        alive = malloc((size_t)t.n_peers);
        if (!alive) {
            fprintf(stderr, "%s: out of memory\n", cmd);
            topo_free(&t);
            return 1;
        }
        memset(alive, 1, (size_t)t.n_peers);
        if ((rc = parse_dead(cmd, o.dead, t.n_peers, alive))) {
            free(alive);
            topo_free(&t);
            return rc;
        }
    }
    show(&t, label, o.rounds ? o.rounds : t.n_phases, alive);
    free(alive);
    topo_free(&t);
    return 0;
}

/* ---- dot -------------------------------------------------------------------- */

static void help_dot(void)
{
    fputs("usage: sgp topo dot FILE [-o OUT] [--peers N]\n\n"
          "Write the union of the phases as a Graphviz digraph; with several phases each\n"
          "edge is labelled with the phases it is active in (and with its weights when\n"
          "the file gives them). Render with e.g. 'dot -Tsvg OUT > graph.svg'.\n\n",
          stdout);
    fputs(SOURCE_HELP, stdout);
    fputs("Options:\n"
          "  -o, --output OUT    write to OUT instead of stdout\n"
          "  -n, --peers N       FILE names a generator for N peers\n"
          "  -h, --help          this text\n",
          stdout);
}

static int output_opt(const char *cmd, int c, const char *arg, void *ctx)
{
    if (c == 'o') {
        *(const char **)ctx = arg;
        return 0;
    }
    return cli_usage(cmd, "unknown option");
}

/* Runs write() on stdout or on the named file; exit status. */
static int write_out(const char *cmd, const char *path, const topo *t, const char *comment, int dot)
{
    FILE *f = path ? fopen(path, "w") : stdout;
    if (!f) {
        fprintf(stderr, "%s: %s: %s\n", cmd, path, strerror(errno));
        return 1;
    }
    int rc = dot ? topo_write_dot(t, f) : topo_write(t, f, comment);
    if (path && fclose(f) != 0 && rc == 0)
        rc = -EIO;
    if (rc < 0) {
        fprintf(stderr, "%s: %s: %s\n", cmd, path ? path : "stdout", strerror(-rc));
        return 1;
    }
    return 0;
}

static int topo_dot(int argc, char **argv)
{
    const char *cmd = "sgp topo dot";
    static const struct option longs[] = {{"output", required_argument, 0, 'o'},
                                          {"peers", required_argument, 0, 'n'},
                                          {"help", no_argument, 0, 'h'},
                                          {0, 0, 0, 0}};
    long peers = 0;
    const char *out = NULL;
    int rc = parse_opts(cmd, argc, argv, ":hn:o:", longs, help_dot, &peers, output_opt, &out);
    if (rc >= 0)
        return rc;
    topo t = {0};
    char label[320];
    if ((rc = load_source(cmd, argc - optind, argv + optind, peers, &t, label, sizeof label)))
        return rc;
    rc = write_out(cmd, out, &t, NULL, 1);
    topo_free(&t);
    return rc;
}

/* ---- gen -------------------------------------------------------------------- */

static void help_gen(void)
{
    fputs("usage: sgp topo gen KIND --peers N [OPTIONS] [key=value ...]\n\n"
          "Write a generated topology as a .topo file (a 'generator' line, or with\n"
          "--explicit every phase's edges, as a starting point for editing by hand).\n\n"
          "Kinds (definitions in topologies/FORMAT.md):\n"
          "  ring                     i -> i+1\n"
          "  exponential              i -> i + 2^(r mod log2 n): the default, exact in log2 n rounds\n"
          "  n-peer-exponential       --out K targets per round from the exponential offsets\n"
          "  bipartite-exponential    odd offsets 1, 3, 5, 9, 17, ...: even peers send to odd and back\n"
          "  torus                    --rows R --cols C: right and down neighbours\n"
          "  complete                 everybody to everybody (at most 65 peers)\n"
          "  star                     --center C: the center to every leaf and back (at most 65 peers)\n"
          "  random                   --out K --seed S --phases P: K random targets per round\n\n"
          "Options:\n"
          "  -n, --peers N       number of peers (required)\n"
          "      --out K         out-neighbours per round (n-peer-exponential, random)\n"
          "      --rows R        torus rows\n"
          "      --cols C        torus columns\n"
          "      --center C      star center\n"
          "      --seed S        random seed\n"
          "      --phases P      random: phases before the schedule repeats\n"
          "      --explicit      write the phases edge by edge instead of the generator line\n"
          "  -o, --output FILE   write to FILE instead of stdout\n"
          "  -h, --help          this text\n",
          stdout);
}

typedef struct gen_opts {
    char params[SPEC_MAX];
    const char *out;
    int explicit_;
} gen_opts;

static int gen_opt(const char *cmd, int c, const char *arg, void *ctx)
{
    gen_opts *o = ctx;
    static const char *const keys[] = {"out", "rows", "cols", "center", "seed", "phases"};
    if (c == 'o') {
        o->out = arg;
        return 0;
    }
    if (c == 'x') {
        o->explicit_ = 1;
        return 0;
    }
    if (c >= 1 && c <= 6) {
        char opt[16];
        snprintf(opt, sizeof opt, "--%s", keys[c - 1]);
        if (c == 5) {
            uint64_t v;
            if (cli_u64(cmd, opt, arg, &v))
                return CLI_USAGE;
        } else {
            long v;
            if (cli_long(cmd, opt, arg, 0, TOPO_MAX_PEERS, &v))
                return CLI_USAGE;
        }
        size_t len = strlen(o->params);
        snprintf(o->params + len, sizeof o->params - len, " %s=%s", keys[c - 1], arg);
        return 0;
    }
    return cli_usage(cmd, "unknown option");
}

static int topo_gen(int argc, char **argv)
{
    const char *cmd = "sgp topo gen";
    static const struct option longs[] = {{"peers", required_argument, 0, 'n'},
                                          {"out", required_argument, 0, 1},
                                          {"rows", required_argument, 0, 2},
                                          {"cols", required_argument, 0, 3},
                                          {"center", required_argument, 0, 4},
                                          {"seed", required_argument, 0, 5},
                                          {"phases", required_argument, 0, 6},
                                          {"explicit", no_argument, 0, 'x'},
                                          {"output", required_argument, 0, 'o'},
                                          {"help", no_argument, 0, 'h'},
                                          {0, 0, 0, 0}};
    long peers = 0;
    gen_opts o;
    memset(&o, 0, sizeof o);
    int rc = parse_opts(cmd, argc, argv, ":hn:o:", longs, help_gen, &peers, gen_opt, &o);
    if (rc >= 0)
        return rc;
    if (optind >= argc)
        return cli_usage(cmd, "expected a generator KIND (ring, exponential, torus, ...)");
    if (!peers)
        return cli_usage(cmd, "--peers N is required");
    char spec[2 * SPEC_MAX];
    if (join_words(cmd, argc - optind, argv + optind, spec, SPEC_MAX))
        return CLI_USAGE;
    size_t len = strlen(spec);
    snprintf(spec + len, sizeof spec - len, "%s", o.params);
    topo t = {0};
    parse_error e;
    rc = topo_generate(&t, spec, (int)peers, NULL, &e);
    if (rc == -EINVAL)
        return cli_usage(cmd, "%s", e.msg);
    if (rc < 0) {
        fprintf(stderr, "%s: %s\n", cmd, e.msg);
        return 1;
    }
    char comment[600], note[300];
    int nl = snprintf(comment, sizeof comment, "%s on %ld peer%s, written by 'sgp topo gen'.", t.kind, peers,
                      peers == 1 ? "" : "s");
    if (topo_note(&t, note, sizeof note))
        snprintf(comment + nl, sizeof comment - (size_t)nl, "\nNote: %s.", note);
    if (o.explicit_)
        snprintf(t.kind, sizeof t.kind, "explicit");
    rc = write_out(cmd, o.out, &t, comment, 0);
    topo_free(&t);
    return rc;
}

/* ---- mix -------------------------------------------------------------------- */

static void help_mix(void)
{
    fputs("usage: sgp topo mix FILE [OPTIONS]\n\n"
          "Simulate pure push-sum averaging on the schedule (no gradients, all peers\n"
          "alive, every round synchronous) from random starting vectors and report how\n"
          "many rounds it takes until every peer's estimate x/w is within the relative\n"
          "error --tol of the true average: max_i ||x_i/w_i - avg|| / ||avg||.\n\n",
          stdout);
    fputs(SOURCE_HELP, stdout);
    fputs("Options:\n"
          "  -t, --tol T         relative error to reach (default 1e-6)\n"
          "      --dim D         dimension of the vectors (default 16)\n"
          "  -s, --seed S        seed of the first random start (default 1)\n"
          "      --trials K      random starts, seeds S .. S+K-1; the worst is reported (default 5)\n"
          "      --max-rounds N  give up after N rounds (default 100000)\n"
          "  -n, --peers N       FILE names a generator for N peers\n"
          "  -h, --help          this text\n",
          stdout);
}

typedef struct mix_opts {
    double tol;
    long dim, trials, max_rounds;
    uint64_t seed;
} mix_opts;

static int mix_opt(const char *cmd, int c, const char *arg, void *ctx)
{
    mix_opts *o = ctx;
    switch (c) {
    case 't':
        return cli_double(cmd, "--tol", arg, 1e-15, 0.5, &o->tol);
    case 1:
        return cli_long(cmd, "--dim", arg, 1, 4096, &o->dim);
    case 's':
        return cli_u64(cmd, "--seed", arg, &o->seed);
    case 2:
        return cli_long(cmd, "--trials", arg, 1, 1000, &o->trials);
    case 3:
        return cli_long(cmd, "--max-rounds", arg, 1, 100000000, &o->max_rounds);
    }
    return cli_usage(cmd, "unknown option");
}

static int topo_mix(int argc, char **argv)
{
    const char *cmd = "sgp topo mix";
    static const struct option longs[] = {{"tol", required_argument, 0, 't'},
                                          {"dim", required_argument, 0, 1},
                                          {"seed", required_argument, 0, 's'},
                                          {"trials", required_argument, 0, 2},
                                          {"max-rounds", required_argument, 0, 3},
                                          {"peers", required_argument, 0, 'n'},
                                          {"help", no_argument, 0, 'h'},
                                          {0, 0, 0, 0}};
    long peers = 0;
    mix_opts o = {1e-6, 16, 5, 100000, 1};
    int rc = parse_opts(cmd, argc, argv, ":hn:t:s:", longs, help_mix, &peers, mix_opt, &o);
    if (rc >= 0)
        return rc;
    topo t = {0};
    char label[320];
    if ((rc = load_source(cmd, argc - optind, argv + optind, peers, &t, label, sizeof label)))
        return rc;
    long best = -1, worst = -1;
    for (long k = 0; k < o.trials; k++) {
        long r;
        int mrc = topo_mix_rounds(&t, (int)o.dim, o.seed + (uint64_t)k, o.tol, o.max_rounds, &r);
        if (mrc == -ETIMEDOUT) {
            fprintf(stderr, "%s: %s: relative error %g not reached within %ld rounds (seed %llu)\n", cmd, label,
                    o.tol, o.max_rounds, (unsigned long long)(o.seed + (uint64_t)k));
            topo_free(&t);
            return 1;
        }
        if (mrc < 0) {
            fprintf(stderr, "%s: %s: %s\n", cmd, label, strerror(-mrc));
            topo_free(&t);
            return 1;
        }
        best = best < 0 || r < best ? r : best;
        worst = r > worst ? r : worst;
    }
    printf("%s: %ld round%s to relative error %g", label, worst, worst == 1 ? "" : "s", o.tol);
    if (o.trials > 1)
        printf(" (worst of %ld random starts of dimension %ld; best %ld)\n", o.trials, o.dim, best);
    else
        printf(" (one random start of dimension %ld)\n", o.dim);
    char note[300];
    if (topo_note(&t, note, sizeof note))
        printf("note: %s\n", note);
    topo_free(&t);
    return 0;
}

/* ---- dispatch --------------------------------------------------------------- */

int cmd_topo(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*run)(int, char **);
    } subs[] = {{"check", topo_check}, {"show", topo_show}, {"dot", topo_dot}, {"gen", topo_gen}, {"mix", topo_mix}};
    if (argc < 2)
        return cli_usage("sgp topo", "expected a subcommand: check, show, dot, gen or mix");
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        help_topo(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof subs / sizeof *subs; i++)
        if (!strcmp(argv[1], subs[i].name))
            return subs[i].run(argc - 1, argv + 1);
    return cli_usage("sgp topo", "unknown subcommand '%s' (expected check, show, dot, gen or mix)", argv[1]);
}
