/* Whether two MEMBERS messages (peer/wire/wire.h) say the same thing, their
 * byte fields compared by content: the wire tests' and the wire fuzz
 * target's round trips (a message decoded, encoded again and decoded). */
#ifndef TESTS_WIRE_MEMBERS_EQUAL_H
#define TESTS_WIRE_MEMBERS_EQUAL_H

#include <stdint.h>
#include <string.h>

#include "peer/wire/wire.h"

static inline int wire_members_equal(const wire_msg *a, const wire_msg *b)
{
    if (a->members.n != b->members.n || a->members.n_revoked != b->members.n_revoked)
        return 0;
    for (uint32_t i = 0; i < a->members.n; i++) {
        const wire_member *p = &a->members.m[i], *q = &b->members.m[i];
        if (p->id != q->id || p->since != q->since || p->host_len != q->host_len ||
            memcmp(p->host, q->host, p->host_len) || p->port != q->port || p->flags != q->flags ||
            !p->cred != !q->cred || (p->cred && memcmp(p->cred, q->cred, WIRE_CRED_LEN)))
            return 0;
    }
    for (uint32_t i = 0; i < a->members.n_revoked; i++)
        if (a->members.r[i].serial != b->members.r[i].serial ||
            memcmp(a->members.r[i].sig, b->members.r[i].sig, WIRE_SIG_LEN))
            return 0;
    return 1;
}

#endif
