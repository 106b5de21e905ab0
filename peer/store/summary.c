/* A peer's summary file: one field table drives the writer and the reader. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peer/store/json.h"
#include "peer/store/summary.h"
#include "peer/store/wholefile.h"

#define SUMMARY_MAX_BYTES (64 * 1024)

#define F(name, type) JSON_FIELD(summary_peer, name, type)
static const json_field FIELDS[] = {
    F(id, JSON_I64),
    F(peers, JSON_I64),
    F(model, JSON_TEXT),
    F(codec, JSON_TEXT),
    F(parameters, JSON_I64),
    F(epochs, JSON_I64),
    F(seed, JSON_U64),
    F(test_accuracy, JSON_NUM),
    F(test_loss, JSON_NUM),
    F(train_loss, JSON_NUM),
    F(rounds, JSON_I64),
    F(weight, JSON_NUM),
    F(bytes_sent, JSON_I64),
    F(bytes_received, JSON_I64),
    F(messages_sent, JSON_I64),
    F(messages_absorbed, JSON_I64),
    F(sends_refused, JSON_I64),
    F(mean_staleness, JSON_NUM),
    F(wall_seconds, JSON_NUM),
    F(local_steps, JSON_I64),
    F(start_round, JSON_I64),
    F(neighbours_lost, JSON_I64),
    F(late_marks, JSON_I64),
    F(catch_ups, JSON_I64),
    F(refreshes, JSON_I64),
    F(checkpoints, JSON_I64),
    F(syncs_sent, JSON_I64),
    F(step_seconds, JSON_NUM),
    F(gossip_seconds, JSON_NUM),
    F(frame_seconds, JSON_NUM),
    F(wait_seconds, JSON_NUM),
    F(idle_seconds, JSON_NUM),
    F(frame_pool_seconds, JSON_NUM),
    F(memory_model_bytes, JSON_I64),
    F(memory_gossip_bytes, JSON_I64),
    F(memory_codec_bytes, JSON_I64),
    F(memory_in_flight_bytes, JSON_I64),
    F(memory_data_bytes, JSON_I64),
    F(memory_runtime_bytes, JSON_I64),
    F(rss_bytes, JSON_I64),
    F(peak_rss_bytes, JSON_I64),
    F(message_buffer_peak_bytes, JSON_I64),
    F(models_landed, JSON_I64),
};
#undef F
#define N_FIELDS (sizeof FIELDS / sizeof *FIELDS)

int summary_peer_write(const char *path, const summary_peer *s, char *err, size_t errlen)
{
    json_obj j;
    json_open(&j, path);
    json_str(&j, "command", "peer");
    json_put_fields(&j, FIELDS, N_FIELDS, s);
    int rc = json_close(&j);
    if (rc < 0)
        snprintf(err, errlen, "%s", j.err);
    return rc;
}

int summary_peer_read(const char *path, summary_peer *s, char *err, size_t errlen)
{
    char *text;
    size_t len;
    int rc = wholefile_read(path, SUMMARY_MAX_BYTES, &text, &len);
    if (rc < 0) {
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(-rc));
        return rc;
    }
    summary_peer got;
    memset(&got, 0, sizeof got);
    json_in r;
    json_in_init(&r, JSON_PRETTY, path, text, len);
    char command[16] = "";
    if (json_in_str(&r, "command", command, sizeof command) == 0 && strcmp(command, "peer") != 0)
        snprintf(err, errlen, "%s: a summary of 'sgp %s', not of 'sgp peer'", path, command), rc = -EBADMSG;
    if (rc == 0)
        json_in_fields(&r, FIELDS, N_FIELDS, &got);
    if (rc == 0 && (rc = json_in_end(&r)) < 0)
        parse_error_text(&r.error, err, errlen);
    free(text);
    if (rc == 0)
        *s = got;
    return rc;
}
