/* Whole-file replacement; see wholefile.h for the steps and why each is there. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "peer/store/wholefile.h"

static int write_all(int fd, const unsigned char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -errno;
        p += w, n -= (size_t)w;
    }
    return 0;
}

/* A rename only survives a crash once its directory is on disk too. */
static int fsync_dir_of(const char *path)
{
    char *copy = strdup(path);
    if (!copy)
        return -ENOMEM;
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(copy);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) < 0 && errno != EINVAL ? -errno : 0; /* some file systems cannot fsync a directory */
    close(fd);
    return rc;
}

/* tmp -> path without ever replacing path: -EEXIST if it is there. */
static int rename_noreplace(const char *tmp, const char *path)
{
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) == 0)
        return 0;
    int rc = -errno;
    if (rc != -EINVAL && rc != -ENOSYS && rc != -ENOTSUP)
        return rc;
    if (link(tmp, path) < 0) /* the file system has no RENAME_NOREPLACE; link cannot replace either */
        return -errno;
    unlink(tmp);
    return 0;
}

typedef struct whole {
    const void *buf;
    size_t len;
} whole;

static int write_whole(int fd, void *ctx)
{
    const whole *w = ctx;
    return write_all(fd, w->buf, w->len);
}

int wholefile_write(const char *path, const void *buf, size_t len, mode_t mode, int flags, char *err, size_t errlen)
{
    whole w = {buf, len};
    return wholefile_write_with(path, write_whole, &w, mode, flags, err, errlen);
}

int wholefile_fd_write(int fd, const void *buf, size_t len)
{
    return write_all(fd, buf, len);
}

int wholefile_write_with(const char *path, int (*fill)(int fd, void *ctx), void *ctx, mode_t mode, int flags,
                         char *err, size_t errlen)
{
    if ((flags & WHOLEFILE_NOREPLACE) && (flags & WHOLEFILE_KEEP_PREV)) {
        snprintf(err, errlen, "%s: keeping a previous version of a file that may not be replaced", path);
        return -EINVAL;
    }
    size_t n = strlen(path);
    char *tmp = malloc(2 * n + sizeof ".tmp" + sizeof ".prev"), *prev = tmp + n + sizeof ".tmp";
    if (!tmp) {
        snprintf(err, errlen, "%s: out of memory", path);
        return -ENOMEM;
    }
    memcpy(tmp, path, n), memcpy(tmp + n, ".tmp", sizeof ".tmp");
    memcpy(prev, path, n), memcpy(prev + n, ".prev", sizeof ".prev");

    const char *step = "create", *from = tmp, *to = NULL; /* for the message */
    unlink(tmp); /* a crash's leftover: O_EXCL below then makes a file of ours, whatever was there */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    int rc = fd < 0 ? -errno : 0;
    if (rc == 0 && (mode & 07777) != 0600 && fchmod(fd, mode & 07777) < 0)
        step = "chmod", rc = -errno;
    if (rc == 0 && (step = "write", rc = fill(fd, ctx)) == 0 && fsync(fd) < 0)
        step = "fsync", rc = -errno;
    if (fd >= 0 && close(fd) < 0 && rc == 0)
        step = "close", rc = -errno;
    if (rc == 0 && (flags & WHOLEFILE_KEEP_PREV) && rename(path, prev) < 0 && errno != ENOENT)
        step = "rename", from = path, to = prev, rc = -errno;
    int renamed = 0;
    if (rc == 0) {
        step = "rename", from = tmp, to = path;
        rc = flags & WHOLEFILE_NOREPLACE ? rename_noreplace(tmp, path) : rename(tmp, path) < 0 ? -errno : 0;
        renamed = rc == 0;
    }
    if (rc == 0 && (rc = fsync_dir_of(path)) < 0)
        step = "fsync the directory of", from = path, to = NULL;
    if (fd >= 0 && !renamed)
        unlink(tmp); /* ours, torn or unused */
    if (rc == -EEXIST && to == path)
        snprintf(err, errlen, "%s exists", path);
    else if (rc < 0)
        snprintf(err, errlen, "cannot %s %s%s%s: %s", step, from, to ? " to " : "", to ? to : "", strerror(-rc));
    free(tmp);
    return rc;
}

int wholefile_read(const char *path, size_t max, char **buf, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -errno;
    struct stat st;
    int rc = fstat(fileno(f), &st) < 0 ? -errno : st.st_size < 0 || (uint64_t)st.st_size > max ? -EFBIG : 0;
    char *p = rc == 0 ? malloc((size_t)st.st_size + 1) : NULL;
    if (rc == 0 && !p)
        rc = -ENOMEM;
    size_t n = p ? fread(p, 1, (size_t)st.st_size, f) : 0;
    if (rc == 0 && n != (size_t)st.st_size)
        rc = -EIO;
    fclose(f);
    if (rc < 0) {
        free(p);
        return rc;
    }
    p[n] = 0;
    *buf = p, *len = n;
    return 0;
}
