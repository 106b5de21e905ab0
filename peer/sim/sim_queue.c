/* Binary heap of simulator events. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "peer/sim/sim_queue.h"

static int before(const sim_event *a, const sim_event *b)
{
    return a->t < b->t || (a->t == b->t && a->order < b->order);
}

int sim_queue_push(sim_queue *q, double t, int kind, int peer, long arg)
{
    if (q->n == q->cap) {
        size_t nc = q->cap ? 2 * q->cap : 256;
        sim_event *h = realloc(q->heap, nc * sizeof *h);
        if (!h)
            return -ENOMEM;
        q->heap = h, q->cap = nc;
    }
    size_t i = q->n++;
    sim_event e = {.t = t, .order = q->next_order++, .kind = kind, .peer = peer, .arg = arg};
    while (i > 0 && before(&e, &q->heap[(i - 1) / 2])) {
        q->heap[i] = q->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    q->heap[i] = e;
    return 0;
}

int sim_queue_pop(sim_queue *q, sim_event *out)
{
    if (q->n == 0)
        return 0;
    *out = q->heap[0];
    sim_event last = q->heap[--q->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= q->n)
            break;
        if (c + 1 < q->n && before(&q->heap[c + 1], &q->heap[c]))
            c++;
        if (!before(&q->heap[c], &last))
            break;
        q->heap[i] = q->heap[c];
        i = c;
    }
    if (q->n)
        q->heap[i] = last;
    return 1;
}

void sim_queue_free(sim_queue *q)
{
    if (!q)
        return;
    free(q->heap);
    memset(q, 0, sizeof *q);
}
