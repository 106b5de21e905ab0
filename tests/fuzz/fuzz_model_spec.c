/* libFuzzer target for the model spec language: any bytes must give a model
 * or -EINVAL with a one-line message, never a crash, a leak or an
 * unbounded allocation; a model that builds must run a training step and an
 * inference pass on its input shape with finite outputs.
 *
 *   make fuzz FUZZ_SECONDS=60   (corpus: tests/fuzz/corpus/model_spec)
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_model.h"
#include "tests/fuzz/fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char spec[NN_SPEC_MAX_LEN + 8];
    if (size >= sizeof spec)
        return 0;
    memcpy(spec, data, size);
    spec[size] = '\0';
    char err[512] = "";
    nn_model m;
    /* A small input keeps every model the parser accepts cheap to run:
     * 2 x 8 x 8 images, or for what looks like a sequence model windows of
     * 6 tokens of 3 kinds. */
    const int seq = strncmp(spec, "embed", 5) == 0 || strncmp(spec, "gpt", 3) == 0;
    int rc = seq ? nn_model_init(&m, spec, 1, 1, 6, 3, 2, 1, err, sizeof err)
                 : nn_model_init(&m, spec, 2, 8, 8, 3, 2, 1, err, sizeof err);
    if (rc < 0) {
        check(rc == -EINVAL || rc == -ENOMEM);
        check(err[0] != '\0' && strchr(err, '\n') == NULL);
        check(m.params == NULL);
        return 0;
    }
    if (m.n_params > (1u << 22)) { /* a legal but huge model: not this target's business */
        nn_model_free(&m);
        return 0;
    }
    float x[2 * 2 * 8 * 8];
    for (size_t i = 0; i < sizeof x / sizeof x[0]; i++)
        x[i] = seq ? (float)(i % 3) : (float)((i * 37) % 11) / 11.0f - 0.5f;
    const int y[2 * 6] = {0, 2, 1, 1, 0, 2, 2, 0, 1, 0, 2, 1}; /* a label per sample, or per token */
    const float loss = nn_model_grad(&m, x, y, 2, NULL);
    check(isfinite(loss));
    const float *logits = nn_model_forward(&m, x, 2);
    for (int i = 0; i < 2 * 3 * m.tokens; i++)
        check(isfinite(logits[i]));
    nn_model_free(&m);
    return 0;
}
