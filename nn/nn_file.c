/* Whole-file reads with transparent gunzip, for the data loaders.
 *
 * Data files are small enough (MNIST 47 MB, CIFAR-10 180 MB) to hold whole,
 * which lets every parser check lengths against headers before it allocates.
 * Everything is capped at NN_DATA_MAX_BYTES so that a hostile or damaged file
 * (a gzip bomb, a device node) fails with a message instead of eating memory.
 */
#include "nn/nn_data.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* deflate cannot do better than about 1032:1, so a gzip trailer claiming more
 * than that is lying and must not size the first allocation. */
#define NN_GZ_MAX_RATIO 1032

int nn_data_errf(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

static int grow(uint8_t **buf, size_t *cap, size_t want)
{
    uint8_t *p = realloc(*buf, want);
    if (!p)
        return -ENOMEM;
    *buf = p;
    *cap = want;
    return 0;
}

/* Output capacity to start with: the trailer's ISIZE (size mod 2^32) when it is
 * plausible, so the usual case inflates with no realloc at all. */
static size_t gz_first_cap(const uint8_t *in, size_t in_len)
{
    size_t guess = in_len * 4;
    if (in_len >= 18) {
        const uint8_t *t = in + in_len - 4;
        size_t isize = (size_t)t[0] | (size_t)t[1] << 8 | (size_t)t[2] << 16 | (size_t)t[3] << 24;
        if (isize / NN_GZ_MAX_RATIO <= in_len)
            guess = isize + 1; /* +1: reaching Z_STREAM_END needs no second pass */
    }
    if (guess < 4096)
        guess = 4096;
    return guess > NN_DATA_MAX_BYTES + 1 ? NN_DATA_MAX_BYTES + 1 : guess;
}

int nn_gunzip(const uint8_t *in, size_t in_len, const char *name, uint8_t **out, size_t *out_len,
              char *err, size_t errlen)
{
    if (!out || !out_len || (!in && in_len))
        return -EINVAL;
    *out = NULL;
    *out_len = 0;
    if (!name)
        name = "(buffer)";
    if (in_len < 2 || in[0] != 0x1f || in[1] != 0x8b)
        return nn_data_errf(err, errlen, -EBADMSG, "%s: not a gzip stream", name);

    z_stream zs = {0};
    if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) /* 16: gzip wrapper only */
        return nn_data_errf(err, errlen, -ENOMEM, "%s: cannot start inflate", name);

    uint8_t *buf = NULL;
    size_t cap = 0, n = 0, fed = 0; /* fed: input bytes handed to zlib so far */
    int rc = grow(&buf, &cap, gz_first_cap(in, in_len));
    while (rc == 0) {
        if (n == cap) {
            /* The buffer may reach MAX + 1 so that "exactly MAX" still succeeds. */
            if (cap > NN_DATA_MAX_BYTES) {
                rc = nn_data_errf(err, errlen, -EFBIG, "%s: inflates to more than %zu MiB", name,
                                  NN_DATA_MAX_BYTES >> 20);
                break;
            }
            size_t want = cap > NN_DATA_MAX_BYTES / 2 ? NN_DATA_MAX_BYTES + 1 : cap * 2;
            if ((rc = grow(&buf, &cap, want)) < 0)
                break;
        }
        if (zs.avail_in == 0 && fed < in_len) {
            size_t chunk = in_len - fed > UINT_MAX ? UINT_MAX : in_len - fed;
            zs.next_in = (Bytef *)(in + fed);
            zs.avail_in = (uInt)chunk;
            fed += chunk;
        }
        size_t room = cap - n > UINT_MAX ? UINT_MAX : cap - n;
        zs.next_out = buf + n;
        zs.avail_out = (uInt)room;
        int zr = inflate(&zs, Z_NO_FLUSH);
        n += room - zs.avail_out;

        if (zr == Z_OK)
            continue;
        if (zr == Z_STREAM_END) {
            size_t at = fed - zs.avail_in;
            if (at == in_len)
                break;
            /* `cat a.gz b.gz` is a valid gzip file: continue with the next member. */
            if (in_len - at < 2 || in[at] != 0x1f || in[at + 1] != 0x8b) {
                rc = nn_data_errf(err, errlen, -EBADMSG,
                                  "%s: %zu bytes of trailing garbage after gzip stream", name, in_len - at);
                break;
            }
            inflateReset(&zs);
            continue;
        }
        if (zr == Z_BUF_ERROR) /* output room was there, so the input ran out */
            rc = nn_data_errf(err, errlen, -EBADMSG, "%s: truncated gzip stream", name);
        else if (zr == Z_MEM_ERROR)
            rc = -ENOMEM;
        else
            rc = nn_data_errf(err, errlen, -EBADMSG, "%s: corrupt gzip stream (%s)", name,
                              zs.msg ? zs.msg : "bad data");
    }
    inflateEnd(&zs);
    if (rc == -ENOMEM)
        nn_data_errf(err, errlen, rc, "%s: out of memory inflating", name);
    if (rc < 0) {
        free(buf);
        return rc;
    }
    uint8_t *fit = realloc(buf, n ? n : 1); /* give back the slack; keep buf if this fails */
    *out = fit ? fit : buf;
    *out_len = n;
    return 0;
}

static int read_fd(int fd, const char *path, uint8_t **buf, size_t *len, char *err, size_t errlen)
{
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        return nn_data_errf(err, errlen, -e, "%s: %s", path, strerror(e));
    }
    if (S_ISREG(st.st_mode) && (uintmax_t)st.st_size > NN_DATA_MAX_BYTES)
        return nn_data_errf(err, errlen, -EFBIG, "%s: file is larger than %zu MiB", path,
                            NN_DATA_MAX_BYTES >> 20);

    /* st_size is only a hint: pipes report 0 and files can change under us. */
    size_t cap = S_ISREG(st.st_mode) ? (size_t)st.st_size + 1 : 65536, n = 0;
    uint8_t *p = NULL;
    int rc = grow(&p, &cap, cap);
    while (rc == 0) {
        if (n == cap) {
            if (cap > NN_DATA_MAX_BYTES) {
                rc = nn_data_errf(err, errlen, -EFBIG, "%s: file is larger than %zu MiB", path,
                                  NN_DATA_MAX_BYTES >> 20);
                break;
            }
            if ((rc = grow(&p, &cap, cap > NN_DATA_MAX_BYTES / 2 ? NN_DATA_MAX_BYTES + 1 : cap * 2)) < 0)
                break;
        }
        ssize_t r = read(fd, p + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            rc = nn_data_errf(err, errlen, -e, "%s: %s", path, strerror(e));
        }
        else if (r == 0)
            break;
        else
            n += (size_t)r;
    }
    if (rc == -ENOMEM)
        nn_data_errf(err, errlen, rc, "%s: out of memory", path);
    if (rc < 0) {
        free(p);
        return rc;
    }
    *buf = p;
    *len = n;
    return 0;
}

int nn_file_read(const char *path, uint8_t **buf, size_t *len, char *err, size_t errlen)
{
    if (!path || !buf || !len)
        return -EINVAL;
    *buf = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return nn_data_errf(err, errlen, -e, "%s: %s", path, strerror(e));
    }
    uint8_t *raw = NULL;
    size_t n = 0;
    int rc = read_fd(fd, path, &raw, &n, err, errlen);
    close(fd);
    if (rc < 0)
        return rc;
    if (n >= 2 && raw[0] == 0x1f && raw[1] == 0x8b) {
        rc = nn_gunzip(raw, n, path, buf, len, err, errlen);
        free(raw);
        return rc;
    }
    *buf = raw;
    *len = n;
    return 0;
}
