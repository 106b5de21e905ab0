/* `sgp topo` as users meet it (real build/sgp processes): parse errors as
 * file:line (exit 1), usage errors as one line (exit 2), help for every
 * subcommand, and what check, gen, mix, show and dot print. (The parser
 * itself: tests/unit/test_topo_parse.c.) */
#include "topologies/topo.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/sgp_run.h"
#include "tests/topo_check.h"

static char g_dir[64];

static void setup(void) { sgp_tmp_dir(g_dir, sizeof g_dir, "/tmp/test_topo_parse_XXXXXX"); }

static void teardown(void) { sgp_rm_rf(g_dir); }

TestSuite(topo_parse, .init = setup, .fini = teardown, .timeout = 120);

static sgp_out o;

static char *tpath(const char *name) { return sgp_path_in(g_dir, name); }

Test(topo_parse, cli_check_prints_file_line_and_exits_1)
{
    char *bad = tpath("bad.topo");
    sgp_write_text(bad, "peers 4\nphase\n0 -> 1\n1 -> 7\n");
    sgp_run(&o, "topo", "check", bad, NULL);
    cr_assert_eq(o.status, 1, "%s", o.err);
    cr_assert_eq(sgp_lines(o.err), 1, "%s", o.err);
    char want[300];
    snprintf(want, sizeof want, "%s:4: peer 7 out of range 0..3\n", bad);
    cr_assert_str_eq(o.err, want);

    char *disc = tpath("disc.topo");
    sgp_write_text(disc, "peers 4\n0 -> 1\n1 -> 0\n2 -> 3\n3 -> 2\n");
    sgp_run(&o, "topo", "mix", disc, NULL);
    cr_assert_eq(o.status, 1);
    snprintf(want, sizeof want, "%s: not strongly connected", disc);
    cr_assert(!strncmp(o.err, want, strlen(want)), "%s", o.err);

    sgp_run(&o, "topo", "show", "/nonexistent/x.topo", NULL);
    cr_assert_eq(o.status, 1);
    cr_assert(strstr(o.err, "/nonexistent/x.topo: No such file"), "%s", o.err);
}

Test(topo_parse, cli_check_describes_a_valid_file)
{
    sgp_run(&o, "topo", "check", "topologies/exp8.topo", NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
    cr_assert(strstr(o.out, "valid"), "%s", o.out);
    cr_assert(strstr(o.out, "3 phases"), "%s", o.out);
    cr_assert(strstr(o.out, "uniform"), "%s", o.out);
    cr_assert(strstr(o.out, "strongly connected"), "%s", o.out);
    cr_assert_null(strstr(o.out, "note"), "8 is a power of two: %s", o.out);
    sgp_run(&o, "topo", "check", "exponential", "--peers", "12", NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
    cr_assert(strstr(o.out, "not a power of two"), "%s", o.out);
}

Test(topo_parse, cli_usage_errors_are_one_line_status_2)
{
    const char *cases[][6] = {
        {"topo", NULL},
        {"topo", "bogus", NULL},
        {"topo", "check", NULL},
        {"topo", "check", "a", "b", NULL},
        {"topo", "check", "--bogus", "x", NULL},
        {"topo", "mix", "topologies/exp8.topo", "--tol", "abc", NULL},
        {"topo", "show", "topologies/exp8.topo", "--dead", "9", NULL},
        {"topo", "gen", "ring", NULL},
        {"topo", "gen", "--peers", "8", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        sgp_run(&o, cases[i][0], cases[i][1], cases[i][2], cases[i][3], cases[i][4], cases[i][5], NULL);
        cr_assert_eq(o.status, 2, "case %zu: status %d: %s", i, o.status, o.err);
        cr_assert_eq(sgp_lines(o.err), 1, "case %zu: %s", i, o.err);
    }
    sgp_run(&o, "topo", "gen", "torus", "--peers", "16", "--rows", "3", NULL);
    cr_assert_eq(o.status, 2, "%s", o.err);
    cr_assert(strstr(o.err, "rows=3 does not divide"), "%s", o.err);
    sgp_run(&o, "topo", "check", "bogus", "--peers", "8", NULL);
    cr_assert_eq(o.status, 2, "%s", o.err);
    cr_assert(strstr(o.err, "unknown generator 'bogus'"), "%s", o.err);
}

Test(topo_parse, cli_every_subcommand_has_help)
{
    const char *subs[] = {"check", "show", "dot", "gen", "mix"};
    sgp_run(&o, "topo", "--help", NULL);
    cr_assert_eq(o.status, 0);
    for (size_t i = 0; i < 5; i++)
        cr_assert(strstr(o.out, subs[i]), "topo --help lacks %s", subs[i]);
    for (size_t i = 0; i < 5; i++) {
        sgp_run(&o, "topo", subs[i], "--help", NULL);
        cr_assert_eq(o.status, 0, "%s --help", subs[i]);
        cr_assert(strstr(o.out, "usage: sgp topo "), "%s", o.out);
    }
    sgp_run(&o, "--help", NULL);
    cr_assert(strstr(o.out, "topo"), "sgp --help lists topo: %s", o.out);
}

Test(topo_parse, cli_gen_writes_a_file_that_checks_and_round_trips)
{
    char *f1 = tpath("t.topo"), *f2 = tpath("t-explicit.topo");
    sgp_run(&o, "topo", "gen", "random", "--peers", "10", "--out", "3", "--seed", "77", "--phases", "2", "-o", f1, NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
    sgp_run(&o, "topo", "gen", "random", "--peers", "10", "out=3", "seed=77", "phases=2", "--explicit", "-o", f2,
            NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
    topo a, b;
    parse_error e;
    cr_assert_eq(topo_load(&a, f1, &e), 0, "%s:%d: %s", e.file, e.line, e.msg);
    cr_assert_eq(topo_load(&b, f2, &e), 0, "%s:%d: %s", e.file, e.line, e.msg);
    cr_assert_str_eq(a.kind, "random out=3 seed=77 phases=2");
    cr_assert_str_eq(b.kind, "explicit");
    assert_same_edges(&a, &b, "gen vs gen --explicit");
    topo_free(&a);
    topo_free(&b);
    sgp_run(&o, "topo", "check", f2, NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
}

Test(topo_parse, cli_mix_show_and_dot)
{
    sgp_run(&o, "topo", "mix", "topologies/exp8.topo", NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
    cr_assert(strstr(o.out, ": 3 rounds to relative error 1e-06"), "%s", o.out);
    sgp_run(&o, "topo", "mix", "topologies/ring8.topo", "--max-rounds", "10", NULL);
    cr_assert_eq(o.status, 1, "ring8 cannot average in 10 rounds: %s", o.out);

    sgp_run(&o, "topo", "show", "topologies/exp8.topo", "--rounds", "4", "--dead", "3", NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
    cr_assert(strstr(o.out, "round 3 (phase 0)"), "%s", o.out);
    cr_assert(strstr(o.out, "  2 -> 4:0.5   keeps 0.5   (routed around dead 3)"), "%s", o.out);
    cr_assert_null(strstr(o.out, "  3 ->"), "a dead peer sends nothing: %s", o.out);

    sgp_run(&o, "topo", "dot", "topologies/exp8.topo", NULL);
    cr_assert_eq(o.status, 0, "%s", o.err);
    cr_assert(!strncmp(o.out, "digraph", 7), "%s", o.out);
    cr_assert(strstr(o.out, "0 -> 4 [label=\"2\"];"), "%s", o.out);
}
