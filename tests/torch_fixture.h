/* Reading the PyTorch fixtures of tests/fixtures/ (made once by the
 * make_torch_*.py scripts beside them): sections "# NAME COUNT" followed by
 * COUNT numbers, and the normwise error the comparisons use. For the test
 * files that compare nn/ with PyTorch (test_nn_torch.c, test_nn_torch_gpt.c). */
#ifndef TESTS_TORCH_FIXTURE_H
#define TESTS_TORCH_FIXTURE_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The numbers of section `name` of fixture `path` (malloc'd); *n set to their
 * count. A missing file or section fails the test. */
static inline double *torch_fixture_section(const char *path, const char *name, size_t *n)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s missing (run from the repository root)", path);
    char line[256];
    double *v = NULL;
    while (!v && fgets(line, sizeof line, f)) {
        char got[128];
        size_t count;
        if (sscanf(line, "# %127s %zu", got, &count) != 2 || strcmp(got, name) != 0)
            continue;
        v = malloc((count ? count : 1) * sizeof *v);
        cr_assert_not_null(v);
        for (size_t i = 0; i < count; i++)
            cr_assert_eq(fscanf(f, "%lf", &v[i]), 1, "%s: section %s cut short", path, name);
        *n = count;
    }
    fclose(f);
    cr_assert_not_null(v, "%s: no section %s", path, name);
    return v;
}

/* max |a - b| / max |b| */
static inline double torch_normwise(const float *a, const double *b, size_t n)
{
    double d = 0, s = 1e-30;
    for (size_t i = 0; i < n; i++)
        d = fmax(d, fabs(a[i] - b[i])), s = fmax(s, fabs(b[i]));
    return d / s;
}

#endif
