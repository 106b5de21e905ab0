/* A joiner's credential at the handshake (WIRE.md "Joining"): whether a
 * peer that is not in the cluster file may take the vacant slot it names.
 * The signature, the cluster, the expiry and the revocations are
 * peer/config/credential.c's; this file adds what only the running peer
 * knows: its file's vacant slots, and the key each slot was first taken
 * with. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "peer/config/credential.h"
#include "peer/net/net_impl.h"

int net_admit_joiner(void *ctx, uint32_t id, const uint8_t cred[SEC_CRED_BYTES], uint8_t pk[SEC_KEY_BYTES], char *why,
                     size_t whylen)
{
    net *n = ctx;
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
    return 0;
}
