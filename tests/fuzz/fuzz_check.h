/* check(ok) for the fuzz targets: a broken invariant is a finding, so say
 * which one, then abort so that libFuzzer saves the input. */
#ifndef TESTS_FUZZ_FUZZ_CHECK_H
#define TESTS_FUZZ_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define check(ok)                                                                                  \
    do {                                                                                           \
        if (!(ok)) {                                                                               \
            fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #ok);             \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#endif
