/* Whole files or nothing: a reader of PATH, and PATH after a crash, hold the
 * old contents or the new ones, never a mix. Keys, checkpoints and summaries
 * are all written through here.
 *
 *   char err[512];
 *   int rc = wholefile_write("run/peer3.json", text, len, 0644, 0, err, sizeof err);
 *   rc = wholefile_write("keys/0.key", secret, n, 0600, WHOLEFILE_NOREPLACE, err, sizeof err);   // -EEXIST if there
 *   rc = wholefile_write("run/p.ckpt", buf, len, 0600, WHOLEFILE_KEEP_PREV, err, sizeof err);  // old: p.ckpt.prev
 *   rc = wholefile_read("run/peer3.json", 1 << 16, &text, &n);   // the whole file, malloc'ed
 *
 * The steps: PATH.tmp is created afresh (a leftover from a crash is removed
 * first; O_EXCL, mode 0600, so nobody else can read it even briefly, then
 * exactly `mode`), written, fsync'ed and closed; with WHOLEFILE_KEEP_PREV the
 * current PATH is renamed to PATH.prev; PATH.tmp is renamed to PATH
 * (WHOLEFILE_NOREPLACE: renameat2 RENAME_NOREPLACE, or link where the file
 * system lacks it, so an existing PATH is never replaced, even by a racing
 * writer); last the directory is fsync'ed so the renames survive a crash.
 * A kill before the final rename leaves PATH untouched and a torn PATH.tmp
 * that the next write replaces.
 *
 * One writer per PATH at a time (PATH.tmp is a fixed name). buf is written
 * from where it is and never copied, so a secret stays in the caller's
 * (wiped) memory.
 *
 * (Not "atomic_*": names that begin with atomic_ and a lowercase letter, and
 * ATOMIC_ and an uppercase one, are reserved for <stdatomic.h>, C17 7.31.8.)
 */
#ifndef PEER_STORE_WHOLEFILE_H
#define PEER_STORE_WHOLEFILE_H

#include <stddef.h>
#include <sys/types.h>

enum {
    WHOLEFILE_NOREPLACE = 1 << 0, /* -EEXIST (err "PATH exists") when PATH exists */
    WHOLEFILE_KEEP_PREV = 1 << 1, /* an existing PATH becomes PATH.prev; not with NOREPLACE */
};

/* 0, or a negative errno and one line in err naming the file and the step
 * that failed ("cannot fsync run/p.ckpt.tmp: No space left on device"). On
 * failure PATH is unchanged and PATH.tmp removed, except after the final
 * rename (only the directory's fsync failed): PATH is then new. */
int wholefile_write(const char *path, const void *buf, size_t len, mode_t mode, int flags, char *err, size_t errlen);

/* The same with the contents written by fill(fd, ctx) (0 or a negative
 * errno), for a file too big to hold in memory twice: a checkpoint streamed
 * from the live state. */
int wholefile_write_with(const char *path, int (*fill)(int fd, void *ctx), void *ctx, mode_t mode, int flags,
                         char *err, size_t errlen);
/* write(2) of all len bytes (EINTR retried): for fill callbacks. 0 or -errno. */
int wholefile_fd_write(int fd, const void *buf, size_t len);

/* The counterpart: a whole file into a malloc'ed buffer (NUL-terminated
 * after len bytes). 0, -EFBIG when it is over max bytes, -ENOMEM, -EIO or
 * open's errno. */
int wholefile_read(const char *path, size_t max, char **buf, size_t *len);

#endif
