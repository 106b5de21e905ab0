/* Fuzz target for every codec's decoder: the first byte picks n (small, so
 * the fuzzer explores payloads, not sizes), the rest is a message. Decoding
 * must return 0 or -EBADMSG and never read or write out of bounds. */
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
    free(dst);
    return 0;
}
