/* Shares refused at the door (engine_push: more waiting than a neighbour
 * ahead sends, a round too far ahead) and asking for them again. A sender's
 * next message normally shows the gap (its seq does not follow, and the
 * absorb NACKs it), but a sender that sends nothing more (it finished, or
 * it waits for this peer) never shows it: its last shares stay in flight
 * for good. So the receiver remembers the highest seq it refused and, once
 * nothing of that sender waits in its inbox, asks for the rest itself (a
 * NACK from what it holds, answered by a SYNC); a peer that has done its
 * rounds does not finish while such an answer is due from a connected
 * in-neighbour (within its linger limit). */
#include <math.h>

#include "peer/core/engine_state.h"

void engine_gap_note(engine *e, const gsp_msg *m)
{
    const int q = m->src;
    if (q < 0 || q >= e->n_peers)
        return;
    if (m->incarnation != e->gap_incarnation[q])
        e->gap_incarnation[q] = m->incarnation, e->gap_seq[q] = 0;
    if (!e->gap_seq[q]) /* (a new gap is asked for at once) */
        e->gap_asked_at[q] = -INFINITY;
    if (m->seq > e->gap_seq[q])
        e->gap_seq[q] = m->seq;
}

/* What q's current incarnation has sent that this peer neither holds nor
 * has waiting: 0 when nothing is missing (or q restarted since: its new
 * seqs start again, and its first message sets the edge up). */
static uint64_t missing_from(const engine *e, int q)
{
    if (!e->gap_seq[q] || (e->ack_incarnation[q] && e->ack_incarnation[q] != e->gap_incarnation[q]))
        return 0;
    return round_held(&e->rp, q, e->gap_incarnation[q]) < e->gap_seq[q] ? e->gap_seq[q] : 0;
}

void engine_gap_ask(engine *e, double now)
{
    const gsp_pace *pc = &e->rp.pace;
    for (int k = 0; k < pc->n_nb; k++) {
        const int q = pc->nb[k].peer;
        if (!e->gap_seq[q])
            continue;
        if (!missing_from(e, q)) {
            e->gap_seq[q] = 0;
            continue;
        }
        /* (once a heartbeat interval: a lost NACK or SYNC is asked again) */
        if (!pc->nb[k].connected || round_held_from(&e->rp, q) > 0 ||
            now - e->gap_asked_at[q] < gsp_pace_heartbeat(&pc->c))
            continue;
        const gsp_msg of = {.src = q};
        engine_queue(e, (engine_send){.kind = ENGINE_NACK, .peer = q, .seq = gsp_nack_seq(&e->rp.g, &of)}, now);
        e->gap_asked_at[q] = now;
    }
}

int engine_gap_open(const engine *e)
{
    const gsp_pace *pc = &e->rp.pace;
    for (int k = 0; k < pc->n_nb; k++)
        if (pc->nb[k].connected && missing_from(e, pc->nb[k].peer))
            return 1;
    return 0;
}
