/* Following the peers' logs; see launch_status.h. */
#include <stdio.h>
#include <string.h>

#include "peer/launch/launch_status.h"
#include "peer/store/roundlog.h"

/* Past the ledger and event lines a peer writes after its last round. */
#define TAIL_BYTES 8192

void launch_log_path(char *path, size_t cap, const char *run_dir, int i)
{
    snprintf(path, cap, "%.1024s/peer%d.jsonl", run_dir, i);
}

void launch_status_read(const char *log_path, launch_status *s)
{
    FILE *f = fopen(log_path, "r");
    if (!f)
        return;
    if (fseek(f, -TAIL_BYTES, SEEK_END) != 0)
        rewind(f);
    char line[1024], err[160];
    roundlog_line l, last;
    int have = 0;
    /* The first line may be cut by the seek and the last one still being
     * written: roundlog_parse refuses both. */
    while (fgets(line, sizeof line, f))
        if (roundlog_parse(line, strlen(line), &l, err, sizeof err) == ROUNDLOG_ROUND) {
            last = l, have = 1;
            if (l.test_accuracy >= 0)
                s->test_accuracy = l.test_accuracy;
        }
    fclose(f);
    if (have)
        s->round = last.round, s->mb_out = (double)last.bytes_out / 1e6, s->loss = last.loss;
}

void launch_progress(FILE *out, const char *run_dir, int n, int running, double seconds, int tty)
{
    if (!run_dir) {
        fprintf(out, "%s%d of %d peers running  %.0fs%s", tty ? "\r\033[K" : "", running, n, seconds, tty ? "" : "\n");
        fflush(out);
        return;
    }
    long rmin = -1, rmax = -1;
    double mb = 0, loss_sum = 0, acc_min = -1;
    char path[1100], accs[32] = "";
    for (int i = 0; i < n; i++) {
        launch_status s = {.round = 0, .test_accuracy = -1};
        launch_log_path(path, sizeof path, run_dir, i);
        launch_status_read(path, &s);
        rmin = rmin < 0 || s.round < rmin ? s.round : rmin;
        rmax = s.round > rmax ? s.round : rmax;
        mb += s.mb_out, loss_sum += s.loss;
        if (s.test_accuracy >= 0 && (acc_min < 0 || s.test_accuracy < acc_min))
            acc_min = s.test_accuracy;
    }
    if (acc_min >= 0)
        snprintf(accs, sizeof accs, "  test >= %.2f%%", 100 * acc_min);
    fprintf(out, "%sround %ld..%ld  loss %.4f%s  %.1f MB sent  %d of %d peers running  %.0fs%s", tty ? "\r\033[K" : "",
            rmin, rmax, loss_sum / n, accs, mb, running, n, seconds, tty ? "" : "\n");
    fflush(out);
}
