/* Inputs for the decoders and parsers under test (bit I/O, codecs, wire
 * messages) in heap blocks of exactly their length, so that AddressSanitizer
 * (make SANITIZER=address test) reports a read of one byte past the end:
 *
 *   uint8_t *m = exact_copy(msg, len);
 *   cr_assert_eq(decode(m, len - 1), -EBADMSG);        // decode: the parser under test
 *   free(m);
 */
#ifndef TESTS_EXACT_COPY_H
#define TESTS_EXACT_COPY_H

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A copy in a block of exactly len bytes: reading one byte more is an ASan error. */
static inline uint8_t *exact_copy(const uint8_t *src, size_t len)
{
    uint8_t *p = malloc(len ? len : 1);
    cr_assert_not_null(p);
    if (len)
        memcpy(p, src, len);
    return p;
}

#endif
