/* Flat JSON objects, atomically replaced. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "peer/store/json.h"

int json_open(json_obj *j, const char *path)
{
    memset(j, 0, sizeof *j);
    if (snprintf(j->path, sizeof j->path, "%s", path) >= (int)sizeof j->path)
        return -ENAMETOOLONG;
    snprintf(j->tmp, sizeof j->tmp, "%s.tmp", path);
    j->f = fopen(j->tmp, "w");
    if (!j->f)
        return -errno;
    fputc('{', j->f);
    return 0;
}

static void key(json_obj *j, const char *k) { fprintf(j->f, "%s\n  \"%s\": ", j->n++ ? "," : "", k); }

void json_num(json_obj *j, const char *k, double v)
{
    key(j, k);
    if (isfinite(v))
        fprintf(j->f, "%.9g", v);
    else
        fputs("null", j->f); /* JSON has no NaN or infinity */
}

void json_int(json_obj *j, const char *k, long long v)
{
    key(j, k);
    fprintf(j->f, "%lld", v);
}

void json_str(json_obj *j, const char *k, const char *v)
{
    key(j, k);
    fputc('"', j->f);
    for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(j->f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(j->f, "\\u%04x", *p);
        else
            fputc(*p, j->f);
    }
    fputc('"', j->f);
}

int json_close(json_obj *j)
{
    fputs("\n}\n", j->f);
    int rc = 0;
    if (fflush(j->f) != 0 || fsync(fileno(j->f)) != 0)
        rc = -errno;
    if (fclose(j->f) != 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && rename(j->tmp, j->path) != 0)
        rc = -errno;
    if (rc)
        unlink(j->tmp);
    return rc;
}
