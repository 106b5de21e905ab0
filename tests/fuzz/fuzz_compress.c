/* Fuzz target for every codec's decoder: the first byte picks n (small, so
 * the fuzzer explores payloads, not sizes), the rest is a message. Decoding
 * must return 0 or -EBADMSG and never read or write out of bounds; the sparse
 * decoder (topk, stc, sketch) must refuse the same messages and give the same
 * values. */
#include <stdint.h>
#include <stdlib.h>

#include "compress/cmp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t n = data[0];
    float *dst = malloc((n ? n : 1) * sizeof *dst);
    if (!dst)
        return 0;
    int rc = cmp_decode(data + 1, size - 1, n, dst);
    if (rc != 0 && rc != -74 /* EBADMSG */)
        abort();
    /* The sparse decoder refuses what the dense one does, and agrees on the rest. */
    uint32_t *idx = malloc((n ? n : 1) * sizeof *idx);
    float *val = malloc((n ? n : 1) * sizeof *val);
    if (idx && val) {
        long k = cmp_decode_sparse(data + 1, size - 1, n, idx, val, n);
        if (k >= 0 && rc != 0)
            abort();
        if (k == -74 && rc == 0)
            abort();
        for (long j = 0; k > 0 && j < k; j++)
            if (idx[j] >= n || (j && idx[j] <= idx[j - 1]) || dst[idx[j]] != val[j])
                abort();
    }
    free(idx);
    free(val);
    free(dst);
    return 0;
}
