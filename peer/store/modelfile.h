/* Model files: a trained model as safetensors (peer/store/safetensors.h) that
 * PyTorch, NumPy and sgp itself read, with the architecture in its metadata,
 * or as bare float32 on request. The format is in peer/store/MODELFILE.md.
 *
 *   modelfile_save("m.safetensors", &m, NULL, "fashion", summary_json, err, sizeof err);
 *
 *   nn_model m = {0};                              // sgp eval / predict: the file says what to build
 *   if (modelfile_load("m.safetensors", NULL, 256, &m, NULL, err, sizeof err) < 0) ...
 *
 *   modelfile_init_params("m.safetensors", &m, err, sizeof err);   // --init: into a model built already
 *
 * Every function returns 0 or a negative errno with a one-line message that
 * names the file: not a model file, truncated, another architecture (both
 * named), a tensor missing, of another shape or dtype.
 */
#ifndef PEER_STORE_MODELFILE_H
#define PEER_STORE_MODELFILE_H

#include <stddef.h>

#include "nn/nn_model.h"

#define MODELFILE_FORMAT "sgp-model/1"
#define MODELFILE_MAX_BYTES ((size_t)4 << 30)

typedef enum modelfile_kind { MODELFILE_SAFETENSORS, MODELFILE_RAW } modelfile_kind;

/* "safetensors" or "raw"; -EINVAL otherwise. */
int modelfile_kind_parse(const char *text, modelfile_kind *kind);

/* Writes params (m->params when NULL) with m's architecture atomically.
 * data: the data spec the model was trained on (NULL: the embedded set);
 * summary: a JSON object of the run's results or NULL. */
int modelfile_save(const char *path, const nn_model *m, const float *params, const char *data, const char *summary,
                   char *err, size_t errlen);
/* The same bytes as m->n_params little-endian float32 and nothing else. */
int modelfile_save_raw(const char *path, const nn_model *m, const float *params, char *err, size_t errlen);
/* By kind. */
int modelfile_write(modelfile_kind kind, const char *path, const nn_model *m, const float *params, const char *data,
                    const char *summary, char *err, size_t errlen);

/* The architecture a file records: its spec (NULL when the file has none, as
 * for weights written by other tools), input shape and class count. */
typedef struct modelfile_arch {
    char spec[NN_SPEC_MAX_LEN];
    int c, h, w, classes; /* 0 when not recorded */
    char data[256];       /* the data spec it was trained on ("" when not recorded) */
} modelfile_arch;

/* The architecture of PATH without its tensors checked (to build a model). */
int modelfile_arch_read(const char *path, modelfile_arch *a, char *err, size_t errlen);

/* Builds m from the file's metadata (spec may override or stand in for a file
 * without one) for batches up to max_batch, and loads its parameters; what
 * the file records goes into *arch when not NULL. */
int modelfile_load(const char *path, const char *spec, int max_batch, nn_model *m, modelfile_arch *arch, char *err,
                   size_t errlen);

/* Loads the file's parameters into a model already built: every tensor of m
 * must be in the file with m's name, shape and float32, and nothing else; a
 * file that records an architecture must record m's. */
int modelfile_init_params(const char *path, nn_model *m, char *err, size_t errlen);

#endif
