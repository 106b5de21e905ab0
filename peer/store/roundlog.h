/* One line of a peer's JSON-lines log (`sgp peer --log FILE`): a round's
 * loss, traffic, staleness and time, and at epoch ends the test accuracy.
 * The writer and the reader share one field table, so `sgp launch`, which
 * follows the logs live, reads exactly what a peer writes.
 *
 *   roundlog_line l = {.round = 12, .loss = 0.31, ..., .test_accuracy = -1};   // < 0: not evaluated
 *   roundlog_write(log_file, &l);            // {"round": 12, "loss": 0.31, ...}\n, flushed
 *
 *   int rc = roundlog_parse(line, strlen(line), &l, err, sizeof err);
 *   // ROUNDLOG_ROUND: l holds it; ROUNDLOG_OTHER: an event or the ledger; < 0: malformed (err says how)
 *
 * A log also holds event lines ({"event": ...}) and, at the end, ledger lines
 * ({"ledger": ...}); they are written elsewhere (peer/net/node.c) and
 * roundlog_parse only recognises them as not its own.
 */
#ifndef PEER_STORE_ROUNDLOG_H
#define PEER_STORE_ROUNDLOG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct roundlog_line {
    int64_t round;
    double loss;
    uint64_t bytes_out, bytes_in, absorbed;
    double staleness;     /* mean staleness of the messages absorbed so far */
    double round_seconds; /* this round's duration */
    double t;             /* seconds since the peer started */
    double w;             /* push-sum weight */
    /* seconds since the peer started in its local steps, gossip CPU
     * (absorb, emit), framing and crypto, and waiting for neighbours */
    double step_s, gossip_s, frame_s, wait_s;
    double test_accuracy; /* < 0: not evaluated this round (the member is left out) */
} roundlog_line;

/* 0, or -EIO when the stream fails. */
int roundlog_write(FILE *f, const roundlog_line *l);
/* What roundlog_parse found on a line that is not malformed. */
enum roundlog_kind { ROUNDLOG_ROUND = 0, ROUNDLOG_OTHER = 1 };

/* line: one whole line with its newline. A roundlog_kind, or a negative
 * errno (-EBADMSG) with err set. */
int roundlog_parse(const char *line, size_t len, roundlog_line *l, char *err, size_t errlen);

#endif
