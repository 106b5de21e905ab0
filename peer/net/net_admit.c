/* Room for inbound handshakes (net_impl.h, WIRE.md "Handshake", Limits):
 * how many unauthenticated connections wait, and which one gives way when a
 * room is full. An inbound connection waits in one of two rooms:
 *
 *   open     accepted, no valid first flight naming a member that dials us
 *            yet: the room of its address's kind, members' addresses or
 *            others' (so a flood from elsewhere never touches members' room);
 *   claimed  its first flight is valid and names a lower id we want: that
 *            member's own room, until its AUTH verifies or its 2 s run out.
 *
 * A full room never turns the newcomer away: it closes the oldest connection
 * of the room's busiest address (open) or the member's oldest claim
 * (claimed) instead. A member sends its first flight as soon as it is
 * connected and its AUTH one round trip after our answer, so it gives way
 * only to a flood that fills its room within that round trip; a slower
 * flood only ever closes its own connections. On one host every member's
 * address is 127.0.0.1, which is why refusing the newcomer (as a per-address
 * limit did) let a local flood keep members out for as long as it ran.
 * Memory stays bounded: the open rooms hold 64, the claimed ones
 * NET_CLAIMS_PER_PEER for each lower id we want. */
#include <errno.h>
#include <stdio.h>

#include "peer/net/net_addr.h"
#include "peer/net/net_impl.h"

/* Open connections from addresses that are no member's in the cluster file,
 * and from members' addresses. A member's connection leaves the open room
 * within a round trip, so a member needs only room enough that a flood
 * cannot cycle through all of it that fast. */
#define NET_OPEN_STRANGERS 16
#define NET_OPEN_MEMBER_ADDRS 48
/* Claims of one member: it dials one connection at a time, and a first
 * flight proves nothing (anyone who knows the cluster file can send it), so
 * a newer claim displaces the oldest, which a member answers within a round
 * trip: a forger must send this many claims in that round trip to keep the
 * member out, and each costs this peer four X25519 operations. */
#define NET_CLAIMS_PER_PEER 4

static int in_open_room(const net_conn *o, int stranger) { return o->pending && o->claim < 0 && o->stranger == stranger; }

/* The open connection other than c that gives way in c's room: the oldest
 * one of the address holding most of the room (c included), the oldest
 * such connection when addresses tie. */
static net_conn *open_victim(const net *n, const net_conn *c)
{
    net_conn *victim = NULL;
    int most = 0;
    for (net_conn *o = n->conns; o; o = o->next) {
        if (o == c || !in_open_room(o, c->stranger))
            continue;
        int held = 0;
        for (const net_conn *p = n->conns; p; p = p->next)
            held += in_open_room(p, c->stranger) && net_addr_same_host(&p->from, &o->from);
        if (held > most || (victim && held == most && o->arrival < victim->arrival))
            victim = o, most = held;
    }
    return victim;
}

void net_admit(net_conn *c)
{
    net *n = c->n;
    c->pending = 1;
    n->n_pending++;
    c->claim = -1;
    c->arrival = ++n->arrivals;
    int held = 0;
    for (const net_conn *o = n->conns; o; o = o->next)
        held += in_open_room(o, c->stranger);
    if (held <= (c->stranger ? NET_OPEN_STRANGERS : NET_OPEN_MEMBER_ADDRS))
        return;
    net_conn *victim = open_victim(n, c);
    if (victim)
        net_conn_close(victim, -EBUSY,
                       c->stranger ? "too many handshakes from addresses outside the cluster; its address held the most"
                                   : "too many handshakes from members' addresses; its address held the most");
}

void net_admit_claim(net_conn *c)
{
    net *n = c->n;
    const uint32_t id = c->hs.peer_id; /* (checked by the handshake: a member, a lower id than ours) */
    if (!c->pending || c->claim >= 0 || id == SEC_ANY_PEER || id >= (uint32_t)n->c->n_peers || !n->peers[id].want)
        return;
    c->claim = (int)id;
    c->arrival = ++n->arrivals;
    int held = 0;
    net_conn *oldest = NULL;
    for (net_conn *o = n->conns; o; o = o->next)
        if (o != c && o->pending && o->claim == c->claim) {
            held++;
            if (!oldest || o->arrival < oldest->arrival)
                oldest = o;
        }
    if (held >= NET_CLAIMS_PER_PEER) {
        char why[96];
        snprintf(why, sizeof why, "newer connections claim to be peer %d", c->claim);
        net_conn_close(oldest, -EBUSY, why);
    }
}
