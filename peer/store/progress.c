/* Terminal progress bar. */
#include <time.h>
#include <unistd.h>

#include "peer/store/progress.h"

/* Seconds on a monotonic clock, only to space the redraws (a wall-clock
 * step must not freeze the bar): read here rather than through the drivers'
 * clock (peer/core/clock.h), which sits on a floor above this one. */
static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void progress_init(progress *p, FILE *out, int mode)
{
    p->out = out;
    p->enabled = mode < 0 ? isatty(fileno(out)) : mode;
    p->shown = 0;
    p->last = 0;
}

void progress_update(progress *p, long done, long total, const char *text)
{
    if (!p->enabled || total <= 0)
        return;
    double now = now_seconds();
    if (done < total && now - p->last < 0.1)
        return;
    p->last = now;
    enum { WIDTH = 30 };
    int fill = (int)(WIDTH * done / total);
    char bar[WIDTH + 1];
    for (int i = 0; i < WIDTH; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[WIDTH] = 0;
    fprintf(p->out, "\r\033[K[%s] %3ld%% %s", bar, 100 * done / total, text);
    fflush(p->out);
    p->shown = 1;
}

void progress_clear(progress *p)
{
    if (p->shown) {
        fputs("\r\033[K", p->out);
        fflush(p->out);
        p->shown = 0;
    }
}
