/* The simulator's event queue: a binary min-heap on (time, insertion order),
 * so events at the same virtual time run in the order they were scheduled and
 * a run is reproducible.
 *
 *   sim_queue q = {0};
 *   sim_queue_push(&q, t, EV_ARRIVE, peer, msg_slot);   // the kinds: peer/sim/sim_engine.h
 *   sim_event e;
 *   while (sim_queue_pop(&q, &e)) ...
 *   sim_queue_free(&q);
 */
#ifndef PEER_SIM_SIM_QUEUE_H
#define PEER_SIM_SIM_QUEUE_H

#include <stddef.h>
#include <stdint.h>

typedef struct sim_event {
    double t;
    uint64_t order;
    int kind;
    int peer;
    long arg;
} sim_event;

typedef struct sim_queue {
    sim_event *heap;
    size_t n, cap;
    uint64_t next_order;
} sim_queue;

int sim_queue_push(sim_queue *q, double t, int kind, int peer, long arg);
/* Removes the earliest event into *e; returns 0 when the queue is empty. */
int sim_queue_pop(sim_queue *q, sim_event *e);
void sim_queue_free(sim_queue *q);

#endif
