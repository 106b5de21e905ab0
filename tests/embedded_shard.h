/* A shard of real data for tests that train a few steps: every stride-th of
 * the first n * stride samples of the embedded training set. */
#ifndef TESTS_EMBEDDED_SHARD_H
#define TESTS_EMBEDDED_SHARD_H

#include <criterion/criterion.h>
#include <stdlib.h>

#include "nn/nn_data.h"

static inline void embedded_shard(nn_dataset *shard, int n, int stride)
{
    nn_dataset train = {0}, test = {0};
    char err[256];
    cr_assert_eq(nn_data_embedded(&train, &test, err, sizeof err), 0, "%s", err);
    int *idx = malloc((size_t)n * sizeof *idx);
    cr_assert(idx);
    for (int i = 0; i < n; i++)
        idx[i] = i * stride;
    cr_assert_eq(nn_dataset_subset(&train, idx, n, shard), 0);
    free(idx);
    nn_dataset_free(&train);
    nn_dataset_free(&test);
}

#endif
