/* The end of a launch: the peers' final models (RUN/peerI.model, model files
 * of peer/store/modelfile.h; the first names the architecture) averaged
 * as sgp sim averages them (sum w z / sum w, each w from the peer's summary,
 * RUN/peerI.json, read with peer/store/summary.h), evaluated on the test set,
 * with their spread; one printed line, the combined summary (the fields
 * of sgp sim's) and the average model in RUN/model.safetensors (and
 * save_model).
 *
 *   launch_outcome o = {.run_dir = "run", .n = 8, .wall_seconds = 31.5};
 *   rc = launch_combine(&o, "summary.json", stdout, err, sizeof err);
 *
 * Memory is two models' worth whatever the peer count: the files are read
 * twice (the mean, then the distances to it).
 */
#ifndef PEER_LAUNCH_LAUNCH_COMBINE_H
#define PEER_LAUNCH_LAUNCH_COMBINE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "peer/store/modelfile.h"

typedef struct launch_outcome {
    const char *run_dir;
    int n;                    /* peers in the run */
    const uint8_t *absent;    /* absent[i]: killed for good by a fault, so no model; NULL: none */
    const uint8_t *left;      /* left[i]: it left on purpose (--leave): its weight is the others', its model is
                               * not in the average; NULL: none */
    const char *data;         /* the peers' --data (NULL: embedded) */
    int context;              /* the peers' --context (0: the default) */
    const char *save_model;   /* where else the average model goes, or NULL */
    modelfile_kind model_format;
    int faults;               /* faults injected */
    double wall_seconds;
} launch_outcome;

/* 0, or a negative errno with err naming the file at fault (a summary that
 * is not one its peer wrote in this run: -ESTALE). summary may be NULL. */
int launch_combine(const launch_outcome *o, const char *summary, FILE *out, char *err, size_t errlen);

#endif
