/* A joiner's credential: may it take the slot (at the handshake, WIRE.md
 * "Joining", and in an entry of a member list, "Members"), and the
 * revocations that say it may not. The signature, the cluster, the expiry
 * and the revocation's signature are peer/config/credential.c's; this file
 * adds what only the running peer knows: its file's vacant slots, the key
 * each slot was first taken with, the revocations it has heard of. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "peer/config/credential.h"
#include "peer/net/net_impl.h"

#define NET_REVOKED_MAX 4096 /* revocations a peer keeps: beyond, new ones are refused (and logged) */

int net_check_credential(net *n, uint32_t id, const uint8_t cred[SEC_CRED_BYTES], uint8_t pk[SEC_KEY_BYTES],
                         uint64_t *serial, char *why, size_t whylen)
{
    const cluster *c = n->c;
    if (id >= (uint32_t)c->n_peers || !c->peers[id].vacant) {
        snprintf(why, whylen, "slot %u is not a vacant slot of this cluster file", (unsigned)id);
        return -EPERM;
    }
    credential k;
    if (credential_from_wire(&k, cred, c->name, (long)id) < 0) {
        snprintf(why, whylen, "a credential with unknown flags");
        return -EPERM;
    }
    int rc = credential_check(&k, c->admit_pk, c->name, (int64_t)time(NULL), why, whylen);
    if (rc == 0)
        rc = credential_revoked(&k, n->revoked, n->n_revoked, why, whylen);
    if (rc < 0)
        return rc;
    /* One key a slot: a second key for a slot taken would let two
     * processes pass for one peer (the first one's key may come back: a
     * restart, a replacement on another address). */
    static const uint8_t none[SEC_KEY_BYTES];
    if (memcmp(n->slot_pk[id], none, SEC_KEY_BYTES) && memcmp(n->slot_pk[id], k.key, SEC_KEY_BYTES)) {
        snprintf(why, whylen, "slot %u was taken with another key", (unsigned)id);
        return -EPERM;
    }
    memcpy(n->slot_pk[id], k.key, SEC_KEY_BYTES);
    memcpy(pk, k.key, SEC_KEY_BYTES);
    *serial = k.serial;
    return 0;
}

int net_admit_joiner(void *ctx, uint32_t id, const uint8_t cred[SEC_CRED_BYTES], uint8_t pk[SEC_KEY_BYTES], char *why,
                     size_t whylen)
{
    net *n = ctx;
    uint64_t serial;
    int rc = net_check_credential(n, id, cred, pk, &serial, why, whylen);
    if (rc == 0)
        n->peers[id].serial = serial, n->peers[id].admitted = 1;
    return rc;
}

int net_lookup(void *ctx, uint32_t id, uint8_t pk[SEC_KEY_BYTES])
{
    const net *n = ctx;
    static const uint8_t none[SEC_KEY_BYTES];
    if (id < (uint32_t)n->c->n_peers && n->c->peers[id].vacant) { /* a joiner's key, once admitted or announced */
        if (!memcmp(n->slot_pk[id], none, SEC_KEY_BYTES))
            return -ENOENT;
        memcpy(pk, n->slot_pk[id], SEC_KEY_BYTES);
        return 0;
    }
    return cluster_pubkey_lookup((void *)n->c, id, pk);
}

int net_is_revoked(const net *n, uint64_t serial)
{
    for (size_t i = 0; i < n->n_revoked; i++)
        if (n->revoked[i] == serial)
            return 1;
    return 0;
}

/* Keep a checked revocation; 1, or -ENOSPC when full. */
static int keep(net *n, uint64_t serial, const uint8_t sig[CREDENTIAL_SIG_BYTES])
{
    if (n->n_revoked == n->cap_revoked) {
        size_t cap = n->cap_revoked ? 2 * n->cap_revoked : 16;
        if (cap > NET_REVOKED_MAX)
            return -ENOSPC;
        uint64_t *s = realloc(n->revoked, cap * sizeof *s);
        if (s)
            n->revoked = s;
        uint8_t(*g)[CREDENTIAL_SIG_BYTES] = s ? realloc(n->revoked_sig, cap * sizeof *g) : NULL;
        if (!g)
            return -ENOMEM;
        n->revoked_sig = g;
        n->cap_revoked = cap;
    }
    n->revoked[n->n_revoked] = serial;
    memcpy(n->revoked_sig[n->n_revoked], sig, CREDENTIAL_SIG_BYTES);
    n->n_revoked++;
    n->roster_version++;
    return 1;
}

int net_set_revoked(net *n, const revocation *r, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        int rc = net_is_revoked(n, r[i].serial) ? 0 : keep(n, r[i].serial, r[i].sig);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int net_learn_revocation(net *n, uint64_t serial, const uint8_t sig[CREDENTIAL_SIG_BYTES], char *why, size_t whylen)
{
    if (net_is_revoked(n, serial))
        return 0;
    revocation r = {.serial = serial};
    snprintf(r.cluster, sizeof r.cluster, "%s", n->c->name);
    memcpy(r.sig, sig, CREDENTIAL_SIG_BYTES);
    if (!n->c->has_admit) {
        snprintf(why, whylen, "a revocation, but this cluster admits no one");
        return -EPERM;
    }
    int rc = revocation_check(&r, n->c->admit_pk, n->c->name, why, whylen);
    if (rc < 0)
        return rc;
    if ((rc = keep(n, serial, sig)) < 0) {
        snprintf(why, whylen, rc == -ENOSPC ? "more than %d revocations" : "out of memory", NET_REVOKED_MAX);
        return rc;
    }
    net_log(n, "credential serial %llu revoked", (unsigned long long)serial);
    /* A joiner up with it now goes, and its handshakes are refused from now on. */
    for (int id = 0; id < n->c->n_peers; id++) {
        net_peer *p = &n->peers[id];
        const int announced = p->m && p->m->has_cred && p->m->serial == serial;
        if ((p->admitted && p->serial == serial) || announced) {
            p->admitted = 0;
            if (p->up)
                net_drop(n, id, "its credential was revoked");
        }
    }
    return 1;
}

size_t net_roster_revocations(const net *n, size_t *cursor, wire_revocation *out, size_t max)
{
    size_t k = 0;
    for (; *cursor < n->n_revoked && k < max; ++*cursor)
        out[k++] = (wire_revocation){.serial = n->revoked[*cursor], .sig = n->revoked_sig[*cursor]};
    return k;
}
