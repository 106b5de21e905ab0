/* What `sgp launch` knows of its running peers: it follows each peer's log
 * (RUN/peerI.jsonl, peer/store/roundlog.h) and draws one progress line.
 *
 *   launch_status s = LAUNCH_STATUS_NONE;
 *   launch_status_read("run/peer3.jsonl", &s);    // fields stay as they were until the log has a round
 *   launch_progress(stdout, "run", 8, 6, 12.5, 1);  // "round 120..131  loss 0.4123  test >= 91.20%  ..."
 */
#ifndef PEER_LAUNCH_LAUNCH_STATUS_H
#define PEER_LAUNCH_LAUNCH_STATUS_H

#include <stdio.h>

typedef struct launch_status {
    long round;           /* the last round logged */
    double mb_out;        /* MB sent so far */
    double loss;          /* of that round */
    double test_accuracy; /* the last one logged (at an epoch end); < 0: none yet */
} launch_status;

#define LAUNCH_STATUS_NONE ((launch_status){.round = -1, .test_accuracy = -1})

/* From the end of the log: its last whole round line, and the last test
 * accuracy among the lines read. Lines of other kinds and torn lines are
 * passed over; a missing log changes nothing. */
void launch_status_read(const char *log_path, launch_status *s);

/* One progress line over RUN/peer0.jsonl .. peer(n-1).jsonl: the rounds
 * reached, mean loss, the lowest test accuracy, MB sent, how many peers are
 * running. On a terminal (tty) it redraws in place. run_dir NULL: the logs
 * are on other hosts (--hosts), only how many peers run is known. */
void launch_progress(FILE *out, const char *run_dir, int n, int running, double seconds, int tty);

/* RUN/peerI.jsonl into path. */
void launch_log_path(char *path, size_t cap, const char *run_dir, int i);

#endif
