/* The exact sparse all-gather (--gather) in the simulator: every peer's
 * model the same bits at the end of a run that a crash, a comeback with a
 * checkpoint, a join without state, churn or lost messages put apart, and
 * the same run learns as push-sum does. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compress/cmp.h"
#include "peer/core/round.h"
#include "peer/sim/sim.h"
#include "tests/sim_slice.h"

static nn_dataset train, test;
static topo t;
static cmp_spec codec;

static void load(void) { sim_slice(&train, &test); }

static void unload(void)
{
    nn_dataset_free(&train);
    nn_dataset_free(&test);
    topo_free(&t);
}

TestSuite(peer_sim_gather, .init = load, .fini = unload, .timeout = 120);

static void config(sim_config *c, int n)
{
    parse_error e;
    char err[128];
    topo_free(&t);
    cr_assert_eq(topo_generate(&t, "complete", n, NULL, &e), 0, "%s", e.msg);
    cr_assert_eq(cmp_spec_parse(&codec, "sparseloco:32", err, sizeof err), 0, "%s", err);
    sim_config_defaults(c);
    c->peer.n_peers = n;
    c->peer.topology = &t;
    c->peer.codec = &codec;
    c->peer.gather = 1, c->peer.gather_decay = 0.9f;
    c->peer.local_steps = 3;
    c->peer.train.model = "mlp:32";
    c->peer.train.epochs = 3;
    c->peer.train.progress = 0;
    train_opts_finish(&c->peer.train);
}

static void run(const sim_config *c, sim_result *r)
{
    char err[256];
    cr_assert_eq(sim_run(c, &train, &test, r, err, sizeof err), 0, "%s", err);
}

/* With --overlap too: a round's steps run while the round before is
 * applied, and start from the model applied so far plus the peer's own
 * progress, whose aggregate comes a round later (gossip/gsp_gather.h,
 * gsp_gather_fold); the model applied is every peer's, the same bits. */
Test(peer_sim_gather, learns_and_every_model_is_the_same_bits)
{
    for (int overlap = 0; overlap < 2; overlap++) {
        sim_config c;
        config(&c, 4);
        c.peer.overlap = overlap;
        sim_result r;
        run(&c, &r);
        /* (a round of delay costs points in a run this short: 0.79 against 0.84) */
        cr_assert_gt(r.test_accuracy, overlap ? 0.75 : 0.8, "overlap %d: %.3f", overlap, r.test_accuracy);
        cr_assert_eq(r.consensus_distance, 0.0, "overlap %d: %.3g", overlap, r.consensus_distance);
        cr_assert_eq(r.weight_total, 4.0, "no weight moves: %.17g", r.weight_total);
        sim_result_free(&r);
    }
}

/* Each fault leaves models apart for a while (a crashed peer's last message
 * reached some peers, a comeback or a joiner starts from another model);
 * the run's lowest sender's model brings them together again. */
Test(peer_sim_gather, faults_that_put_models_apart_end_with_every_model_the_same_bits)
{
    for (int k = 0; k < 4; k++) {
        sim_config c;
        config(&c, 4);
        c.peer.dead_timeout = 0.01;
        c.peer.overlap = k == 3;
        c.check = 1;
        const char *what = k == 0 ? "crash and rejoin" : k == 1 ? "crash and join" : k == 2 ? "churn" : "crash and rejoin, overlap";
        if (k == 0 || k == 3) {
            c.crash[c.n_crash++] = (sim_fault){.peer = 2, .round = 5};
            c.rejoin[c.n_rejoin++] = (sim_fault){.peer = 2, .round = 9};
        } else if (k == 1) {
            c.crash[c.n_crash++] = (sim_fault){.peer = 3, .round = 2};
            c.rejoin[c.n_rejoin++] = (sim_fault){.peer = 3, .round = 6, .fresh = 1};
        } else
            c.churn = 0.25, c.churn_down = 0.005;
        sim_result r;
        run(&c, &r);
        cr_assert_gt(r.crashes, 0, "%s: a fault happened", what);
        cr_assert_eq(r.consensus_distance, 0.0, "%s: %.3g", what, r.consensus_distance);
        cr_assert_gt(r.test_accuracy_min, 0.8, "%s: worst peer %.3f", what, r.test_accuracy_min);
        sim_result_free(&r);
    }
}
