/* The slice of the embedded digits the simulator's tests train on: the
 * first 2,000 training and 500 test samples, which keep a run of a few
 * peers to a second or two. */
#ifndef TESTS_SIM_SLICE_H
#define TESTS_SIM_SLICE_H

#include <criterion/criterion.h>

#include "nn/nn_data.h"

static inline void sim_slice(nn_dataset *train, nn_dataset *test)
{
    char err[256];
    nn_dataset full_train = {0}, full_test = {0};
    cr_assert_eq(nn_data_embedded(&full_train, &full_test, err, sizeof err), 0, "%s", err);
    int idx[2000];
    for (int i = 0; i < 2000; i++)
        idx[i] = i;
    cr_assert_eq(nn_dataset_subset(&full_train, idx, 2000, train), 0);
    cr_assert_eq(nn_dataset_subset(&full_test, idx, 500, test), 0);
    nn_dataset_free(&full_train);
    nn_dataset_free(&full_test);
}

#endif
