/* Private to peer/wire/sec_*.c: the secret block a handshake fills and hands
 * to its session, and the little-endian helpers of WIRE.md's fixed fields. */
#ifndef PEER_WIRE_SEC_SECRET_H
#define PEER_WIRE_SEC_SECRET_H

#include <sodium.h>
#include <stdint.h>

#include "peer/wire/sec.h"

/* Everything secret about one connection, in one sodium_malloc block so that
 * it sits between guard pages, is kept out of swap and core dumps, and is
 * wiped by sodium_free. The handshake hands the same block to the session. */
struct sec_secret {
    crypto_generichash_state h;
    crypto_secretstream_xchacha20poly1305_state tx, rx;
    uint8_t e_sk[SEC_KEY_BYTES];
    uint8_t dh[3][SEC_KEY_BYTES];
    uint8_t k[64]; /* first half keys I -> R, second half R -> I */
};
/* sodium_malloc puts the block against the end of a page, so the block is
 * only as aligned as its size is a multiple of the alignment. */
#define SEC_SECRET_SIZE ((sizeof(struct sec_secret) + 63) & ~(size_t)63)

static inline void sec_put_u16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8); }

static inline void sec_put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> 8 * i);
}

static inline uint16_t sec_get_u16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

static inline uint32_t sec_get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

#endif
