/* f32 <-> bf16 bits as compress/FORMAT.md ("bf16") defines them: the top 16
 * bits of the f32, rounded to nearest even, a NaN kept a (quiet) NaN. Shared
 * by the codecs that send bf16 values (bf16 itself, sketch's buckets). */
#ifndef COMPRESS_CMP_BF16_H
#define COMPRESS_CMP_BF16_H

#include <stdint.h>
#include <string.h>

/* The bf16 of the f32 whose bits are u. */
static inline uint16_t cmp_bf16_from_bits(uint32_t u)
{
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t nan = (u >> 16) | 0x0040u;
    uint32_t m_nan = -(uint32_t)((u & 0x7fffffffu) > 0x7f800000u);
    return (uint16_t)((nan & m_nan) | (rounded & ~m_nan));
}

static inline uint16_t cmp_bf16_round(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return cmp_bf16_from_bits(u);
}

static inline float cmp_bf16_value(uint32_t b)
{
    uint32_t u = b << 16;
    float v;
    memcpy(&v, &u, sizeof v);
    return v;
}

#endif
