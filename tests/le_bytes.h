/* The wire's little-endian integers read back byte by byte, whatever the
 * host: what the wire tests and the wire fuzz target compare against. */
#ifndef TESTS_LE_BYTES_H
#define TESTS_LE_BYTES_H

#include <stdint.h>

/* The unsigned little-endian integer of `width` (<= 8) bytes at p. */
static inline uint64_t le_bytes(const uint8_t *p, int width)
{
    uint64_t v = 0;
    for (int b = width - 1; b >= 0; b--)
        v = v << 8 | p[b];
    return v;
}

#endif
