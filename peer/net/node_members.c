/* The member list on the networked peer (WIRE.md "Members"): what the
 * transport knows of where members listen, and the revocations it holds,
 * told to every neighbour that has not heard the latest version (at its
 * connection, and again when the list changes), and what neighbours tell
 * it, taken in entry by entry and passed on when it is news. */
#include <stdio.h>
#include <stdlib.h>

#include "peer/net/node_state.h"
#include "peer/wire/wire.h"

/* Tell peer the whole list; 0, or -1 when its link took not all of it
 * (busy: the next flush tells it again). */
static int tell(node *n, int peer)
{
    uint8_t buf[WIRE_MEMBERS_BYTES_MAX];
    wire_member m[WIRE_MEMBERS_MAX];
    wire_revocation r[WIRE_REVOKED_MAX];
    int cursor = 0;
    size_t rcursor = 0;
    for (;;) {
        const size_t k = net_roster_entries(&n->net, &cursor, m, WIRE_MEMBERS_MAX);
        const size_t kr = net_roster_revocations(&n->net, &rcursor, r, WIRE_REVOKED_MAX);
        if (!k && !kr)
            return 0;
        const long len = wire_encode_members(buf, sizeof buf, m, k, r, kr);
        if (len < 0 || net_send(&n->net, peer, buf, (size_t)len) < 0)
            return -1;
        n->r->bytes_sent += (uint64_t)len;
    }
}

void node_members_flush(node *n)
{
    const uint64_t v = net_roster_version(&n->net);
    if (!v || !n->members)
        return;
    const gsp_pace *pc = engine_pace(n->e);
    for (int k = 0; k < pc->n_nb; k++) {
        const int q = pc->nb[k].peer;
        if (n->members[q].told < v && net_is_up(&n->net, q) && !net_busy(&n->net, q) && tell(n, q) == 0)
            n->members[q].told = v;
    }
}

void node_members_down(node *n, int peer)
{
    if (n->members)
        n->members[peer].told = 0;
}

/* A refusal's line, at a sender's 1st, 2nd, 4th, 8th, ... (a member that
 * sends nothing but bad entries cannot fill the log). */
static void refused(node *n, int peer, const char *what, const char *why)
{
    const uint64_t k = ++n->members[peer].refused;
    if ((k & (k - 1)) || !n->c->progress)
        return;
    fprintf(n->c->progress, "peer %d: peer %d's member list: %s refused: %s (%llu so far)\n", n->c->id, peer, what, why,
            (unsigned long long)k);
    fflush(n->c->progress);
}

void node_members_in(node *n, int peer, const wire_msg *m)
{
    char why[200];
    if (!n->members)
        return;
    for (uint32_t i = 0; i < m->members.n; i++)
        if (net_learn(&n->net, &m->members.m[i], why, sizeof why) < 0)
            refused(n, peer, "an entry", why);
    for (uint32_t i = 0; i < m->members.n_revoked; i++)
        if (net_learn_revocation(&n->net, m->members.r[i].serial, m->members.r[i].sig, why, sizeof why) < 0)
            refused(n, peer, "a revocation", why);
    node_members_flush(n);
}
