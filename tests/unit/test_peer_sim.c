/* The simulator end to end on the embedded data: determinism, pure averaging,
 * faults, that training across peers learns, and local steps. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "peer/core/round.h"
#include "peer/sim/sim.h"
#include "tests/sim_slice.h"

static nn_dataset train, test;
static topo t;

static void load(void) { sim_slice(&train, &test); }

static void unload(void)
{
    nn_dataset_free(&train);
    nn_dataset_free(&test);
    topo_free(&t);
}

TestSuite(peer_sim, .init = load, .fini = unload, .timeout = 120);

static void config(sim_config *c, const char *kind, int n)
{
    parse_error e;
    topo_free(&t);
    cr_assert_eq(topo_generate(&t, kind, n, NULL, &e), 0, "%s", e.msg);
    sim_config_defaults(c);
    c->peer.n_peers = n;
    c->peer.topology = &t;
    c->peer.train.model = "mlp:32";
    c->peer.train.epochs = 2;
    c->peer.train.progress = 0;
    train_opts_finish(&c->peer.train);
}

static void run(const sim_config *c, sim_result *r)
{
    char err[256];
    cr_assert_eq(sim_run(c, &train, &test, r, err, sizeof err), 0, "%s", err);
}

Test(peer_sim, same_seed_same_model_bit_for_bit)
{
    sim_config c;
    config(&c, "exponential", 8);
    c.peer.tau = 1;
    c.loss = 0.05;
    c.latency = 0.003; /* arrival order matters with tau > 0 and loss */
    sim_result a, b, d;
    run(&c, &a);
    run(&c, &b);
    cr_assert_eq(a.parameters, b.parameters);
    cr_assert_eq(memcmp(a.average_model, b.average_model, a.parameters * sizeof(float)), 0);
    cr_assert_eq(a.bytes_sent, b.bytes_sent);
    cr_assert_eq(a.messages_lost, b.messages_lost);
    cr_assert_eq(a.simulated_seconds, b.simulated_seconds);
    c.peer.train.seed = 2;
    run(&c, &d);
    cr_assert_neq(memcmp(a.average_model, d.average_model, a.parameters * sizeof(float)), 0, "the seed matters");
    sim_result_free(&a), sim_result_free(&b), sim_result_free(&d);
}

Test(peer_sim, averaging_only_reaches_consensus)
{
    sim_config c;
    config(&c, "exponential", 16);
    c.averaging_only = 1;
    c.peer.train.epochs = 1;
    sim_result r;
    run(&c, &r);
    cr_assert_gt(r.rounds, 4);
    cr_assert_lt(r.consensus_distance, 1e-12, "exact averaging on exp16: %.3g", r.consensus_distance);
    sim_result_free(&r);
}

Test(peer_sim, loss_still_converges_and_is_counted)
{
    sim_config c;
    config(&c, "ring", 8);
    c.averaging_only = 1;
    c.peer.train.epochs = 8;
    sim_result clean, r;
    run(&c, &clean);
    c.loss = 0.2;
    run(&c, &r);
    cr_assert_gt(r.messages_lost, 0);
    cr_assert_lt(r.consensus_distance, 1e-6, "%.3g (lossless: %.3g)", r.consensus_distance, clean.consensus_distance);
    sim_result_free(&clean);
    sim_result_free(&r);
}

Test(peer_sim, training_learns_on_every_peer)
{
    sim_config c;
    config(&c, "exponential", 4);
    c.peer.train.epochs = 3;
    sim_result r;
    run(&c, &r);
    cr_assert_gt(r.test_accuracy, 0.85, "average model %.3f", r.test_accuracy);
    cr_assert_gt(r.test_accuracy_min, 0.85, "worst peer %.3f", r.test_accuracy_min);
    cr_assert_lt(r.consensus_distance, 1e-2);
    sim_result_free(&r);
}

Test(peer_sim, crash_and_rejoin_finish)
{
    sim_config c;
    config(&c, "exponential", 8);
    c.crash[c.n_crash++] = (sim_fault){.peer = 3, .round = 10};
    c.crash[c.n_crash++] = (sim_fault){.peer = 5, .round = 12};
    c.rejoin[c.n_rejoin++] = (sim_fault){.peer = 3, .round = 30};
    c.peer.dead_timeout = 0.05;
    sim_result r;
    run(&c, &r);
    long rounds_per_epoch = (train.n + 63) / 64;
    cr_assert_eq(r.rounds, rounds_per_epoch * c.peer.train.epochs, "the survivors finish every round");
    cr_assert_gt(r.messages_lost, 0, "messages to the crashed peers before detection are lost");
    cr_assert_gt(r.test_accuracy_min, 0.8, "the rejoined peer caught up: worst %.3f", r.test_accuracy_min);
    sim_result_free(&r);
}

Test(peer_sim, straggler_delays_simulated_time_not_results_when_synchronous)
{
    sim_config c;
    config(&c, "exponential", 4);
    c.peer.train.epochs = 1;
    c.compute_seconds = 0.01; /* compute, not the links, sets the pace */
    c.peer.round_deadline = 1e3;   /* wait for late neighbours up to the round timeout: synchronous */
    sim_result a, b;
    run(&c, &a);
    double slow[4] = {1, 4, 1, 1};
    c.slow = slow;
    run(&c, &b);
    cr_assert_gt(b.simulated_seconds, 3 * a.simulated_seconds, "tau = 0 waits for the straggler");
    cr_assert_eq(b.late_marks, 0);
    cr_assert_eq(memcmp(a.average_model, b.average_model, a.parameters * sizeof(float)), 0,
                 "synchronous SGP does not depend on timing");
    sim_result_free(&a), sim_result_free(&b);
}

/* With the derived deadline (gsp_pace), the same straggler is not waited
 * for: the others mark it late and keep their pace, as real peers do. */
Test(peer_sim, straggler_is_not_waited_for_with_the_derived_deadline)
{
    sim_config c;
    config(&c, "exponential", 4);
    c.peer.train.epochs = 1;
    c.compute_seconds = 0.01;
    sim_result a, b;
    run(&c, &a);
    double slow[4] = {1, 4, 1, 1};
    c.slow = slow;
    run(&c, &b);
    cr_assert_eq(a.late_marks, 0, "nobody is late without a straggler");
    cr_assert_gt(b.late_marks, 0, "the straggler is marked late");
    cr_assert_lt(b.simulated_seconds, 2.5 * a.simulated_seconds, "the others keep their pace: %.3f s vs %.3f s",
                 b.simulated_seconds, a.simulated_seconds);
    sim_result_free(&a), sim_result_free(&b);
}

/* The guarantees of gossip/GUARANTEES.md, through the simulator's network. */
static void averaging_under(double loss, double duplicate, double jitter, sim_result *r)
{
    sim_config c;
    config(&c, "exponential", 8);
    c.averaging_only = 1;
    c.peer.train.epochs = 3;
    c.loss = loss, c.duplicate = duplicate, c.jitter = jitter;
    c.latency = 0.001;
    run(&c, r);
    cr_assert_lt(r->mass_error_w, 1e-12, "w mass changed by %.3g", r->mass_error_w);
    cr_assert_lt(r->mass_error_x, 1e-5, "x mass changed by %.3g", r->mass_error_x);
    /* (Lost shares delay the mixing by a timing-dependent amount: with 20%
     * loss the end's consensus ranged from 6e-12 to 8e-8 over seeds 4-11.) */
    cr_assert_lt(r->consensus_distance, 1e-7, "consensus %.3g", r->consensus_distance);
}

Test(peer_sim, loss_conserves_mass)
{
    sim_result r;
    averaging_under(0.2, 0, 0, &r);
    cr_assert_gt(r.messages_lost, 10);
    sim_result_free(&r);
}

Test(peer_sim, duplication_changes_nothing)
{
    sim_result a, b;
    averaging_under(0, 0, 0, &a);
    averaging_under(0, 0.5, 0, &b);
    cr_assert_gt(b.messages_duplicated, 10);
    cr_assert_eq(memcmp(a.average_model, b.average_model, a.parameters * sizeof(float)), 0);
    cr_assert_eq(a.consensus_distance, b.consensus_distance, "bit for bit the same run");
    sim_result_free(&a), sim_result_free(&b);
}

Test(peer_sim, reordering_conserves_and_converges)
{
    sim_result r;
    averaging_under(0, 0, 0.02, &r); /* jitter 20x the latency: messages overtake each other */
    sim_result_free(&r);
}

Test(peer_sim, sparsity_warmup_starts_dense_and_still_conserves)
{
    cmp_spec spec;
    char err[128];
    cr_assert_eq(cmp_spec_parse(&spec, "topk:0.05", err, sizeof err), 0, "%s", err);
    sim_config c;
    config(&c, "exponential", 8);
    c.averaging_only = 1;
    c.peer.codec = &spec;
    c.peer.train.epochs = 8;
    sim_result plain, warm;
    run(&c, &plain);
    c.peer.codec_warmup = 2;
    run(&c, &warm);
    /* epochs 0 and 1 send 0.05^(1/3) = 37% and 0.05^(2/3) = 14% of the
     * entries; both runs also send a reference whole (bf16) while it lags its
     * model by more than a quarter (peers start far apart here), which
     * narrows the ratio (1.37 measured) */
    cr_assert_gt(warm.bytes_sent, 1.25 * plain.bytes_sent, "%llu vs %llu bytes", (unsigned long long)warm.bytes_sent,
                 (unsigned long long)plain.bytes_sent);
    cr_assert_lt(warm.mass_error_x, 1e-5);
    cr_assert_lt(warm.mass_error_w, 1e-12);
    cr_assert_lt(warm.consensus_distance, 1e-8, "%.3g", warm.consensus_distance); /* relative error 1e-4 */
    sim_result_free(&plain), sim_result_free(&warm);
}

Test(peer_sim, stochastic_codec_is_reproducible_by_seed)
{
    cmp_spec spec;
    char err[128];
    cr_assert_eq(cmp_spec_parse(&spec, "qsgd:16", err, sizeof err), 0, "%s", err);
    sim_config c;
    config(&c, "exponential", 4);
    c.peer.codec = &spec;
    c.peer.train.epochs = 1;
    sim_result a, b, d;
    run(&c, &a);
    run(&c, &b);
    cr_assert_eq(memcmp(a.average_model, b.average_model, a.parameters * sizeof(float)), 0);
    cr_assert_eq(a.bytes_sent, b.bytes_sent, "qsgd's sizes depend on its random levels: same seed, same bytes");
    c.peer.train.seed = 9;
    run(&c, &d);
    cr_assert_neq(memcmp(a.average_model, d.average_model, a.parameters * sizeof(float)), 0);
    sim_result_free(&a), sim_result_free(&b), sim_result_free(&d);
}

/* Churn: peers crash and resume at random (about 10% down), as new
 * incarnations with the state they had. The run finishes, every comeback
 * renormalises its weight (gsp_resume), so the live peers' total weight stays
 * within [0.5, 2] per peer, and the average model stays close to the run
 * without churn. */
Test(peer_sim, churn_finishes_with_bounded_weight_and_close_accuracy)
{
    sim_config c;
    config(&c, "exponential", 32);
    c.peer.train.model = "mlp";
    c.peer.train.epochs = 3;
    train_opts_finish(&c.peer.train);
    c.peer.dead_timeout = 0.01;
    sim_result calm, churn;
    run(&c, &calm);
    c.churn = 0.1, c.churn_down = 0.02;
    run(&c, &churn);
    cr_assert_eq(calm.crashes, 0);
    cr_assert_gt(churn.resumes, 10, "peers crashed and came back: %ld", churn.resumes);
    cr_assert_eq(churn.crashes, churn.resumes + (32 - churn.peers_live));
    cr_assert(churn.weight_total >= 0.5 * churn.peers_live && churn.weight_total <= 2.0 * churn.peers_live,
              "total weight %.3f for %d live peers", churn.weight_total, churn.peers_live);
    cr_assert_gt(churn.test_accuracy, calm.test_accuracy - 0.02, "%.4f with churn, %.4f without",
                 churn.test_accuracy, calm.test_accuracy);
    sim_result_free(&calm), sim_result_free(&churn);
}

/* A stopped peer (SIGSTOP) is routed around as silent and comes back by
 * itself: nobody crashes, nothing is resumed, the run finishes. */
Test(peer_sim, a_stopped_peer_is_routed_around_and_comes_back)
{
    sim_config c;
    config(&c, "exponential", 8);
    c.compute_seconds = 0.001;
    c.peer.dead_timeout = 0.05;
    c.stop[c.n_stop++] = (sim_fault){.peer = 3, .round = 40, .seconds = 0.5};
    sim_result r;
    run(&c, &r);
    cr_assert_eq(r.stops, 1);
    cr_assert_eq(r.crashes + r.resumes, 0);
    cr_assert_gt(r.neighbours_lost, 0, "its neighbours noticed the silence");
    cr_assert_eq(r.peers_live, 8);
    long rounds_per_epoch = (train.n + 63) / 64;
    cr_assert_eq(r.rounds, rounds_per_epoch * c.peer.train.epochs);
    sim_result_free(&r);
}

/* A partition (gossip/GUARANTEES.md, "Partitions"): the links between
 * {2, 3} and {0, 1} of the exponential graph of 4 go down for a quarter of
 * the run. Each side is a cluster of its own once the other is routed around
 * (their shares reach each other by routing around), so rounds go on while
 * cut off: the run takes about a dead timeout longer than without the cut,
 * not the whole cut. After the heal the sides merge with no lost mass (the
 * reconnected edges' SYNCs carry what was in flight), the peers agree, and
 * the average model is close to the run without the cut. */
Test(peer_sim, each_side_of_a_partition_trains_on_and_the_sides_merge_after_the_heal)
{
    sim_config c;
    config(&c, "exponential", 4);
    c.compute_seconds = 0.002;
    c.peer.train.epochs = 8;
    sim_result whole, cut;
    run(&c, &whole);
    const double T = whole.simulated_seconds;
    c.peer.dead_timeout = T / 40; /* the cut is ten dead timeouts: its connections close */
    uint8_t side[4] = {0, 0, 1, 1};
    c.cut[c.n_cut++] = (sim_cut){.side = side, .at = T / 4, .seconds = T / 4};
    run(&c, &cut);
    cr_assert_eq(cut.cuts, 1);
    cr_assert_eq(cut.messages_lost, 0, "no configured loss: nothing counted lost");
    cr_assert_eq(cut.peers_live, 4);
    cr_assert_float_eq(cut.weight_total, 4.0, 1e-6, "every unit of weight is back after the heal (%.9g held, %.3g in "
                       "flight)", cut.weight_total, cut.weight_in_flight);
    cr_assert_float_eq(cut.weight_in_flight, 0.0, 1e-9);
    cr_assert_lt(cut.simulated_seconds, T + T / 8,
                 "the sides trained on while cut off: %.3f s against %.3f s without the cut (cut %.3f s)",
                 cut.simulated_seconds, T, T / 4);
    cr_assert_lt(cut.consensus_distance, 1e-6, "the sides merged");
    cr_log_info("partition: %.2f%% with the cut, %.2f%% without; %.3f s against %.3f s", 100 * cut.test_accuracy,
                100 * whole.test_accuracy, cut.simulated_seconds, T);
    cr_assert_geq(cut.test_accuracy, whole.test_accuracy - 0.01, "%.2f%% with the cut, %.2f%% without",
                  100 * cut.test_accuracy, 100 * whole.test_accuracy);
    sim_result_free(&whole);
    sim_result_free(&cut);
}

/* Peers 2 and 3 each cut off alone (their hosts' links down) while 0 and 1
 * train on together: the lone ones wait, then go on alone, and at the heal
 * the sides are hundreds of rounds apart. A peer whose in-neighbours are all
 * ahead holds their messages (tau = 0 takes only earlier rounds') while it
 * gives half its weight every round: its w fell below what the edges'
 * running totals resolve, reached 0, and z = x / 0 turned every peer to NaN
 * (10.00% on real processes and here, `sgp sim --peers 4 --topology
 * topologies/exp4.topo --epochs 10 --model mlp:32 --codec none
 * --compute-time 0.002 --partition 2@1:3 --partition 3@1:3`). */






Test(peer_sim, peers_cut_off_alone_and_healed_keep_their_models)
{
    /* (the whole embedded set: its rounds' pace is what puts the sides far
     * enough apart) */
    nn_dataset all_train = {0}, all_test = {0};
    char err[256];
    cr_assert_eq(nn_data_embedded(&all_train, &all_test, err, sizeof err), 0, "%s", err);
    cmp_spec none;
    cr_assert_eq(cmp_spec_parse(&none, "none", err, sizeof err), 0, "%s", err);
    sim_config c;
    config(&c, "exponential", 4);
    c.peer.codec = &none; /* (sgp peer's default: float32 deltas against the references) */
    c.compute_seconds = 0.002;
    c.peer.train.epochs = 10;
    sim_result whole, cut;
    cr_assert_eq(sim_run(&c, &all_train, &all_test, &whole, err, sizeof err), 0, "%s", err);
    uint8_t alone2[4] = {0, 0, 1, 0}, alone3[4] = {0, 0, 0, 1};
    c.cut[c.n_cut++] = (sim_cut){.side = alone2, .at = 1, .seconds = 3};
    c.cut[c.n_cut++] = (sim_cut){.side = alone3, .at = 1, .seconds = 3};
    cr_assert_eq(sim_run(&c, &all_train, &all_test, &cut, err, sizeof err), 0, "%s", err);
    cr_assert_eq(cut.cuts, 2);
    cr_assert_eq(cut.peers_live, 4);
    cr_assert(isfinite(cut.test_loss), "the average model is finite: loss %g", cut.test_loss);
    cr_assert_float_eq(cut.weight_total, 4.0, 1e-6, "%.9g held, %.3g in flight", cut.weight_total,
                       cut.weight_in_flight);
    cr_assert_lt(cut.consensus_distance, 1e-6, "the peers merged after the heal");
    cr_log_info("cut off alone: %.2f%% (worst peer %.2f%%), %.2f%% without the cuts", 100 * cut.test_accuracy,
                100 * cut.test_accuracy_min, 100 * whole.test_accuracy);
    cr_assert_geq(cut.test_accuracy_min, whole.test_accuracy - 0.05, "worst peer %.2f%% with the cuts, %.2f%% without",
                  100 * cut.test_accuracy_min, 100 * whole.test_accuracy);
    sim_result_free(&whole);
    sim_result_free(&cut);
    nn_dataset_free(&all_train);
    nn_dataset_free(&all_test);
}

/* A peer that leaves on purpose (--leave: the path of sgp peer's SIGTERM
 * without a checkpoint through the engine) sends its round's shares, then
 * all of its weight to its neighbours, then GOODBYE "stopped", and its
 * neighbours route around it at once: no dead timeout is waited, as after
 * a crash at the same round, every invariant holds, and the three that
 * stay hold the run's whole weight (a crash takes the peer's with it). */
Test(peer_sim, a_peer_that_leaves_hands_its_weight_on_and_is_routed_around_at_once)
{
    sim_config c;
    config(&c, "exponential", 4);
    c.compute_seconds = 0.002;
    c.peer.train.epochs = 4;
    c.peer.dead_timeout = 0.1;
    c.check = 1;
    sim_result left, crashed;
    c.leave[c.n_leave++] = (sim_fault){.peer = 2, .round = 40};
    run(&c, &left);
    c.n_leave = 0;
    c.crash[c.n_crash++] = (sim_fault){.peer = 2, .round = 40};
    run(&c, &crashed);
    cr_log_info("leave: %.3f s, %ld lost, %ld late; crash: %.3f s, %ld lost, %ld late", left.simulated_seconds,
                left.neighbours_lost, left.late_marks, crashed.simulated_seconds, crashed.neighbours_lost,
                crashed.late_marks);
    cr_assert_eq(left.leaves, 1);
    cr_assert_eq(left.neighbours_lost, 0, "nobody waited for the dead timeout");
    cr_assert_eq(left.late_marks, 0, "nor for a round deadline");
    cr_assert_gt(crashed.neighbours_lost, 0);
    cr_assert_gt(crashed.late_marks, 0);
    cr_assert_eq(left.rounds, crashed.rounds, "both runs reach the last round");
    cr_assert_lt(left.simulated_seconds, crashed.simulated_seconds, "%.3f s after a leave, %.3f s after a crash",
                 left.simulated_seconds, crashed.simulated_seconds);
    cr_assert_geq(left.test_accuracy, crashed.test_accuracy - 0.02);
    cr_log_info("weight: %.9g held by %d, %.3g in flight after the leave; %.9g held after the crash",
                left.weight_total, left.peers_live, left.weight_in_flight, crashed.weight_total);
    cr_assert_eq(left.peers_live, 3, "the peer that left holds no mass");
    cr_assert_float_eq(left.weight_total + left.weight_in_flight, 4.0, 1e-9, "the run keeps its weight");
    cr_assert_float_eq(left.weight_total, 4.0, 1e-9, "the shares on their way to it went on with its own");
    cr_assert_lt(crashed.weight_total + crashed.weight_in_flight, 3.9, "a crash takes the peer's weight");
    sim_result_free(&left);
    sim_result_free(&crashed);
}

/* Links too slow for what is sent on them: a link holding SIM_LINK_SLOTS
 * frames is busy, and the engine keeps its share for it home; one more
 * frame is refused (engine_unsent), as a networked peer's socket that does
 * not drain. With --check every invariant holds and no weight is lost. */
Test(peer_sim, links_that_do_not_drain_are_busy_refuse_frames_and_lose_nothing)
{
    cmp_spec stc;
    char err[128];
    cr_assert_eq(cmp_spec_parse(&stc, "stc:0.04", err, sizeof err), 0, "%s", err);
    sim_config c;
    config(&c, "exponential", 8);
    c.peer.codec = &stc;
    c.bandwidth = 2e6 / 8; /* 2 Mbit/s */
    c.check = 1;
    sim_result r;
    run(&c, &r);
    cr_log_info("2 Mbit/s: %ld frames refused, %ld shares kept home, %.2f%%", r.frames_refused, r.busy_kept,
                100 * r.test_accuracy);
    cr_assert_gt(r.frames_refused, 0, "the links filled up");
    cr_assert_gt(r.busy_kept, 0, "and busy links kept their shares home");
    cr_assert_float_eq(r.weight_total, 8.0, 1e-6, "%.9g held, %.3g in flight", r.weight_total, r.weight_in_flight);
    cr_assert_gt(r.test_accuracy, 0.5);
    sim_result_free(&r);
}

/* ---- local steps between exchanges (--local-steps) and the outer optimizer
 * (--outer) in the round driver: the plan covers every epoch's steps, mass
 * and consensus hold with the gradient off, peers crash and rejoin
 * (gossip/GUARANTEES.md, "Local steps") ---------------------------------- */

static cmp_spec stc10;
static outer_opts nesterov_half;

static void load_local(void)
{
    load();
    char err[256];
    cr_assert_eq(cmp_spec_parse(&stc10, "stc:0.1", err, sizeof err), 0, "%s", err);
    cr_assert_eq(outer_opts_parse(&nesterov_half, "nesterov:0.5:0.5", err, sizeof err), 0, "%s", err);
}

TestSuite(peer_sim_local, .init = load_local, .fini = unload, .timeout = 120);

Test(peer_sim_local, every_epoch_takes_the_steps_of_one_epoch_of_sgp_train)
{
    train_opts o;
    train_opts_defaults(&o);
    o.epochs = 3;
    for (int h = 1; h <= 40; h++) {
        round_plan p;
        round_plan_make(&p, &o, 2000, 8, h); /* 32 steps an epoch */
        cr_assert_eq(p.steps_per_epoch, 32);
        cr_assert_eq(p.rounds_per_epoch, (32 + h - 1) / h);
        long next = 0;
        for (long r = 0; r < p.total_rounds; r++) {
            long first;
            int n = round_plan_steps(&p, r, &first);
            cr_assert_eq(first, next, "H %d round %ld starts at step %ld, not %ld", h, r, first, next);
            cr_assert(n >= 1 && n <= h);
            next += n;
            if ((r + 1) % p.rounds_per_epoch == 0)
                cr_assert_eq(next % 32, 0, "H %d: an epoch ends on a round", h);
        }
        cr_assert_eq(next, 3 * 32);
        long first;
        cr_assert_eq(round_plan_steps(&p, p.total_rounds, &first), 0);
    }
}

Test(peer_sim_local, local_steps_learn_with_fewer_rounds_and_bytes)
{
    sim_config c;
    config(&c, "exponential", 8);
    c.peer.codec = &stc10;
    sim_result one, three;
    run(&c, &one);
    c.peer.local_steps = 3;
    run(&c, &three);
    cr_assert_eq(one.local_steps, three.local_steps, "the same steps: %ld and %ld", one.local_steps, three.local_steps);
    cr_assert_eq(three.local_steps, 8L * 32 * 2);
    cr_assert_eq(three.rounds, 11L * 2, "ceil(32 / 3) rounds an epoch");
    cr_assert_lt(2 * three.bytes_sent, one.bytes_sent, "%llu vs %llu bytes",
                 (unsigned long long)three.bytes_sent, (unsigned long long)one.bytes_sent);
    /* A short run (64 steps): a third of the exchanges costs some accuracy
     * here (0.80 against 0.86 measured); the full-size frontier is in the
     * README. */
    cr_assert_gt(three.test_accuracy, 0.75, "%.3f", three.test_accuracy);
    cr_assert_gt(three.test_accuracy, one.test_accuracy - 0.1, "%.3f vs %.3f", three.test_accuracy,
                 one.test_accuracy);
    sim_result_free(&one), sim_result_free(&three);
}

Test(peer_sim_local, the_outer_step_keeps_mass_and_consensus_with_the_gradient_off)
{
    sim_config c;
    config(&c, "exponential", 8);
    c.peer.local_steps = 4;
    c.averaging_only = 1; /* peers start apart; the outer step runs on no progress */
    c.peer.codec = &stc10;
    c.peer.outer = &nesterov_half;
    c.peer.train.epochs = 12;
    sim_result r, plain;
    run(&c, &r);
    cr_assert_lt(r.mass_error_w, 1e-12, "w mass changed by %.3g", r.mass_error_w);
    cr_assert_lt(r.mass_error_x, 1e-5, "x mass changed by %.3g", r.mass_error_x);
    /* Random starts are about 2 apart (relative); 96 compressed rounds bring
     * them to 0.017, and the outer step changes that by round-off only. */
    cr_assert_lt(r.consensus_distance, 0.05, "%.3g", r.consensus_distance);
    c.peer.outer = NULL;
    run(&c, &plain);
    cr_assert_float_eq(r.consensus_distance, plain.consensus_distance, 1e-3 * plain.consensus_distance, "%.6g vs %.6g",
                       r.consensus_distance, plain.consensus_distance);
    sim_result_free(&r), sim_result_free(&plain);
}

Test(peer_sim_local, crash_and_rejoin_with_local_steps_and_the_outer_step)
{
    sim_config c;
    config(&c, "exponential", 8);
    c.peer.local_steps = 4;
    c.peer.codec = &stc10;
    c.peer.outer = &nesterov_half;
    c.peer.train.epochs = 3;
    c.crash[c.n_crash++] = (sim_fault){.peer = 3, .round = 4};
    c.rejoin[c.n_rejoin++] = (sim_fault){.peer = 3, .round = 12};
    c.peer.dead_timeout = 0.05;
    sim_result r, clean;
    run(&c, &r);
    c.n_crash = c.n_rejoin = 0;
    run(&c, &clean);
    cr_assert_eq(r.rounds, 8L * 3, "the survivors finish every round");
    cr_assert_eq(r.crashes, 1);
    cr_assert_eq(r.resumes, 1);
    cr_assert_gt(r.test_accuracy, clean.test_accuracy - 0.05, "average model %.3f, without the crash %.3f",
                 r.test_accuracy, clean.test_accuracy);
    cr_assert_gt(r.test_accuracy_min, clean.test_accuracy - 0.08, "the rejoined peer caught up: worst %.3f",
                 r.test_accuracy_min);
    /* A crash loses the shares in flight to it, a comeback renormalises
     * (GUARANTEES.md): the total stays within a factor of the peers'. */
    cr_assert(r.weight_total > 0.5 * 8 && r.weight_total < 2.0 * 8, "total weight %.3f", r.weight_total);
    sim_result_free(&r), sim_result_free(&clean);
}
