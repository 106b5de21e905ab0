/* Checkpoints (peer/store/ckpt.c): exact round trip, fallback to the previous file
 * when the current one is torn or altered, refusal of another run's file,
 * SIGKILL while writing (50 times), and what a resume does to push-sum mass. */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gossip/gsp.h"
#include "nn/nn_data.h"
#include "peer/store/ckpt.h"
#include "peer/core/local_step.h"
#include "tests/embedded_shard.h"
#include "topologies/topo.h"

TestSuite(peer_ckpt, .timeout = 120);

#define N_PEERS 4

/* A small shard of real data for the batch streams. */
static nn_dataset g_shard;

static void shard_init(void) { embedded_shard(&g_shard, 300, 7); }

/* One peer's state as a node holds it. */
typedef struct state {
    gsp_peer g;
    local_state l;
} state;

static const cmp_spec *g_codec;
static nn_opt_kind g_optimizer = NN_OPT_SGD;
static const outer_opts *g_outer;

static void state_init(state *s, int id, size_t dim, uint64_t incarnation)
{
    train_opts o;
    train_opts_defaults(&o);
    o.optimizer = g_optimizer;
    cr_assert_eq(train_opts_finish(&o), 0);
    float *x0 = malloc(dim * sizeof *x0);
    for (size_t i = 0; i < dim; i++)
        x0[i] = (float)(id + 1) + (float)i * 1e-3f;
    cr_assert_eq(gsp_init(&s->g, id, N_PEERS, dim, 0, x0), 0);
    free(x0);
    if (g_codec)
        cr_assert_eq(gsp_set_codec(&s->g, g_codec, 5, 0.5f), 0);
    s->g.incarnation = incarnation;
    cr_assert_eq(local_init(&s->l, &o, g_outer, &g_shard, id, 8, dim), 0);
}

static void state_free(state *s)
{
    gsp_free(&s->g);
    local_free(&s->l);
}

static ckpt_run run_of(int id, size_t dim)
{
    ckpt_run r = {.id = id, .n_peers = N_PEERS, .dim = dim, .model = "mlp:8",
                  .codec = g_codec ? g_codec->text : "exact", .seed = 1, .cluster = "ckpt-test"};
    memset(r.cluster_digest, 0xc1, sizeof r.cluster_digest);
    return r;
}

/* One round of the exponential graph among the live peers: every peer
 * emits, every message is absorbed at once (in sender order). *sent_w
 * accumulates the weight that peer `watch` sends. */
static void round_all(state *s, const uint8_t *alive, const topo *t, int watch, double *sent_w)
{
    gsp_msg msgs[N_PEERS][TOPO_MAX_OUT];
    int n[N_PEERS] = {0};
    for (int i = 0; i < N_PEERS; i++) {
        if (!alive[i])
            continue;
        topo_out out;
        topo_route(t, s[i].g.round, i, alive, &out);
        double w_before = s[i].g.w;
        n[i] = gsp_emit(&s[i].g, &out, msgs[i]);
        cr_assert_eq(n[i], out.n);
        if (i == watch && sent_w)
            *sent_w += w_before - s[i].g.w;
    }
    for (int i = 0; i < N_PEERS; i++)
        for (int k = 0; k < n[i]; k++)
            cr_assert_geq(gsp_absorb(&s[msgs[i][k].dst].g, &msgs[i][k]), 0);
}

static void tmp_dir(char *dir)
{
    strcpy(dir, "/tmp/sgp-ckpt-XXXXXX");
    cr_assert(mkdtemp(dir));
}

static void assert_same_state(const state *a, const state *b)
{
    const size_t dim = a->g.dim;
    cr_assert_eq(a->g.round, b->g.round);
    cr_assert_eq(b->g.since, a->g.round, "a resumed peer does not wait for rounds before its checkpoint");
    cr_assert(a->g.w == b->g.w, "w %.17g vs %.17g", a->g.w, b->g.w);
    cr_assert_eq(memcmp(a->g.x, b->g.x, dim * sizeof(float)), 0, "x bit for bit");
    size_t na, nb;
    long *ta, *tb;
    const float *sa = nn_optimizer_state((nn_optimizer *)&a->l.opt, &na, &ta);
    const float *sb = nn_optimizer_state((nn_optimizer *)&b->l.opt, &nb, &tb);
    cr_assert_eq(na, nb);
    cr_assert_eq(memcmp(sa, sb, na * sizeof(float)), 0, "optimizer state bit for bit");
    cr_assert((ta == NULL) == (tb == NULL) && (!ta || *ta == *tb), "optimizer steps");
    cr_assert_eq(outer_on(&a->l.outer), outer_on(&b->l.outer));
    if (outer_on(&a->l.outer))
        cr_assert_eq(memcmp(a->l.outer.sgd.velocity, b->l.outer.sgd.velocity, dim * sizeof(float)), 0,
                     "outer velocity bit for bit");
    cr_assert_eq(memcmp(&a->l.batches.rng, &b->l.batches.rng, sizeof a->l.batches.rng), 0, "batch generator");
    cr_assert_eq(a->l.batches.pos, b->l.batches.pos);
    cr_assert_eq(a->l.batches.epoch, b->l.batches.epoch);
    cr_assert_eq(memcmp(a->l.batches.perm, b->l.batches.perm, (size_t)g_shard.n * sizeof(int)), 0);
    cr_assert_eq(a->g.n_in, b->g.n_in);
    for (int k = 0; k < a->g.n_in; k++) {
        const gsp_edge *e = &a->g.in[k], *f = &b->g.in[k];
        cr_assert_eq(e->peer, f->peer);
        cr_assert_eq(e->incarnation, f->incarnation);
        cr_assert_eq(e->seq, f->seq);
        cr_assert_eq(e->round, f->round);
        cr_assert(e->w == f->w);
        cr_assert(!a->g.codec || (!e->x && !f->x), "a compressed edge keeps no totals");
        if (!a->g.codec)
            cr_assert_eq(memcmp(e->x, f->x, dim * sizeof(double)), 0);
        if (a->g.codec)
            cr_assert_eq(memcmp(e->ref, f->ref, dim * sizeof(float)), 0);
    }
    cr_assert_eq(b->g.n_out, 0, "out-edges are not restored: a restart sends under a new incarnation");
}

/* N_PEERS peers of dim parameters on the exponential graph t after
 * `rounds` rounds, every one alive. */
static void talked(state *s, topo *t, size_t dim, int rounds)
{
    for (int i = 0; i < N_PEERS; i++)
        state_init(&s[i], i, dim, 100 + (uint64_t)i);
    parse_error te;
    cr_assert_eq(topo_generate(t, "exponential", N_PEERS, NULL, &te), 0);
    uint8_t alive[N_PEERS];
    memset(alive, 1, sizeof alive);
    for (int r = 0; r < rounds; r++)
        round_all(s, alive, t, -1, NULL);
}

/* Run a few rounds (so in-edges, velocity and batch position are non-trivial),
 * save peer 2, restore it into fresh state, compare everything. */
static void round_trip(const char *codec_text)
{
    shard_init();
    cmp_spec spec;
    char err[512], used[4400];
    if (codec_text) {
        cr_assert_eq(cmp_spec_parse(&spec, codec_text, err, sizeof err), 0, "%s", err);
        g_codec = &spec;
    }
    const size_t dim = 333;
    state s[N_PEERS];
    topo t;
    talked(s, &t, dim, 7);
    for (int b = 0; b < 5; b++)
        nn_batcher_next(&s[2].l.batches);
    size_t n_state;
    long *steps;
    float *opt_state = nn_optimizer_state(&s[2].l.opt, &n_state, &steps);
    for (size_t i = 0; i < n_state; i++)
        opt_state[i] = (float)i * 0.25f - 3.0f;
    if (steps)
        *steps = 17;
    if (g_outer)
        for (size_t i = 0; i < dim; i++)
            s[2].l.outer.sgd.velocity[i] = (float)i * 0.5f - 7.0f;
    char dir[64], path[128];
    tmp_dir(dir);
    snprintf(path, sizeof path, "%s/p2.ckpt", dir);
    ckpt_run run = run_of(2, dim);
    cr_assert_eq(ckpt_save(path, &run, &s[2].g, &s[2].l, err, sizeof err), 0, "%s", err);
    state back;
    state_init(&back, 2, dim, 999);
    cr_assert_eq(ckpt_load(path, &run, &back.g, &back.l, used, sizeof used, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(used, path);
    assert_same_state(&s[2], &back);
    state_free(&back);
    /* A checkpoint of one optimizer does not restore into the other. */
    g_optimizer = g_optimizer == NN_OPT_ADAMW ? NN_OPT_SGD : NN_OPT_ADAMW;
    state_init(&back, 2, dim, 999);
    cr_assert_lt(ckpt_load(path, &run, &back.g, &back.l, used, sizeof used, err, sizeof err), 0);
    cr_assert(strstr(err, "written with another optimizer") != NULL, "%s", err);
    g_optimizer = g_optimizer == NN_OPT_ADAMW ? NN_OPT_SGD : NN_OPT_ADAMW;
    state_free(&back);
    /* Nor one with an outer optimizer into a run without (or the reverse). */
    const outer_opts *had = g_outer, other = {.lr = 1.0f, .momentum = 0.5f};
    g_outer = had ? NULL : &other;
    state_init(&back, 2, dim, 999);
    cr_assert_lt(ckpt_load(path, &run, &back.g, &back.l, used, sizeof used, err, sizeof err), 0);
    cr_assert(strstr(err, "outer optimizer") != NULL, "%s", err);
    g_outer = had;
    state_free(&back);
    for (int i = 0; i < N_PEERS; i++)
        state_free(&s[i]);
    topo_free(&t);
    nn_dataset_free(&g_shard);
    g_codec = NULL;
}

Test(peer_ckpt, round_trip_restores_every_field_bit_for_bit) { round_trip(NULL); }
Test(peer_ckpt, round_trip_with_a_codec_restores_the_references) { round_trip("stc:0.1"); }
Test(peer_ckpt, round_trip_keeps_the_outer_optimizers_velocity)
{
    outer_opts o;
    char err[256];
    cr_assert_eq(outer_opts_parse(&o, "nesterov:0.7:0.9", err, sizeof err), 0, "%s", err);
    g_outer = &o;
    round_trip("stc:0.1");
    g_outer = NULL;
}
Test(peer_ckpt, round_trip_keeps_adamws_moments_and_step_count)
{
    g_optimizer = NN_OPT_ADAMW;
    round_trip(NULL);
    g_optimizer = NN_OPT_SGD;
}

/* A checkpoint written as the run stops is read as final once (the resume
 * asks for the shares sent meanwhile instead of adopting them): the read
 * leaves PATH.resumed, so that a resumed run that dies before its own next
 * checkpoint does not come back from it as final again; the next checkpoint
 * removes the mark; a .prev is never final. */
Test(peer_ckpt, a_final_checkpoint_is_read_as_final_once)
{
    shard_init();
    const size_t dim = 64;
    state s[N_PEERS];
    topo t;
    talked(s, &t, dim, 3);
    cr_assert_gt(s[2].g.n_in, 0);
    char dir[64], path[128], mark[160], err[512], used[4400];
    tmp_dir(dir);
    snprintf(path, sizeof path, "%s/p2.ckpt", dir);
    snprintf(mark, sizeof mark, "%s.resumed", path);
    ckpt_run run = run_of(2, dim);
    struct stat st;
    for (int load = 0; load < 5; load++) {
        state back;
        state_init(&back, 2, dim, 999);
        if (load == 0 || load == 3)
            cr_assert_eq(ckpt_save_final(path, &run, &s[2].g, &s[2].l, err, sizeof err), 0, "%s", err);
        if (load == 2)
            cr_assert_eq(ckpt_save(path, &run, &s[2].g, &s[2].l, err, sizeof err), 0, "%s", err);
        if (load == 4) { /* the final one torn: its .prev (final too) is used, and is not final */
            cr_assert_eq(ckpt_save_final(path, &run, &s[2].g, &s[2].l, err, sizeof err), 0, "%s", err);
            unlink(mark);
            cr_assert_eq(truncate(path, 100), 0);
        }
        const int rc = ckpt_load(path, &run, &back.g, &back.l, used, sizeof used, err, sizeof err);
        const int want = load == 0 || load == 3 ? CKPT_FINAL : 0;
        cr_assert_eq(rc, want, "load %d: %d (%s)", load, rc, err);
        assert_same_state(&s[2], &back);
        cr_assert_eq(stat(mark, &st) == 0, load != 2 && load != 4, "load %d: the mark", load);
        state_free(&back);
    }
    char err2[512];
    cr_assert_eq(ckpt_remove(path, err2, sizeof err2), 0, "%s", err2);
    cr_assert_neq(stat(mark, &st), 0, "removed with the checkpoint");
    for (int i = 0; i < N_PEERS; i++)
        state_free(&s[i]);
    topo_free(&t);
    nn_dataset_free(&g_shard);
}

static void flip_byte(const char *path, long at)
{
    FILE *f = fopen(path, "r+b");
    cr_assert(f, "%s", path);
    cr_assert_eq(fseek(f, at, SEEK_SET), 0);
    int c = fgetc(f);
    cr_assert_eq(fseek(f, at, SEEK_SET), 0);
    fputc(c ^ 0x10, f);
    fclose(f);
}

Test(peer_ckpt, an_altered_or_torn_file_falls_back_to_the_previous_one)
{
    shard_init();
    const size_t dim = 200;
    state s;
    state_init(&s, 1, dim, 7);
    char dir[64], path[128], prev[140], err[9000], used[4400];
    tmp_dir(dir);
    snprintf(path, sizeof path, "%s/p.ckpt", dir);
    snprintf(prev, sizeof prev, "%s.prev", path);
    ckpt_run run = run_of(1, dim);
    s.g.round = 10;
    cr_assert_eq(ckpt_save(path, &run, &s.g, &s.l, err, sizeof err), 0, "%s", err);
    s.g.round = 20;
    cr_assert_eq(ckpt_save(path, &run, &s.g, &s.l, err, sizeof err), 0, "%s", err);
    struct stat st;
    cr_assert_eq(stat(prev, &st), 0, "the previous checkpoint is kept");

    state back;
    state_init(&back, 1, dim, 8);
    flip_byte(path, 100);
    cr_assert_eq(ckpt_load(path, &run, &back.g, &back.l, used, sizeof used, err, sizeof err), 0, "%s", err);
    cr_assert_eq(back.g.round, 10, "restored from .prev");
    cr_assert(strstr(used, ".prev") && strstr(used, "checksum"), "says which file and why: %s", used);
    state_free(&back);

    /* Torn: cut the current file short. The altered round-20 file was not
     * rotated into .prev by this save: .prev still holds round 10. */
    s.g.round = 30;
    cr_assert_eq(ckpt_save(path, &run, &s.g, &s.l, err, sizeof err), 0, "%s", err);
    cr_assert_eq(truncate(path, 500), 0);
    state_init(&back, 1, dim, 8);
    cr_assert_eq(ckpt_load(path, &run, &back.g, &back.l, used, sizeof used, err, sizeof err), 0, "%s", err);
    cr_assert_eq(back.g.round, 10, "a file that was not whole never replaces a whole .prev");
    cr_assert(strstr(used, "torn"), "%s", used);
    state_free(&back);

    /* Both bad: an error naming both, and the state untouched. */
    flip_byte(prev, 60);
    state_init(&back, 1, dim, 8);
    cr_assert_lt(ckpt_load(path, &run, &back.g, &back.l, used, sizeof used, err, sizeof err), 0);
    cr_assert(strstr(err, path) && strstr(err, ".prev"), "%s", err);
    cr_assert_eq(back.g.round, 0);
    cr_assert(back.g.w == 1.0);
    state_free(&back);

    /* Only .prev left (a kill between the two renames). */
    s.g.round = 40;
    cr_assert_eq(ckpt_save(path, &run, &s.g, &s.l, err, sizeof err), 0, "%s", err);
    cr_assert_eq(rename(path, prev), 0);
    state_init(&back, 1, dim, 8);
    cr_assert_eq(ckpt_load(path, &run, &back.g, &back.l, used, sizeof used, err, sizeof err), 0, "%s", err);
    cr_assert_eq(back.g.round, 40);
    state_free(&back);

    /* Nothing at all. */
    char none[160];
    snprintf(none, sizeof none, "%s/none.ckpt", dir);
    state_init(&back, 1, dim, 8);
    cr_assert_eq(ckpt_load(none, &run, &back.g, &back.l, used, sizeof used, err, sizeof err), -ENOENT);
    state_free(&back);
    state_free(&s);
    nn_dataset_free(&g_shard);
}

Test(peer_ckpt, another_runs_checkpoint_is_refused)
{
    shard_init();
    const size_t dim = 64;
    state s, back;
    state_init(&s, 1, dim, 7);
    char dir[64], path[128], err[9000], used[4400];
    tmp_dir(dir);
    snprintf(path, sizeof path, "%s/p.ckpt", dir);
    ckpt_run run = run_of(1, dim);
    cr_assert_eq(ckpt_save(path, &run, &s.g, &s.l, err, sizeof err), 0, "%s", err);
    ckpt_run other[5] = {run, run, run, run, run};
    other[0].seed = 2;
    other[1].model = "mlp:9";
    other[2].codec = "stc:0.1";
    other[3].id = 2;
    other[4].cluster_digest[0] ^= 1; /* the same settings and cluster name, other keys: another launch */
    for (int k = 0; k < 5; k++) {
        state_init(&back, other[k].id, dim, 8);
        cr_assert_eq(ckpt_load(path, &other[k], &back.g, &back.l, used, sizeof used, err, sizeof err), -ESTALE,
                     "variant %d: %s", k, err);
        cr_assert(strstr(err, "another run"), "%s", err);
        state_free(&back);
    }
    cr_assert(strstr(err, "run 'ckpt-test' (cluster id c1c1c1c1...), this is run 'ckpt-test' (cluster id c0c1c1c1"),
              "names both runs: %s", err);
    state_free(&s);
    nn_dataset_free(&g_shard);
}

/* A child writes checkpoints as fast as it can, round after round, with
 * x = round everywhere, and says so through a pipe once its first one is
 * complete; the parent waits for that, lets it go on writing for a random
 * 0-40 ms (where the kill lands is the experiment, not a wait for anything),
 * SIGKILLs it and loads: the checkpoint must be whole, one the child wrote,
 * and no older than the one it reported complete. 50 times, each child
 * starting over the files the previous one left. */
Test(peer_ckpt, sigkill_while_writing_always_leaves_a_whole_checkpoint, .timeout = 600)
{
    shard_init();
    const size_t dim = 1 << 18; /* 1 MB of x: each write takes long enough to be hit */
    char dir[64], path[128], tmp[140], err[9000], used[4400];
    tmp_dir(dir);
    snprintf(path, sizeof path, "%s/p.ckpt", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    ckpt_run run = run_of(3, dim);
    long last_loaded = -1;
    int torn_tmp_seen = 0;
    srand(42);
    /* 50 kills, and more (up to 400) until one has landed in a write: on a
     * busy machine a descheduled writer may be killed between writes many
     * times in a row. */
    int k;
    for (k = 0; k < 50 || (torn_tmp_seen == 0 && k < 400); k++) {
        int done[2];
        cr_assert_eq(pipe(done), 0);
        pid_t pid = fork();
        cr_assert(pid >= 0);
        if (pid == 0) {
            close(done[0]);
            state s;
            state_init(&s, 3, dim, 1);
            for (long r = last_loaded + 1;; r++) {
                s.g.round = r;
                for (size_t i = 0; i < dim; i++)
                    s.g.x[i] = (float)r;
                char e[512];
                if (ckpt_save(path, &run, &s.g, &s.l, e, sizeof e) < 0)
                    _exit(3);
                if (done[1] >= 0) { /* the first one is on disk */
                    if (write(done[1], "1", 1) != 1)
                        _exit(4);
                    close(done[1]);
                    done[1] = -1;
                }
            }
        }
        close(done[1]);
        struct pollfd pf = {.fd = done[0], .events = POLLIN};
        char c = 0;
        int ready = poll(&pf, 1, 120 * 1000) == 1 && read(done[0], &c, 1) == 1;
        close(done[0]);
        if (!ready) {
            kill(pid, SIGKILL);
            int st;
            waitpid(pid, &st, 0);
            cr_assert_fail("writer %d completed no checkpoint in 120 s (status %d; files in %s)", k,
                           WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), dir);
        }
        struct timespec ts = {0, (long)(rand() % 41) * 1000000L};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        int st;
        cr_assert_eq(waitpid(pid, &st, 0), pid);
        cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "the writer failed on its own (status %d)", st);
        struct stat sb;
        torn_tmp_seen += stat(tmp, &sb) == 0;
        state back;
        state_init(&back, 3, dim, 2);
        int rc = ckpt_load(path, &run, &back.g, &back.l, used, sizeof used, err, sizeof err);
        cr_assert_eq(rc, 0, "kill %d: %s", k, err);
        for (size_t i = 0; i < dim; i++)
            cr_assert(back.g.x[i] == (float)back.g.round, "kill %d: a mixed checkpoint (x[%zu] = %g, round %ld)", k, i,
                      back.g.x[i], back.g.round);
        cr_assert_gt(back.g.round, last_loaded, "kill %d: round %ld loaded, but the writer had completed round %ld",
                     k, back.g.round, last_loaded + 1);
        last_loaded = back.g.round;
        state_free(&back);
    }
    cr_assert_gt(torn_tmp_seen, 0, "no kill landed during a write (%d of %d left a .tmp)", torn_tmp_seen, k);
    cr_log_info("%d of %d kills left a torn .tmp behind; every load was whole", torn_tmp_seen, k);
    char prev[140];
    snprintf(prev, sizeof prev, "%s.prev", path);
    unlink(path), unlink(prev), unlink(tmp), rmdir(dir); /* 2 MB a run otherwise */
    nn_dataset_free(&g_shard);
}

/* GUARANTEES.md, "Stragglers, leave and join": a peer that resumes from a
 * checkpoint brings back the checkpoint's (x, w) and adopts, on each in-edge,
 * totals that follow a gap (what it absorbed after the checkpoint went down
 * with it), as sgp peer does. Nothing is counted twice: the total weight
 * changes by w_c - w_crash, less the share in each first message after a
 * gap. (Replaying the in-edges added what it had
 * received after the checkpoint a second time, once per restart,
 * compounding; a token weight instead drained the total with every restart.) */
Test(peer_ckpt, resume_changes_the_total_weight_by_w_c_minus_w_crash)
{
    shard_init();
    const size_t dim = 16;
    state s[N_PEERS];
    for (int i = 0; i < N_PEERS; i++)
        state_init(&s[i], i, dim, 10);
    topo t;
    parse_error te;
    cr_assert_eq(topo_generate(&t, "exponential", N_PEERS, NULL, &te), 0);
    uint8_t alive[N_PEERS];
    memset(alive, 1, sizeof alive);
    for (int r = 0; r < 6; r++)
        round_all(s, alive, &t, -1, NULL);
    char dir[64], path[128], err[9000], used[4400];
    tmp_dir(dir);
    snprintf(path, sizeof path, "%s/p2.ckpt", dir);
    ckpt_run run = run_of(2, dim);
    cr_assert_eq(ckpt_save(path, &run, &s[2].g, &s[2].l, err, sizeof err), 0, "%s", err);
    const double w_c = s[2].g.w;
    for (int r = 0; r < 5; r++)
        round_all(s, alive, &t, -1, NULL);
    const double w_crash = s[2].g.w;
    /* Crash and resume under a new incarnation, at the others' round. */
    long at = s[0].g.round;
    state_free(&s[2]);
    state_init(&s[2], 2, dim, 11);
    cr_assert_eq(ckpt_load(path, &run, &s[2].g, &s[2].l, used, sizeof used, err, sizeof err), 0, "%s", err);
    s[2].g.adopt = 1;
    for (int k = 0; k < s[2].g.n_in; k++)
        s[2].g.in[k].adopt = 1;
    s[2].g.round = s[2].g.since = at;
    for (int r = 0; r < 20; r++)
        round_all(s, alive, &t, -1, NULL);
    double total = 0;
    for (int i = 0; i < N_PEERS; i++) {
        cr_assert_gt(s[i].g.w, 0);
        total += s[i].g.w;
    }
    /* Peer 2's two in-edges (from 1 and 0 on exp4) each had a gap; the first
     * message after it is adopted whole, including its own new share (half
     * of its sender's w = 1): 1.0 in all, the price of never counting twice. */
    double expected = N_PEERS - w_crash + w_c - 2 * 0.5;
    cr_assert_float_eq(total, expected, 1e-9, "total weight %.12f, expected N - w_crash + w_c - 1 = %.12f", total,
                       expected);
    for (int i = 0; i < N_PEERS; i++)
        state_free(&s[i]);
    topo_free(&t);
    nn_dataset_free(&g_shard);
}
