/* One peer's summary: what `sgp peer --summary FILE` writes at the end of its
 * run and `sgp launch` reads back to combine the peers. Both sides go
 * through this module, so the reader takes exactly what the writer wrote.
 *
 *   summary_peer s = {.id = 3, .peers = 8, .rounds = 375, ...};
 *   snprintf(s.model, sizeof s.model, "%s", "mlp:256");
 *   if (summary_peer_write("run/peer3.json", &s, err, sizeof err) < 0) ...   // atomic (peer/store/wholefile.h)
 *
 *   summary_peer back;
 *   if (summary_peer_read("run/peer3.json", &back, err, sizeof err) < 0) ...
 *       // err: "run/peer3.json:14: expected "weight", found '"rounds": 375'"
 *
 * The file is a flat JSON object (peer/store/json.h, JSON_PRETTY) with
 * "command": "peer" and then the fields below, in this order; the reader
 * refuses anything else (a missing, extra or reordered key, a wrong type, an
 * integer out of range, text after the object) with the file, line and what
 * it expected. A number that was not finite is written as null and read back
 * as NaN.
 */
#ifndef PEER_STORE_SUMMARY_H
#define PEER_STORE_SUMMARY_H

#include <stddef.h>
#include <stdint.h>

#define SUMMARY_TEXT 520 /* model (NN_SPEC_MAX_LEN) and codec specs, with their NUL */

typedef struct summary_peer {
    int64_t id, peers;
    char model[SUMMARY_TEXT], codec[SUMMARY_TEXT]; /* codec: "exact" without one */
    int64_t parameters, epochs;
    uint64_t seed;
    double test_accuracy, test_loss, train_loss; /* this peer's own model */
    int64_t rounds;
    double weight; /* push-sum w at the end: the average model is sum w z / sum w */
    int64_t bytes_sent, bytes_received, messages_sent, messages_absorbed, sends_refused;
    double mean_staleness, wall_seconds;
    int64_t local_steps, start_round, neighbours_lost, late_marks, catch_ups, refreshes, checkpoints;
    int64_t syncs_sent; /* SYNCs this peer answered a NACK with (a compressed edge's gap) */
    /* where the wall time went: local steps, gossip CPU, framing and crypto, waiting, the rest; and the
     * framing and crypto of big frames on the thread pool, beside the loop */
    double step_seconds, gossip_seconds, frame_seconds, wait_seconds, idle_seconds, frame_pool_seconds;
    /* bytes by part when the last round was done (peer/core/memory.h), and resident memory */
    int64_t memory_model_bytes, memory_gossip_bytes, memory_codec_bytes, memory_in_flight_bytes, memory_data_bytes,
        memory_runtime_bytes, rss_bytes, peak_rss_bytes;
    /* the largest buffer a message in pieces was put together in; MODELs written into x as they arrived */
    int64_t message_buffer_peak_bytes, models_landed;
} summary_peer;

/* 0, or a negative errno with a one-line message naming the file. */
int summary_peer_write(const char *path, const summary_peer *s, char *err, size_t errlen);
/* 0, -ENOENT and the like, -EFBIG (over 64 KiB), -EBADMSG or -ERANGE (not
 * what the writer writes); err says which file, line and why. s is filled
 * only on success. */
int summary_peer_read(const char *path, summary_peer *s, char *err, size_t errlen);

#endif
