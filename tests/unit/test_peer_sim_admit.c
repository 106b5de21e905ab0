/* Elastic membership in the simulator (sgp sim --admit, and sgp dst's
 * admissions and replacements): a slot vacant from the start is routed
 * around from round 0, and a host admitted to it pulls a neighbour's model
 * and enters with one unit of weight, through the same engine as sgp peer
 * --credential; bad schedules are refused with a reason. */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peer/sim/sim.h"
#include "peer/sim/sim_dst.h"
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

TestSuite(peer_sim_admit, .init = load, .fini = unload, .timeout = 120);

/* 8 peers on the exponential graph, 2 epochs of 32 rounds, every invariant
 * checked after every event (an admission must add exactly one unit). */
static void config(sim_config *c)
{
    parse_error e;
    topo_free(&t);
    cr_assert_eq(topo_generate(&t, "exponential", 8, NULL, &e), 0, "%s", e.msg);
    sim_config_defaults(c);
    c->peer.n_peers = 8;
    c->peer.topology = &t;
    c->peer.train.model = "mlp:32";
    c->peer.train.epochs = 2;
    c->peer.train.progress = 0;
    train_opts_finish(&c->peer.train);
    c->compute_seconds = 0.002;
    c->peer.dead_timeout = 0.1;
    c->check = 1;
}

static void run(const sim_config *c, sim_result *r)
{
    char err[512];
    cr_assert_eq(sim_run(c, &train, &test, r, err, sizeof err), 0, "%s", err);
}

/* ||z_i - avg|| / ||avg|| for peer i's final model. */
static double apart(const sim_result *r, int i)
{
    double d = 0, norm = 0;
    for (size_t k = 0; k < r->parameters; k++) {
        const double a = r->average_model[k], z = r->peer_models[(size_t)i * r->parameters + k];
        d += (z - a) * (z - a), norm += a * a;
    }
    return sqrt(d / norm);
}

/* Peer 3's slot is vacant until the run's round 20, then a host takes it:
 * it pulls a neighbour's model (MODEL_REQUEST / MODEL, as --join), enters
 * with one unit of weight, and ends with the others' model; the run's
 * weight is then the 7 founders' plus its unit, exactly (--check held the
 * admission to +1 at the event). */
Test(peer_sim_admit, an_admitted_peer_pulls_a_model_and_enters_with_one_unit_of_weight)
{
    sim_config c;
    config(&c);
    c.keep_peer_models = 1;
    c.admit[c.n_admit++] = (sim_fault){.peer = 3, .round = 20};
    sim_result r;
    run(&c, &r);
    cr_log_info("admitted: %.9g held, %.3g in flight, %ld local steps, peer 3 %.2e from the average, %.2f%% min %.2f%%",
                r.weight_total, r.weight_in_flight, r.local_steps, apart(&r, 3), 100 * r.test_accuracy,
                100 * r.test_accuracy_min);
    cr_assert_eq(r.admits, 1);
    cr_assert_eq(r.slots_vacant, 0);
    cr_assert_eq(r.peers_live, 8, "the admitted peer counts once it holds its slot");
    cr_assert_eq(r.crashes + r.resumes, 0, "an admission is neither a crash nor a comeback");
    cr_assert_float_eq(r.weight_total + r.weight_in_flight, 8.0, 1e-9, "7 founders and one admitted unit");
    cr_assert_leq(r.local_steps, 8 * r.rounds - 20, "no steps in the vacant slot before round 20");
    cr_assert_lt(apart(&r, 3), 1e-3, "it took the run's model and averaged in");
    cr_assert_geq(r.test_accuracy_min, r.test_accuracy - 0.01);
    sim_result_free(&r);
}

/* Until it is taken, every member routes around a vacant slot from round
 * 0, as sgp peer does with a cluster file's vacant slots: no round waits
 * for it (no late mark, no neighbour lost to the dead timeout), so the run
 * takes about the time of a run without the slot's absence, where a slot
 * that was waited for would cost the round-0 barrier and a dead timeout. */
Test(peer_sim_admit, a_vacant_slot_is_routed_around_from_round_0)
{
    sim_config c;
    config(&c);
    sim_result all, vacant;
    run(&c, &all);
    c.admit[c.n_admit++] = (sim_fault){.peer = 5, .round = 50};
    run(&c, &vacant);
    cr_log_info("all there: %.3f s; slot 5 vacant to round 50: %.3f s, %ld late marks, %ld neighbours lost",
                all.simulated_seconds, vacant.simulated_seconds, vacant.late_marks, vacant.neighbours_lost);
    cr_assert_eq(vacant.neighbours_lost, 0, "nobody waited for the dead timeout");
    cr_assert_eq(vacant.late_marks, 0, "nor for a round deadline");
    cr_assert_lt(vacant.simulated_seconds, 1.2 * all.simulated_seconds);
    cr_assert_lt(vacant.simulated_seconds, all.simulated_seconds + c.peer.dead_timeout);
    cr_assert_eq(vacant.rounds, all.rounds);
    cr_assert_float_eq(vacant.weight_total + vacant.weight_in_flight, 8.0, 1e-9);
    sim_result_free(&all);
    sim_result_free(&vacant);
}

/* gossip/GUARANTEES.md, "Membership": topologies are functions of the slot
 * set and absent members (vacant, left, dead) are routed around, so that
 * peers whose views of the membership differ for a while lose no mass. Two
 * hosts admitted at different rounds (one at round 0, beside the founders)
 * and a founder that leaves between them: every view change in flight at
 * once, and the run ends with exactly its founders' weight plus the two
 * admitted units (held, or in flight), every peer's model with the others'. */
Test(peer_sim_admit, two_admissions_and_a_leave_keep_the_weight_exact_and_the_models_together)
{
    sim_config c;
    config(&c);
    c.keep_peer_models = 1;
    c.admit[c.n_admit++] = (sim_fault){.peer = 3, .round = 0};
    c.admit[c.n_admit++] = (sim_fault){.peer = 6, .round = 40};
    c.leave[c.n_leave++] = (sim_fault){.peer = 1, .round = 25};
    sim_result r;
    run(&c, &r);
    cr_log_info("%.9g held by %d, %.3g in flight; peers 3 and 6 %.2e and %.2e from the average; %.2f%% (min %.2f%%)",
                r.weight_total, r.peers_live, r.weight_in_flight, apart(&r, 3), apart(&r, 6), 100 * r.test_accuracy,
                100 * r.test_accuracy_min);
    cr_assert_eq(r.admits, 2);
    cr_assert_eq(r.leaves, 1);
    cr_assert_eq(r.peers_live, 7, "6 founders and 2 admitted, less the one that left");
    cr_assert_float_eq(r.weight_total + r.weight_in_flight, 6.0 + 2.0, 1e-9, "founders + admitted, exactly");
    cr_assert_lt(apart(&r, 3), 1e-3);
    cr_assert_lt(apart(&r, 6), 1e-3);
    cr_assert_geq(r.test_accuracy_min, r.test_accuracy - 0.01);
    cr_assert_gt(r.test_accuracy, 0.8);
    sim_result_free(&r);
}

/* sim_run refuses schedules that cannot happen, saying why (sgp sim prints
 * the same reasons before it loads any data: sim_config_check). */
static void refused(sim_config *c, const char *why)
{
    char err[512] = "";
    sim_result r;
    cr_assert_eq(sim_run(c, &train, &test, &r, err, sizeof err), -EINVAL, "expected a refusal: %s", why);
    cr_assert(strstr(err, why), "'%s' does not say '%s'", err, why);
    config(c);
}

Test(peer_sim_admit, bad_admissions_are_refused_with_a_reason)
{
    sim_config c;
    config(&c);
    c.admit[c.n_admit++] = (sim_fault){.peer = 8, .round = 5};
    refused(&c, "peer 8 does not exist (8 peers: 0 to 7)");
    c.admit[c.n_admit++] = (sim_fault){.peer = 3, .round = 5};
    c.admit[c.n_admit++] = (sim_fault){.peer = 3, .round = 9};
    refused(&c, "peer 3 is admitted twice");
    c.admit[c.n_admit++] = (sim_fault){.peer = 3, .round = 10};
    c.crash[c.n_crash++] = (sim_fault){.peer = 3, .round = 5};
    refused(&c, "peer 3's slot is vacant until the run's round 10");
    c.admit[c.n_admit++] = (sim_fault){.peer = 3, .round = 10};
    c.stop[c.n_stop++] = (sim_fault){.peer = 3, .round = 10, .seconds = 1};
    refused(&c, "--stop 3@10: peer 3's slot is vacant");
    c.admit[c.n_admit++] = (sim_fault){.peer = 3, .round = 10};
    c.leave[c.n_leave++] = (sim_fault){.peer = 3, .round = 2};
    refused(&c, "--leave 3@2");
    c.admit[c.n_admit++] = (sim_fault){.peer = 3, .round = 64};
    refused(&c, "the run has 64 rounds");
    for (int i = 0; i < 8; i++)
        c.admit[c.n_admit++] = (sim_fault){.peer = i, .round = 1};
    refused(&c, "every one of the 8 slots is vacant");
    c.rejoin[c.n_rejoin++] = (sim_fault){.peer = 2, .round = 9, .fresh = 1};
    refused(&c, "peer 2 has no --crash before round 9");
    /* After its admission an admitted peer is a peer like any other: it can
     * crash and come back. */
    c.admit[c.n_admit++] = (sim_fault){.peer = 3, .round = 10};
    c.crash[c.n_crash++] = (sim_fault){.peer = 3, .round = 30};
    c.rejoin[c.n_rejoin++] = (sim_fault){.peer = 3, .round = 40, .fresh = 1};
    sim_result r;
    run(&c, &r);
    cr_assert_eq(r.admits, 1);
    cr_assert_eq(r.crashes, 1);
    cr_assert_eq(r.resumes, 1);
    cr_assert_eq(r.peers_live, 8);
    sim_result_free(&r);
}

/* sgp dst draws admissions (vacant slots taken at a random round) and
 * replacements (a kill -9 and a host without its state in the slot at
 * once) with two peers there from start to end, nothing else happening to
 * an admitted peer but a slow machine or a partition, and prints them as
 * the sgp sim options that replay them; schedules with them keep every
 * invariant (the admission's +1 included). */
Test(peer_sim_admit, dst_schedules_draw_admissions_and_replacements, .timeout = 600)
{
    int admits = 0, replaces = 0;
    uint64_t first_admit = 0, first_replace = 0;
    for (uint64_t seed = 1; seed <= 400; seed++) {
        dst_schedule s;
        dst_draw(&s, seed);
        int away[16] = {0};
        for (int k = 0; k < s.n_faults; k++) {
            const dst_fault *f = &s.fault[k];
            if (f->kind == DST_CRASH || f->kind == DST_REJOIN || f->kind == DST_JOIN || f->kind == DST_LEAVE ||
                f->kind == DST_ADMIT || f->kind == DST_REPLACE)
                away[f->peer] = 1;
            if (f->kind != DST_ADMIT && f->kind != DST_REPLACE)
                continue;
            for (int q = 0; q < s.n_faults; q++)
                cr_assert(q == k || s.fault[q].peer != f->peer || s.fault[q].kind == DST_SLOW ||
                              s.fault[q].kind == DST_PARTITION,
                          "seed %llu: peer %d has another fault", (unsigned long long)seed, f->peer);
            char cmd[2048], opt[64];
            dst_command(&s, cmd, sizeof cmd);
            snprintf(opt, sizeof opt, " --%s %d@%ld", f->kind == DST_ADMIT ? "admit" : "replace", f->peer, f->a);
            cr_assert(strstr(cmd, opt), "seed %llu: '%s' lacks '%s'", (unsigned long long)seed, cmd, opt);
            if (f->kind == DST_ADMIT && !admits++)
                first_admit = seed;
            if (f->kind == DST_REPLACE && !replaces++)
                first_replace = seed;
        }
        int there = 0;
        for (int i = 0; i < s.peers; i++)
            there += !away[i];
        cr_assert_geq(there, 2, "seed %llu: two peers are there from start to end", (unsigned long long)seed);
    }
    cr_log_info("400 schedules: %d admissions (first: seed %llu), %d replacements (first: seed %llu)", admits,
                (unsigned long long)first_admit, replaces, (unsigned long long)first_replace);
    cr_assert_geq(admits, 40);
    cr_assert_geq(replaces, 20);
    char err[256];
    dst_world w;
    cr_assert_eq(dst_world_init(&w, err, sizeof err), 0, "%s", err);
    const uint64_t seeds[] = {first_admit, first_replace};
    for (int k = 0; k < 2; k++) {
        dst_schedule s;
        dst_draw(&s, seeds[k]);
        dst_outcome o;
        char cmd[2048];
        dst_command(&s, cmd, sizeof cmd);
        cr_assert_eq(dst_run(&w, &s, &o), DST_PASSED, "seed %llu: %s\nreplay: %s", (unsigned long long)s.seed, o.why,
                     cmd);
    }
    dst_world_free(&w);
}

/* The time of the first "neighbour reconnected" line of peer `id` about
 * peer `peer` in an --events log, or -1. */
static double reconnected(const char *events, int id, int peer)
{
    char want[96];
    snprintf(want, sizeof want, "{\"id\": %d, \"event\": \"neighbour reconnected\", \"peer\": %d,", id, peer);
    const char *at = strstr(events, want), *t = at ? strstr(at, "\"t\": ") : NULL;
    return t ? atof(t + 5) : -1;
}

/* A host admitted while a partition cuts its slot off from some of its
 * neighbours connects to those on its side at once and joins with one of
 * their models, and across the cut only at the heal (no frame crosses it,
 * so no connection can be made): the run keeps its weight exactly. */
Test(peer_sim_admit, a_host_admitted_during_a_partition_connects_across_it_at_the_heal)
{
    sim_config c;
    parse_error e;
    config(&c);
    topo_free(&t);
    cr_assert_eq(topo_generate(&t, "exponential", 6, NULL, &e), 0, "%s", e.msg);
    c.peer.n_peers = 6;
    c.peer.dead_timeout = 0.02;
    static const uint8_t side[6] = {1, 1, 1, 0, 0, 0};
    c.cut[c.n_cut++] = (sim_cut){.side = side, .at = 0.01, .seconds = 0.1}; /* (long: its connections close) */
    c.admit[c.n_admit++] = (sim_fault){.peer = 1, .round = 20};
    char *events = NULL;
    size_t len = 0;
    c.events = open_memstream(&events, &len);
    cr_assert(c.events);
    sim_result r;
    run(&c, &r);
    fclose(c.events);
    const double heal = 0.01 + 0.1, mine = reconnected(events, 0, 1), across = reconnected(events, 3, 1);
    cr_log_info("peer 0 sees the admitted peer 1 at %.4f s, peer 3 at %.4f s (heal %.4f s); %.9g held, %.3g in flight",
                mine, across, heal, r.weight_total, r.weight_in_flight);
    cr_assert_eq(r.admits, 1);
    cr_assert_eq(r.crashes, 0, "it joined within its side");
    cr_assert(mine > 0.01 && mine < heal, "peer 0, on its side, sees it during the cut: %.4f s", mine);
    cr_assert_geq(across, heal, "peer 3, across the cut, only at the heal: %.4f s", across);
    cr_assert_float_eq(r.weight_total + r.weight_in_flight, 6.0, 1e-9);
    free(events);
    sim_result_free(&r);
}
