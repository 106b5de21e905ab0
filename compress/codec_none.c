/* none — the values as they are: little-endian IEEE binary32, 4 bytes each.
 *
 * Payload (compress/FORMAT.md, "none"): f32 value[n]. The reference every
 * other codec is measured against, and the codec for runs that must not
 * lose a bit. Any bit pattern is a value (inf and NaN travel as they are),
 * so a decoder can only check the length.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "compress/bitio.h"
#include "compress/cmp.h"

static size_t none_bound(const cmp_spec *s, size_t n)
{
    (void)s;
    return 4 * n;
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define HOST_LE 1
#else
#define HOST_LE 0
#endif

static long none_encode(const cmp_spec *s, const float *x, size_t n, uint64_t seed, void *work, uint8_t *out,
                        size_t cap)
{
    (void)s, (void)seed, (void)work;
    if (cap < 4 * n)
        return -ENOSPC;
    if (HOST_LE) {
        if (n)
            memcpy(out, x, 4 * n);
    } else {
        for (size_t i = 0; i < n; i++)
            cmp_f32_put(out + 4 * i, x[i]);
    }
    return (long)(4 * n);
}

static int none_decode_add(const uint8_t *in, size_t len, size_t n, float alpha, float *dst)
{
    if (len != 4 * n)
        return -EBADMSG;
    for (size_t i = 0; i < n; i++) {
        float v;
        if (HOST_LE)
            memcpy(&v, in + 4 * i, 4);
        else
            v = cmp_f32_get(in + 4 * i);
        dst[i] += alpha * v;
    }
    return 0;
}

const cmp_ops cmp_none = {
    .name = "none",
    .id = 0,
    .usage = "none  uncompressed little-endian f32, 32 bits per value",
    .parse = cmp_parse_no_args,
    .bound = none_bound,
    .work = NULL,
    .encode = none_encode,
    .decode_add = none_decode_add,
    .width = 4,
};
