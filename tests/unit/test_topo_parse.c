/* The .topo parser: every example file loads; every rule of
 * topologies/FORMAT.md ("Validation") fails with the documented line;
 * write-then-parse gives the same edges bit for bit. (`sgp topo`, which
 * reports what the parser finds: tests/process/test_topo_parse.c.) */
#include "topologies/topo.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/topo_check.h"

TestSuite(topo_parse, .timeout = 120);

/* ---- helpers --------------------------------------------------------------- */

static int parse(topo *t, const char *text, parse_error *e) { return topo_parse(t, text, strlen(text), "t.topo", e); }

static void expect_error(const char *text, int line, const char *needle)
{
    topo t;
    parse_error e;
    memset(&t, 0x5a, sizeof t); /* parse must not trust what was there */
    int rc = parse(&t, text, &e);
    cr_assert_eq(rc, -EBADMSG, "rc %d for:\n%s\nmsg: %s", rc, text, e.msg);
    cr_assert_str_eq(e.file, "t.topo");
    cr_assert_eq(e.line, line, "line %d, expected %d: %s\n---\n%s", e.line, line, e.msg, text);
    cr_assert(strstr(e.msg, needle), "expected '%s' in: %s", needle, e.msg);
    cr_assert_null(t.edges, "a failed parse leaves t zeroed");
    cr_assert_eq(t.n_peers, 0);
    topo_free(&t);
}

static void expect_ok(topo *t, const char *text)
{
    parse_error e;
    int rc = parse(t, text, &e);
    cr_assert_eq(rc, 0, "%s:%d: %s\n---\n%s", e.file, e.line, e.msg, text);
}

/* topo_write into memory, then topo_parse that text. */
static void round_trip(const topo *a, const char *what)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_not_null(f);
    cr_assert_eq(topo_write(a, f, "round trip\nsecond comment line"), 0);
    fclose(f);
    topo b;
    parse_error e;
    int rc = topo_parse(&b, buf, len, what, &e);
    cr_assert_eq(rc, 0, "%s:%d: %s\n---\n%s", e.file, e.line, e.msg, buf);
    assert_same_edges(a, &b, what);
    cr_assert_str_eq(a->kind, b.kind, "%s", what);
    free(buf);
    topo_free(&b);
}

/* ---- the example files ------------------------------------------------------- */

Test(topo_parse, every_example_file_loads_and_validates)
{
    static const struct {
        const char *name;
        int peers, phases;
    } want[] = {{"ring8", 8, 1},          {"exp4", 4, 2},     {"exp8", 8, 3},       {"exp16", 16, 4},
                {"exp32", 32, 5},         {"npeer-exp16", 16, 4}, {"torus16", 16, 1}, {"complete4", 4, 1},
                {"racks8", 8, 3}};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        char path[128];
        snprintf(path, sizeof path, "topologies/%s.topo", want[i].name);
        topo t;
        parse_error e;
        int rc = topo_load(&t, path, &e);
        cr_assert_eq(rc, 0, "%s:%d: %s", e.file, e.line, e.msg);
        cr_assert_eq(t.n_peers, want[i].peers, "%s", path);
        cr_assert_eq(t.n_phases, want[i].phases, "%s", path);
        cr_assert_eq(topo_validate(&t, &e), 0, "%s: %s", path, e.msg);
        topo_free(&t);
    }
    /* and any other .topo that appears later must load too */
    glob_t g;
    cr_assert_eq(glob("topologies/*.topo", 0, NULL, &g), 0);
    cr_assert_geq(g.gl_pathc, sizeof want / sizeof *want);
    for (size_t i = 0; i < g.gl_pathc; i++) {
        topo t;
        parse_error e;
        cr_assert_eq(topo_load(&t, g.gl_pathv[i], &e), 0, "%s:%d: %s", e.file, e.line, e.msg);
        topo_free(&t);
    }
    globfree(&g);
}

Test(topo_parse, example_files_begin_with_a_when_to_use_comment)
{
    glob_t g;
    cr_assert_eq(glob("topologies/*.topo", 0, NULL, &g), 0);
    for (size_t i = 0; i < g.gl_pathc; i++) {
        FILE *f = fopen(g.gl_pathv[i], "r");
        cr_assert_not_null(f);
        char text[4096];
        size_t n = fread(text, 1, sizeof text - 1, f);
        text[n] = 0;
        fclose(f);
        cr_assert_eq(text[0], '#', "%s must open with a comment", g.gl_pathv[i]);
        cr_assert(strstr(text, "When to use"), "%s: no 'When to use' in the header comment", g.gl_pathv[i]);
    }
    globfree(&g);
}

Test(topo_parse, racks8_is_explicit_weighted_and_sums_to_one)
{
    topo t;
    parse_error e;
    cr_assert_eq(topo_load(&t, "topologies/racks8.topo", &e), 0, "%s:%d: %s", e.file, e.line, e.msg);
    cr_assert(t.weighted);
    cr_assert_str_eq(t.kind, "explicit");
    cr_assert_eq(n_edges(&t), 3 * 16, "8 self-edges and 8 swaps per phase");
    for (long r = 0; r < 3; r++)
        for (int i = 0; i < 8; i++) {
            topo_out o;
            topo_route(&t, r, i, NULL, &o);
            cr_assert_eq(o.n, 1);
            cr_assert_eq(o.keep, 0.5);
            cr_assert_eq(o.peer[0], i ^ (1 << r), "round %ld peer %d", r, i);
        }
    topo_free(&t);
}

/* ---- syntax that must be accepted -------------------------------------------- */

Test(topo_parse, static_graph_needs_no_phase_line)
{
    topo t;
    expect_ok(&t, "peers 3\n0 -> 1\n1 -> 2\n2 -> 0\n");
    cr_assert_eq(t.n_phases, 1);
    cr_assert_eq(n_edges(&t), 3);
    cr_assert_not(t.weighted);
    cr_assert_str_eq(t.kind, "explicit");
    cr_assert_lt(t.edges[0].weight, 0, "uniform edges carry weight < 0");
    topo_free(&t);
}

Test(topo_parse, edges_before_the_first_phase_line_are_phase_0)
{
    topo t;
    expect_ok(&t, "peers 2\n0 -> 1\nphase\n1 -> 0\n");
    cr_assert_eq(t.n_phases, 2);
    cr_assert_eq(t.phase_at[1], 1);
    cr_assert_eq(t.edges[0].src, 0);
    cr_assert_eq(t.edges[1].src, 1);
    topo_free(&t);
}

Test(topo_parse, lenient_spacing_commas_crlf_tabs_and_comments)
{
    topo a, b;
    expect_ok(&a, "# header\npeers 4 # four\nphase 0\n0 -> 1 2\n1->2,3\n\t2  ->  3\r\n3 -> 0   # back\n");
    expect_ok(&b, "peers 4\n0 -> 1\n0 -> 2\n1 -> 2\n1 -> 3\n2 -> 3\n3 -> 0\n");
    assert_same_edges(&a, &b, "spacing");
    topo_free(&a);
    topo_free(&b);
}

Test(topo_parse, a_sender_may_span_lines_and_edges_are_sorted)
{
    topo t;
    expect_ok(&t, "peers 4\n3 -> 0\n0 -> 3\n0 -> 1\n1 -> 2\n2 -> 3\n");
    int want[][2] = {{0, 1}, {0, 3}, {1, 2}, {2, 3}, {3, 0}};
    for (int k = 0; k < 5; k++) {
        cr_assert_eq(t.edges[k].src, want[k][0]);
        cr_assert_eq(t.edges[k].dst, want[k][1]);
    }
    topo_free(&t);
}

Test(topo_parse, fractions_are_exact_and_near_one_sums_are_rescaled)
{
    topo t;
    expect_ok(&t, "peers 2\n0 -> 0:1/3 1:2/3\n1 -> 1:0.3333333 0:0.6666666\n");
    cr_assert(t.weighted);
    cr_assert_eq(t.edges[0].weight, 1.0 / 3);
    cr_assert_eq(t.edges[1].weight, 2.0 / 3);
    /* 0.9999999 is within 1e-6 of 1, so accepted, then rescaled: no mass leaks */
    double s = t.edges[2].weight + t.edges[3].weight;
    cr_assert_lt(fabs(s - 1), 1e-15, "sum %.17g", s);
    cr_assert_neq(t.edges[3].weight, 0.3333333);
    topo_free(&t);
}

Test(topo_parse, empty_phases_are_allowed)
{
    topo t;
    expect_ok(&t, "peers 2\nphase\n0 -> 1\n1 -> 0\nphase\nphase 2\n");
    cr_assert_eq(t.n_phases, 3);
    topo_out o;
    topo_route(&t, 1, 0, NULL, &o);
    cr_assert_eq(o.n, 0);
    cr_assert_eq(o.keep, 1);
    topo_free(&t);
    /* with explicit weights too: a peer without edges in a phase keeps all */
    expect_ok(&t, "peers 2\nphase\n0 -> 0:0.5 1:0.5\n1 -> 1:0.5 0:0.5\nphase\n0 -> 0:0.5 1:0.5\n");
    topo_route(&t, 1, 1, NULL, &o);
    cr_assert_eq(o.n, 0);
    cr_assert_eq(o.keep, 1, "peer 1 has no edge in phase 1: keep %g", o.keep);
    long r;
    cr_assert_eq(topo_mix_rounds(&t, 4, 1, 1e-6, 1000, &r), 0, "mass is conserved, so it converges");
    topo_free(&t);
}

Test(topo_parse, generator_line_matches_topo_generate)
{
    topo a, b;
    expect_ok(&a, "peers 16\ngenerator random out=3 seed=42 phases=2   # comment\n");
    parse_error e;
    cr_assert_eq(topo_generate(&b, "random", 16, "out=3 seed=42 phases=2", &e), 0, "%s", e.msg);
    assert_same_edges(&a, &b, "random");
    cr_assert_str_eq(a.kind, "random out=3 seed=42 phases=2");
    topo_free(&a);
    topo_free(&b);
}

Test(topo_parse, single_peer)
{
    topo t;
    expect_ok(&t, "peers 1\ngenerator exponential\n");
    cr_assert_eq(n_edges(&t), 0);
    topo_free(&t);
    expect_ok(&t, "peers 1\nphase\n");
    topo_free(&t);
}

/* ---- errors, each with its line ------------------------------------------------- */

Test(topo_parse, unknown_keyword)
{
    expect_error("peers 4\ngenerator ring\npeer 3\n", 3, "unknown keyword 'peer'");
    expect_error("peers 4\n\n\nPhase\n", 4, "unknown keyword 'Phase'");
    expect_error("peers 4\nx0 -> 1\n", 2, "unknown keyword 'x0'");
}

Test(topo_parse, missing_peers)
{
    expect_error("# no count\ngenerator ring\n", 2, "'peers N' must come before the first generator");
    expect_error("0 -> 1\n", 1, "'peers N' must come before the first edge");
    expect_error("\nphase\npeers 2\n", 2, "'peers N' must come before the first phase");
    expect_error("peers 2\npeers 2\n", 2, "peers given twice (first on line 1)");
    expect_error("peers\n", 1, "peers needs a count");
    expect_error("peers 4\n", 1, "no generator and no phases");
}

Test(topo_parse, empty_file)
{
    expect_error("", 0, "empty topology");
    expect_error("# only a comment\n\n   \n\t# another\n", 0, "empty topology");
}

Test(topo_parse, peer_id_out_of_range)
{
    expect_error("peers 4\nphase\n0 -> 1\n1 -> 4\n", 4, "peer 4 out of range 0..3");
    expect_error("peers 4\n\n9 -> 1\n", 3, "peer 9 out of range 0..3");
    expect_error("peers 4\n-1 -> 2\n", 2, "peer -1 out of range 0..3");
    expect_error("peers 4\n0 -> 99999999999999999999999\n", 2, "out of range 0..3");
}

Test(topo_parse, duplicate_edge)
{
    expect_error("peers 3\nphase\n0 -> 1\n1 -> 2\n0 -> 1\n2 -> 0\n", 5, "duplicate edge 0 -> 1 in phase 0 (first on line 3)");
    expect_error("peers 3\n0 -> 1 2 1\n", 2, "duplicate edge 0 -> 1 in phase 0");
    expect_error("peers 2\nphase\n0 -> 1\n1 -> 0\nphase\n1 -> 0\n1 -> 0\n", 7, "duplicate edge 1 -> 0 in phase 1 (first on line 6)");
    /* the same edge in two phases is not a duplicate */
    topo t;
    expect_ok(&t, "peers 2\nphase\n0 -> 1\n1 -> 0\nphase\n0 -> 1\n1 -> 0\n");
    topo_free(&t);
}

Test(topo_parse, weights_not_summing_to_one_at_the_senders_first_edge_line)
{
    expect_error("peers 2\nphase\n0 -> 0:0.5 1:0.4\n1 -> 1:0.5 0:0.5\n", 3, "peer 0's weights in phase 0 sum to 0.9, not 1");
    /* sender 0 first appears on line 4; its second line makes the sum 1.1 */
    expect_error("peers 2\nphase\n1 -> 1:0.5 0:0.5\n0 -> 0:0.5\n0 -> 1:0.6\n", 4, "sum to 1.1, not 1");
    /* in a later phase, reported when that phase closes, still at the sender's line */
    expect_error("peers 2\nphase\n0 -> 0:0.5 1:0.5\n1 -> 1:0.5 0:0.5\nphase\n0 -> 0:0.5 1:0.5\n1 -> 1:0.2 0:0.5\n", 7,
                 "peer 1's weights in phase 1 sum to 0.7");
    expect_error("peers 2\n0 -> 1:1\n1 -> 0:1\n", 2, "peer 0 keeps no share in phase 0");
    expect_error("peers 2\n0 -> 0:0.5 1:0\n", 2, "out of range (0, 1]");
    expect_error("peers 2\n0 -> 0:0.5 1:1.5\n", 2, "out of range (0, 1]");
}

Test(topo_parse, mixing_weighted_and_unweighted_edges)
{
    expect_error("peers 3\n0 -> 1:0.5 0:0.5\n1 -> 2\n", 3, "lacks a weight but the edges from line 2 do");
    expect_error("peers 3\n0 -> 1\n1 -> 2\n\n2 -> 0:1\n", 5, "has a weight but the edges from line 2 do not");
    expect_error("peers 3\n0 -> 1:0.5 2\n", 2, "lacks a weight");
    expect_error("peers 2\n0 -> 0\n", 2, "self-edge 0 -> 0 without a weight");
}

Test(topo_parse, not_strongly_connected_is_line_0)
{
    expect_error("peers 4\nphase\n0 -> 1\n1 -> 0\nphase\n2 -> 3\n3 -> 2\n", 0,
                 "not strongly connected over one period of 2 phases: peer 2 cannot be reached from peer 0");
    expect_error("peers 3\n0 -> 1\n1 -> 2\n", 0, "peer 1 cannot reach peer 0");
    expect_error("peers 2\nphase\nphase\n", 0, "not strongly connected");
}

Test(topo_parse, garbage_numbers)
{
    expect_error("peers 8x\n", 1, "bad peer count '8x'");
    expect_error("peers -\n", 1, "bad peer count");
    expect_error("peers 4 5\n", 1, "unexpected '5'");
    expect_error("peers 4\n0 -> 1x\n", 2, "bad target '1x'");
    expect_error("peers 4\n0x1 -> 1\n", 2, "bad sender '0x1'");
    expect_error("peers 2\n0 -> 1:0.5.5\n", 2, "bad weight '0.5.5'");
    expect_error("peers 2\n0 -> 1:abc\n", 2, "bad weight 'abc'");
    expect_error("peers 2\n0 -> 1:nan\n", 2, "bad weight 'nan'");
    expect_error("peers 2\n0 -> 1:inf\n", 2, "bad weight 'inf'");
    expect_error("peers 2\n0 -> 1:0x1p-1\n", 2, "bad weight");
    expect_error("peers 2\n0 -> 1:1/0\n", 2, "bad weight '1/0'");
    expect_error("peers 2\n0 -> 1:\n", 2, "bad weight ''");
    expect_error("peers 2\n0 1\n", 2, "expected 'SRC -> DST");
    expect_error("peers 2\n0 ->\n", 2, "no targets after '->'");
    expect_error("peers 2\n -> 1\n", 2, "missing sender");
    expect_error("peers 3\n0 1 -> 2\n", 2, "one sender per line");
    expect_error("peers 3\nphase x\n", 2, "bad phase number 'x'");
    expect_error("peers 3\nphase 1 2\n", 2, "out of order");
}

Test(topo_parse, huge_counts)
{
    expect_error("peers 65537\n", 1, "peer count 65537 out of range 1..65536");
    expect_error("peers 99999999999999999999999999\n", 1, "out of range 1..65536");
    expect_error("peers 0\n", 1, "out of range");
    /* 64 phases of 65536 peers pass the per-phase limits but not the total:
     * the error is on the 64th phase line (line 65), before anything big is
     * allocated. */
    size_t cap = 16 + 64 * 6;
    char *text = malloc(cap);
    strcpy(text, "peers 65536\n");
    for (int i = 0; i < 64; i++)
        strcat(text, "phase\n");
    expect_error(text, 65, "exceed the limit");
    free(text);
    /* more than 64 out-neighbours */
    char line[1024] = "peers 100\n0 ->";
    for (int j = 1; j <= 65; j++)
        snprintf(line + strlen(line), sizeof line - strlen(line), " %d", j);
    strcat(line, "\n");
    expect_error(line, 2, "more than 64 out-neighbours");
}

Test(topo_parse, structure_errors)
{
    expect_error("peers 4\ngenerator ring\nphase\n", 3, "explicit phases and a generator (line 2)");
    expect_error("peers 2\n0 -> 1\n1 -> 0\ngenerator ring\n", 4, "a generator and explicit phases (line 2)");
    expect_error("peers 4\ngenerator ring\n0 -> 1\n", 3, "edges and a generator (line 2)");
    expect_error("peers 4\ngenerator ring\ngenerator ring\n", 3, "a second generator (first on line 2)");
    expect_error("peers 2\nphase 0\n0 -> 1\n1 -> 0\nphase 2\n", 5, "phase 2 out of order: this is phase 1");
    expect_error("peers 2\ngenerator\n", 2, "generator needs a name");
}

Test(topo_parse, generator_errors_are_on_the_generator_line)
{
    expect_error("peers 4\n# c\ngenerator torus row=2\n", 3, "torus: unknown parameter 'row=2' (takes rows, cols)");
    expect_error("peers 4\ngenerator bogus\n", 2, "unknown generator 'bogus'");
    expect_error("peers 5\ngenerator bipartite-exponential\n", 2, "even");
    expect_error("peers 4\ngenerator random out=9\n", 2, "out=9 out of range 1..3");
    expect_error("peers 4\ngenerator ring out=2\n", 2, "takes no parameters");
    expect_error("peers 16\ngenerator torus rows=3\n", 2, "rows=3 does not divide");
    expect_error("peers 4\ngenerator random out=2 out=1\n", 2, "given twice");
    expect_error("peers 4\ngenerator random seed=x\n", 2, "non-negative integer");
    expect_error("peers 100\ngenerator complete\n", 2, "at most 64");
}

Test(topo_parse, nul_byte)
{
    static const char text[] = "peers 2\n0 -> 1\0\n1 -> 0\n";
    topo t;
    parse_error e;
    cr_assert_eq(topo_parse(&t, text, sizeof text - 1, "t.topo", &e), -EBADMSG);
    cr_assert_eq(e.line, 2);
    cr_assert(strstr(e.msg, "NUL"), "%s", e.msg);
}

Test(topo_parse, load_names_the_missing_file)
{
    topo t;
    parse_error e;
    cr_assert_eq(topo_load(&t, "/nonexistent/x.topo", &e), -ENOENT);
    cr_assert_str_eq(e.file, "/nonexistent/x.topo");
    cr_assert_eq(e.line, 0);
    cr_assert_null(t.edges);
    topo_free(&t); /* safe on a zeroed topo */
    topo_free(NULL);
    cr_assert_eq(topo_load(&t, "/nonexistent/x.topo", NULL), -ENOENT, "e may be NULL");
}

/* ---- round trip --------------------------------------------------------------- */

Test(topo_parse, round_trip_examples_generators_and_weights)
{
    glob_t g;
    cr_assert_eq(glob("topologies/*.topo", 0, NULL, &g), 0);
    for (size_t i = 0; i < g.gl_pathc; i++) {
        topo t;
        parse_error e;
        cr_assert_eq(topo_load(&t, g.gl_pathv[i], &e), 0, "%s", e.msg);
        round_trip(&t, g.gl_pathv[i]);
        /* and as explicit phases, the way 'gen --explicit' writes them */
        snprintf(t.kind, sizeof t.kind, "explicit");
        round_trip(&t, g.gl_pathv[i]);
        topo_free(&t);
    }
    globfree(&g);

    static const char *const kinds[][2] = {{"ring", NULL},        {"exponential", NULL}, {"n-peer-exponential", "out=3"},
                                           {"bipartite-exponential", NULL}, {"torus", NULL}, {"complete", NULL},
                                           {"star", "center=3"},  {"random", "out=2 seed=9 phases=3"}};
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
        topo t;
        parse_error e;
        cr_assert_eq(topo_generate(&t, kinds[i][0], 12, kinds[i][1], &e), 0, "%s: %s", kinds[i][0], e.msg);
        round_trip(&t, kinds[i][0]);
        snprintf(t.kind, sizeof t.kind, "explicit");
        round_trip(&t, kinds[i][0]);
        topo_free(&t);
    }

    /* awkward weights: rescaled values with no short form must survive */
    topo t;
    expect_ok(&t, "peers 3\nphase\n0 -> 0:0.1 1:0.2 2:0.7\n1 -> 1:0.3333333 2:0.6666666\n2 -> 2:1/7 0:6/7\n"
                  "phase\n0 -> 0:1\n1 -> 1:0.9 0:0.1\n2 -> 2:0.123456789 1:0.876543211\n");
    round_trip(&t, "weights");
    topo_free(&t);
}

Test(topo_parse, format_weight_reads_back_exactly)
{
    char buf[40];
    topo_format_weight(0.5, buf, sizeof buf);
    cr_assert_str_eq(buf, "0.5");
    topo_format_weight(1.0 / 3, buf, sizeof buf);
    cr_assert_str_eq(buf, "1/3");
    topo_format_weight(0.1, buf, sizeof buf);
    cr_assert_str_eq(buf, "0.1");
    /* a weight with no short form falls back to digits that read back exactly */
    double w = 0.1234567 / 0.9999999;
    topo_format_weight(w, buf, sizeof buf);
    cr_assert_eq(strtod(buf, NULL), w, "%s", buf);
    topo_format_weight(2.0 / 7, buf, sizeof buf);
    cr_assert_str_eq(buf, "2/7");
}
