/* The simulator's links: frames in flight, each link's queue at its
 * bandwidth, latency, and loss, duplication and reordering of shares; a
 * frame's arrival (held or dropped by a partition, lost with a crash, or
 * its peer engine's input). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peer/core/clock.h"
#include "peer/sim/sim_engine.h"

/* ---- frames in flight -------------------------------------------------------- */

static long flight_put(sim *s, int src, const engine_send *t)
{
    if (s->n_free == 0) {
        int nc = s->cap_flight ? 2 * s->cap_flight : 256;
        sim_frame *f = realloc(s->flight, (size_t)nc * sizeof *f);
        if (!f)
            return -ENOMEM;
        s->flight = f;
        int *fs = realloc(s->free_slots, (size_t)nc * sizeof *fs);
        if (!fs)
            return -ENOMEM;
        s->free_slots = fs;
        for (int i = nc - 1; i >= s->cap_flight; i--)
            s->free_slots[s->n_free++] = i;
        s->cap_flight = nc;
    }
    int slot = s->free_slots[--s->n_free];
    sim_frame *f = &s->flight[slot];
    *f = (sim_frame){.s = *t, .src = src};
    int rc = 0;
    if (t->kind == ENGINE_PUSH)
        rc = gsp_msg_copy(&f->s.msg, &t->msg);
    else if (t->kind == ENGINE_MODEL && (f->model = malloc(t->dim * sizeof(float)))) {
        engine_model_values(t, f->model);
        f->s.model = f->model, f->s.scale = 1.0f;
    }
    else if (t->kind == ENGINE_MODEL)
        rc = -ENOMEM;
    if (rc < 0) {
        s->n_free++;
        return rc;
    }
    return slot;
}

void sim_flight_release(sim *s, long slot, int free_payload)
{
    sim_frame *f = &s->flight[slot];
    if (free_payload && f->s.kind == ENGINE_PUSH)
        gsp_msg_free(&f->s.msg);
    free(f->model);
    f->model = NULL;
    s->free_slots[s->n_free++] = (int)slot;
}

size_t sim_frame_bytes(const sim_frame *f)
{
    return f->s.kind == ENGINE_PUSH ? gsp_msg_owned_bytes(&f->s.msg)
           : f->model             ? f->s.dim * sizeof(float)
                                  : 0;
}

/* The departure times of the frames link i -> j holds (NULL: j is no
 * neighbour of i, which sends it nothing). */
static double *held(sim *s, int i, int j)
{
    const int slot = j >= 0 && j < s->c->peer.n_peers ? engine_pace(s->p[i].e)->slot[j] : -1;
    return slot >= 0 ? &s->p[i].held[(size_t)slot * SIM_LINK_SLOTS] : NULL;
}

/* How many frames link i -> j holds now, and a free slot among them. */
static int holding(sim *s, int i, int j, double **free_slot)
{
    double *h = held(s, i, j);
    int k = 0;
    *free_slot = NULL;
    for (int m = 0; h && m < SIM_LINK_SLOTS; m++)
        if (h[m] > s->now)
            k++;
        else
            *free_slot = &h[m];
    return k;
}

void sim_link_states(sim *s, int i)
{
    const gsp_pace *pc = engine_pace(s->p[i].e);
    for (int k = 0; k < pc->n_nb; k++) {
        double *slot;
        const int q = pc->nb[k].peer, n = holding(s, i, q, &slot);
        engine_link_state(s->p[i].e, q, n >= SIM_LINK_SLOTS, n > 0);
    }
}

/* A message of `bytes` on link i -> j: queued behind the link's earlier
 * messages, serialised at the bandwidth; returns when it has left, or -1
 * when the link holds SIM_LINK_SLOTS frames already (refused). */
static double link_send(sim *s, int i, int j, double bytes)
{
    const sim_config *c = s->c;
    double *slot;
    if (holding(s, i, j, &slot) >= SIM_LINK_SLOTS)
        return -1;
    double *free_at = &s->link_free[(size_t)i * c->peer.n_peers + j];
    double start = *free_at > s->now ? *free_at : s->now;
    *free_at = start + (c->bandwidth > 0 ? bytes / c->bandwidth : 0.0);
    if (slot)
        *slot = *free_at;
    return *free_at;
}

static int deliver(sim *s, int src, const engine_send *t, double at)
{
    long slot = flight_put(s, src, t);
    if (slot < 0)
        return (int)slot;
    return sim_queue_push(&s->q, at, EV_ARRIVE, t->peer, slot);
}

/* A frame from peer i over the link model: shares (PUSH) are lost,
 * duplicated and reordered as configured; every other frame arrives. */
int sim_transmit(sim *s, int i, const engine_send *t)
{
    const sim_config *c = s->c;
    const double bytes = t->kind == ENGINE_PUSH        ? (double)gsp_msg_bytes(&t->msg)
                         : t->kind == ENGINE_MODEL     ? (double)t->dim * sizeof(float)
                         : t->kind == ENGINE_HEARTBEAT ? SIM_HEARTBEAT_BYTES
                                                       : 0; /* (small: in order behind what the link holds) */
    const double done = link_send(s, i, t->peer, bytes);
    if (done < 0) { /* the link holds all it can: the transport refuses, as a socket that does not drain */
        s->r->frames_refused++;
        engine_unsent(s->p[i].e, t, -EAGAIN, s->now);
        return 0;
    }
    if (t->kind != ENGINE_PUSH) {
        s->r->bytes_sent += (uint64_t)bytes;
        return deliver(s, i, t, done + c->latency);
    }
    s->r->bytes_sent += (uint64_t)bytes;
    s->r->messages_sent++;
    if (c->loss > 0 && nn_rng_uniform_d(&s->net) < c->loss) {
        s->r->messages_lost++;
        return 0;
    }
    int copies = c->duplicate > 0 && nn_rng_uniform_d(&s->net) < c->duplicate ? 2 : 1;
    s->r->messages_duplicated += (uint64_t)(copies - 1);
    for (int copy = 0; copy < copies; copy++) {
        double jitter = c->jitter > 0 ? c->jitter * nn_rng_uniform_d(&s->net) : 0.0;
        int rc = deliver(s, i, t, done + c->latency + jitter);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* A frame reaches peer j: held or dropped by a partition, lost with a
 * crash, or the engine's input. */
int sim_arrive(sim *s, int j, long slot)
{
    sim_peer *p = &s->p[j];
    sim_frame *f = &s->flight[slot];
    engine *e = p->e;
    const long round = engine_round(e);
    const int q = f->src;
    int k;
    if (!sim_gone(p) && sim_cut_between(s, q, j, &k)) {
        const sim_cut *c = &s->c->cut[k];
        if (c->seconds <= 2 * s->c->peer.dead_timeout) /* the connection holds: TCP delivers it at the heal */
            return sim_queue_push(&s->q, c->at + c->seconds + s->c->latency, EV_ARRIVE, j, slot);
        s->r->messages_cut += f->s.kind == ENGINE_PUSH; /* on a connection the cut closes */
        sim_flight_release(s, slot, 1);
        return 0;
    }
    if (sim_gone(p)) { /* lost with a crash; after the end, to a peer that finished (in flight at the end) */
        if (f->s.kind == ENGINE_PUSH)
            ++*(p->exited ? &s->r->messages_after_end : &s->r->messages_lost);
        sim_flight_release(s, slot, 1);
        return 0;
    }
    int rc = 0;
    const double t0 = clock_now();
    switch (f->s.kind) {
    case ENGINE_PUSH:
        /* A share of a run of q that has since crashed and come back: its
         * edge's totals went with that run, so the weight it brings when it is
         * absorbed is the comeback's (gossip/GUARANTEES.md, "Mass at
         * comebacks"), which --check does not hold to conservation. */
        p->stale_inbox |= f->s.msg.incarnation < engine_gossip(s->p[q].e)->incarnation;
        const double t0 = clock_now();
        rc = engine_push(e, &f->s.msg, s->now); /* the inbox takes over the payload */
        sim_engine_time(s, t0);
        sim_flight_release(s, slot, 0);
        return rc < 0 ? rc : sim_pump(s, j, round);
    case ENGINE_ACK:
        engine_ack(e, q, f->s.seq, s->now);
        break;
    case ENGINE_NACK:
        engine_nack(e, q, f->s.seq, s->now);
        break;
    case ENGINE_HEARTBEAT:
        engine_heartbeat(e, q, f->s.round, s->now);
        break;
    case ENGINE_GOODBYE:
        engine_goodbye(e, q, f->s.done, s->now);
        break;
    case ENGINE_MODEL_REQUEST:
        engine_model_request(e, q, s->now);
        break;
    case ENGINE_MODEL:
        engine_model(e, q, f->s.round, f->model, 1, s->now);
        break;
    case ENGINE_MODEL_SOON:
        engine_model_soon(e, q, s->now);
        break;
    }
    sim_engine_time(s, t0);
    sim_flight_release(s, slot, 1);
    return sim_pump(s, j, round);
}
