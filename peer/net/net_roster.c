/* Where members listen, as they announced it (WIRE.md "Members"): a
 * replacement on another host, a joiner that listens. An announcement is
 * the member's address with its process's start (`since`): a later start
 * of the same member replaces it. Who dials whom follows from it: a peer
 * that dials in (a joiner, or one listening off the file's address) dials
 * the others; between two of a kind the lower id dials. Credentials and
 * revocations that come with the entries are net_join.c's to check. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "peer/net/net_impl.h"

/* An entry's start may be ahead of our clock by this much (clocks of one
 * cluster agree closer): one further ahead would pin a forged address. */
#define NET_SINCE_AHEAD_US (86400ull * 1000000u)

/* host (len bytes) and port as a cluster entry: IP literals only (host
 * names are not resolved: -EAFNOSUPPORT). */
static int entry_at(cluster_peer *at, const char *host, size_t len, unsigned port)
{
    const char *why;
    if (cluster_peer_at(at, host, len, port, &why) < 0)
        return -EINVAL;
    return at->family == CLUSTER_HOST_NAME ? -EAFNOSUPPORT : 0;
}

const cluster_peer *net_where(const net *n, int id)
{
    const net_member *m = n->peers[id].m;
    if (m)
        return &m->at;
    return n->c->peers[id].vacant ? NULL : &n->c->peers[id];
}

static int dials_in(const net *n, int id)
{
    if (id == n->my_id)
        return n->dial_in;
    const net_member *m = n->peers[id].m;
    return n->c->peers[id].vacant || n->peers[id].dialed_in || (m && (m->flags & WIRE_MEMBER_DIALS_IN));
}

int net_should_dial(const net *n, int id)
{
    const net_member *m = n->peers[id].m;
    if (!net_where(n, id) || (m && m->has_cred && net_is_revoked(n, m->serial)))
        return 0;
    const int me = dials_in(n, n->my_id), they = dials_in(n, id);
    return me != they ? me : id > n->my_id;
}

void net_reconsider(net *n, int id)
{
    net_peer *p = &n->peers[id];
    if (!p->want || n->closing)
        return;
    if (!net_should_dial(n, id)) {
        if (p->retry)
            uv_timer_stop(&p->retry->timer);
        return;
    }
    if (!p->retry) {
        if (!(p->retry = malloc(sizeof *p->retry))) {
            net_log(n, "peer %d: out of memory for its redial timer", id);
            return;
        }
        uv_timer_init(n->loop, &p->retry->timer);
        p->retry->n = n;
        p->retry->peer = id;
    }
    net_dial(n, id);
}

int net_announce_self(net *n, const char *host, unsigned port, uint64_t since)
{
    const cluster_peer *file = &n->c->peers[n->my_id];
    n->dial_in = file->vacant;
    if (!host)
        return 0;
    net_member *m = calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    int r = entry_at(&m->at, host, strlen(host), port);
    if (r < 0) {
        free(m);
        return r;
    }
    /* At its file line again (after a move): announced, so that the others'
     * lists drop the move, but it is dialled as the file says. */
    const int moved = file->vacant || strcmp(m->at.host, file->host) || m->at.port != file->port;
    m->since = since;
    m->flags = moved ? WIRE_MEMBER_DIALS_IN : 0;
    if (n->cred) {
        memcpy(m->cred, n->cred, SEC_CRED_BYTES);
        m->has_cred = 1;
    }
    n->peers[n->my_id].m = m;
    n->dial_in = moved;
    n->roster_version++;
    return 0;
}

int net_learn(net *n, const wire_member *e, char *why, size_t whylen)
{
    const cluster *c = n->c;
    if (e->id >= (uint32_t)c->n_peers) {
        snprintf(why, whylen, "no slot %u in this cluster", (unsigned)e->id);
        return -EPERM;
    }
    const int id = (int)e->id;
    if (id == n->my_id)
        return 0; /* (we know where we listen) */
    struct timespec now;
    timespec_get(&now, TIME_UTC);
    if (e->since > (uint64_t)now.tv_sec * 1000000u + (uint64_t)now.tv_nsec / 1000u + NET_SINCE_AHEAD_US) {
        snprintf(why, whylen, "peer %d's address announced from more than a day ahead", id);
        return -EPERM;
    }
    net_member *m = n->peers[id].m;
    if (m && e->since <= m->since)
        return 0;
    net_member next = {.since = e->since, .flags = e->flags};
    if (entry_at(&next.at, e->host, e->host_len, e->port) < 0) {
        snprintf(why, whylen, "peer %d's address is no IP address and port", id);
        return -EPERM;
    }
    if (c->peers[id].vacant) { /* a joiner: its credential says which key the slot has */
        if (!e->cred) {
            snprintf(why, whylen, "peer %d takes a vacant slot but its entry has no credential", id);
            return -EPERM;
        }
        int r = net_check_credential(n, e->id, e->cred, next.at.pk, &next.serial, why, whylen);
        if (r < 0)
            return r;
        memcpy(next.cred, e->cred, SEC_CRED_BYTES);
        next.has_cred = 1;
    } else if (e->cred) {
        snprintf(why, whylen, "peer %d is in the cluster file but its entry has a credential", id);
        return -EPERM;
    } else {
        memcpy(next.at.pk, c->peers[id].pk, SEC_KEY_BYTES);
    }
    if (!m && !(m = n->peers[id].m = malloc(sizeof *m))) {
        snprintf(why, whylen, "out of memory");
        return -ENOMEM;
    }
    *m = next;
    n->peers[id].dialed_in = (next.flags & WIRE_MEMBER_DIALS_IN) != 0; /* (back at its file line: dialled again) */
    n->roster_version++;
    net_log(n, "peer %d listens at %s%s%s:%u%s", id, m->at.family == CLUSTER_IPV6 ? "[" : "", m->at.host,
            m->at.family == CLUSTER_IPV6 ? "]" : "", (unsigned)m->at.port,
            (m->flags & WIRE_MEMBER_DIALS_IN) ? " (it dials in)" : "");
    net_reconsider(n, id);
    return 1;
}

size_t net_roster_entries(const net *n, int *cursor, wire_member *out, size_t max)
{
    size_t k = 0;
    for (; *cursor < n->c->n_peers && k < max; ++*cursor) {
        const net_member *m = n->peers[*cursor].m;
        if (!m)
            continue;
        out[k++] = (wire_member){.id = (uint32_t)*cursor, .since = m->since, .host = m->at.host,
                                 .host_len = strlen(m->at.host), .port = m->at.port, .flags = m->flags,
                                 .cred = m->has_cred ? m->cred : NULL};
    }
    return k;
}

uint64_t net_roster_version(const net *n) { return n->roster_version; }

void net_roster_free(net *n)
{
    if (n->peers)
        for (int i = 0; i < n->c->n_peers; i++) {
            free(n->peers[i].m);
            n->peers[i].m = NULL;
        }
}
