/* The networked peer's log lines: events, rounds, the ledger (node_state.h). */
#include <stdio.h>

#include "peer/core/clock.h"
#include "peer/net/node_state.h"
#include "peer/store/roundlog.h"

void node_event(node *n, const char *what, int peer, const char *detail)
{
    const long round = engine_round(n->e);
    if (n->c->progress) {
        fprintf(n->c->progress, "peer %d: round %ld: %s", n->c->id, round, what);
        if (peer >= 0)
            fprintf(n->c->progress, " %d", peer);
        fprintf(n->c->progress, "%s%s\n", detail ? ": " : "", detail ? detail : "");
        fflush(n->c->progress);
    }
    if (n->c->log) {
        fprintf(n->c->log, "{\"event\": \"%s\", \"peer\": %d, \"round\": %ld, \"t\": %.3f}\n", what, peer, round,
                clock_now() - n->t0);
        fflush(n->c->log);
    }
}

void node_log_epoch(node *n, long epoch, float loss, float acc)
{
    const double mean = n->epoch_steps ? n->epoch_loss / n->epoch_steps : 0.0;
    if (n->c->progress) {
        char test[64];
        if (n->test->text)
            snprintf(test, sizeof test, "val loss %.4f (%.3f bits/byte)", loss, nn_bits_per_byte(loss));
        else
            snprintf(test, sizeof test, "test %6.2f%%", 100 * acc);
        fprintf(n->c->progress, "peer %d  epoch %3ld/%ld  loss %.4f  %s  %.1f MB out  %.1fs\n", n->c->id, epoch,
                n->c->peer.train.epochs, mean, test, n->r->bytes_sent / 1e6, clock_now() - n->t0);
        fflush(n->c->progress);
    }
    n->r->train_loss = (float)mean;
    n->epoch_loss = 0, n->epoch_steps = 0;
}

/* test_accuracy < 0: not evaluated this round. */
void node_log_round(node *n, long round, float test_accuracy)
{
    if (!n->c->log)
        return;
    const gsp_peer *g = engine_gossip(n->e);
    engine_stats st;
    engine_stats_of(n->e, &st);
    const double now = clock_now();
    roundlog_line l = {.round = round,
                       .loss = st.loss,
                       .bytes_out = n->r->bytes_sent,
                       .bytes_in = n->r->bytes_received,
                       .absorbed = st.absorbed,
                       .staleness = g->stats.absorbed ? (double)g->stats.stale_sum / (double)g->stats.absorbed : 0.0,
                       .round_seconds = now - n->round_start,
                       .t = now - n->t0,
                       .w = g->w,
                       .step_s = n->step_seconds,
                       .gossip_s = n->gossip_seconds,
                       .frame_s = n->frame_seconds + n->net.crypto_seconds,
                       .wait_s = st.wait_seconds,
                       .test_accuracy = test_accuracy};
    roundlog_write(n->c->log, &l); /* flushed: the launcher reads it live, and after a kill */
}

/* One JSON line per edge: with every peer's ledger, sum w + sum over edges
 * of (sent - applied) is the total weight, so a run's logs show whether mass
 * was conserved (sgp launch sums them: peer/launch/launch_ledger.h). */
void node_log_ledger(node *n)
{
    FILE *f = n->c->log;
    if (!f)
        return;
    const gsp_peer *g = engine_gossip(n->e);
    fprintf(f,
            "{\"ledger\": \"peer\", \"id\": %d, \"incarnation\": %llu, \"w\": %.17g, \"round\": %ld, "
            "\"w_adopted\": %.17g}\n",
            g->id, (unsigned long long)g->incarnation, g->w, g->round, g->stats.w_adopted);
    for (int k = 0; k < g->n_out; k++)
        fprintf(f, "{\"ledger\": \"out\", \"to\": %d, \"seq\": %llu, \"w_total\": %.17g}\n", g->out[k].peer,
                (unsigned long long)g->out[k].seq, g->out[k].w);
    for (int k = 0; k < g->n_in; k++)
        fprintf(f, "{\"ledger\": \"in\", \"from\": %d, \"incarnation\": %llu, \"seq\": %llu, \"w_total\": %.17g}\n",
                g->in[k].peer, (unsigned long long)g->in[k].incarnation, (unsigned long long)g->in[k].seq, g->in[k].w);
    fflush(f);
}

void node_log_memory(node *n, const mem_parts *m)
{
    if (!n->c->log)
        return;
    fprintf(n->c->log,
            "{\"memory\": \"peer\", \"model\": %zu, \"gossip\": %zu, \"codec\": %zu, \"in_flight\": %zu, "
            "\"data\": %zu, \"runtime\": %zu, \"rss\": %zu, \"peak_rss\": %zu}\n",
            m->model, m->gossip, m->codec, m->in_flight, m->data, m->runtime, m->rss, m->peak_rss);
    fflush(n->c->log);
}

void node_log_resume(node *n, double w_checkpoint)
{
    if (n->c->log) {
        fprintf(n->c->log, "{\"ledger\": \"resume\", \"w_checkpoint\": %.17g, \"w\": %.17g}\n", w_checkpoint,
                engine_gossip(n->e)->w);
        fflush(n->c->log);
    }
}
