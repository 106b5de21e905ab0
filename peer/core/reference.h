/* SGP in one loop: the peer engine (engine.h) for every peer of a run in
 * one process, over links without latency, each step computed as soon as
 * it is asked for. It is the readable description of a round, and a test
 * of the engine: with tau = 0 it computes the model `sgp sim` and `sgp
 * launch` compute, bit for bit (tests/unit/test_peer_engine.c).
 *
 *   engine *peers[N];
 *   reference_run(&settings, &plan, train, &model, peers, err, sizeof err);
 *   engine_model_to(peers[i], z);           // peer i's model
 *   for (int i = 0; i < N; i++) engine_free(peers[i]);
 */
#ifndef PEER_CORE_REFERENCE_H
#define PEER_CORE_REFERENCE_H

#include "peer/core/engine.h"

/* c->n_peers engines, all starting from model->params; 0, or a negative
 * errno with a message (the engines are freed then). */
int reference_run(const peer_settings *c, const round_plan *plan, const nn_dataset *train, nn_model *model,
                  engine **peers, char *err, size_t errlen);

#endif
