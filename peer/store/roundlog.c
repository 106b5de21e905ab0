/* Round lines of a peer's log: one table for the writer and the reader. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "peer/store/json.h"
#include "peer/store/roundlog.h"

#define F(name, type) JSON_FIELD(roundlog_line, name, type)
static const json_field FIELDS[] = {
    F(round, JSON_I64),     F(loss, JSON_NUM),      F(bytes_out, JSON_U64),     F(bytes_in, JSON_U64),
    F(absorbed, JSON_U64),  F(staleness, JSON_NUM), F(round_seconds, JSON_NUM), F(t, JSON_NUM),
    F(w, JSON_NUM),         F(step_s, JSON_NUM),    F(gossip_s, JSON_NUM),      F(frame_s, JSON_NUM),
    F(wait_s, JSON_NUM),
};
#undef F
#define N_FIELDS (sizeof FIELDS / sizeof *FIELDS)

int roundlog_write(FILE *f, const roundlog_line *l)
{
    json_obj j;
    json_begin_line(&j, f);
    json_put_fields(&j, FIELDS, N_FIELDS, l);
    if (l->test_accuracy >= 0)
        json_num(&j, "test_accuracy", l->test_accuracy);
    return json_close(&j);
}

int roundlog_parse(const char *line, size_t len, roundlog_line *l, char *err, size_t errlen)
{
    json_in r;
    json_in_init(&r, JSON_LINE, "log line", line, len);
    if (!r.err && !json_in_next_is(&r, "round"))
        return ROUNDLOG_OTHER;
    roundlog_line got = {.test_accuracy = -1};
    json_in_fields(&r, FIELDS, N_FIELDS, &got);
    if (json_in_next_is(&r, "test_accuracy"))
        json_in_num(&r, "test_accuracy", &got.test_accuracy);
    int rc = json_in_end(&r);
    if (rc < 0) {
        parse_error_text(&r.error, err, errlen);
        return rc;
    }
    *l = got;
    return ROUNDLOG_ROUND;
}
