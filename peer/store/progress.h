/* A live one-line progress bar on a terminal; silent otherwise. Redraws at
 * most ten times a second so it never costs training time.
 *
 *   progress p;
 *   progress_init(&p, stdout, -1);      // -1: on if stdout is a terminal
 *   progress_update(&p, done, total, "loss 0.231");
 *   progress_clear(&p);                 // before printing a normal line
 */
#ifndef PEER_STORE_PROGRESS_H
#define PEER_STORE_PROGRESS_H

#include <stdio.h>

typedef struct progress {
    FILE *out;
    int enabled;
    int shown;
    double last;
} progress;

void progress_init(progress *p, FILE *out, int mode);
void progress_update(progress *p, long done, long total, const char *text);
void progress_clear(progress *p);

#endif
