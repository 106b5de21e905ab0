/* Key files and the text form of keys (keyfile.h). The files are as secret
 * as the keys: a secret key file is read into sodium_malloc memory, refused
 * when others may read it, and written atomically (peer/store/wholefile.h). */
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "peer/config/keyfile.h"
#include "peer/store/wholefile.h"

_Static_assert(KEYFILE_B64 == sodium_base64_ENCODED_LEN(SEC_KEY_BYTES, sodium_base64_VARIANT_ORIGINAL), "b64");

static void set_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static int is_b64(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/';
}

/* Decode exactly one key's worth of canonical base64 into out (which may be
 * sodium memory); scratch holds KEYFILE_B64 bytes and is wiped. */
static int key_decode(uint8_t *out, const char *text, size_t len, char *scratch, const char **why)
{
    const char *dummy;
    if (!why)
        why = &dummy;
    size_t i = 0;
    while (i < len && is_b64(text[i]))
        i++;
    size_t pad = 0;
    while (i + pad < len && text[i + pad] == '=' && pad < 2)
        pad++;
    if (i + pad != len || len % 4) {
        *why = "not base64";
        return -EINVAL;
    }
    if (len != KEYFILE_B64 - 1) {
        *why = "wrong length: a key is 32 bytes (44 base64 characters)";
        return -EINVAL;
    }
    /* 44 characters are 32 bytes only with exactly one '=' (none: 33, two: 31). */
    if (pad != 1) {
        *why = "wrong length: a key is 32 bytes (44 base64 characters)";
        return -EINVAL;
    }
    size_t got = 0;
    const char *end = NULL;
    if (sodium_base642bin(out, SEC_KEY_BYTES, text, len, NULL, &got, &end, sodium_base64_VARIANT_ORIGINAL) != 0 ||
        end != text + len || got != SEC_KEY_BYTES) {
        sodium_memzero(out, SEC_KEY_BYTES);
        *why = "not canonical base64";
        return -EINVAL;
    }
    /* One spelling per key: the 2 unused bits before the '=' must be 0, or
     * two different texts would name the same key. libsodium checks this
     * already; checking again costs nothing and does not depend on it. */
    sodium_bin2base64(scratch, KEYFILE_B64, out, SEC_KEY_BYTES, sodium_base64_VARIANT_ORIGINAL);
    int same = memcmp(scratch, text, len) == 0;
    sodium_memzero(scratch, KEYFILE_B64);
    if (!same) {
        sodium_memzero(out, SEC_KEY_BYTES);
        *why = "not canonical base64";
        return -EINVAL;
    }
    return 0;
}

void keyfile_pub_encode(const uint8_t pk[SEC_KEY_BYTES], char out[KEYFILE_B64])
{
    sodium_bin2base64(out, KEYFILE_B64, pk, SEC_KEY_BYTES, sodium_base64_VARIANT_ORIGINAL);
}

int keyfile_pub_decode(uint8_t pk[SEC_KEY_BYTES], const char *text, size_t len, const char **why)
{
    char scratch[KEYFILE_B64];
    uint8_t tmp[SEC_KEY_BYTES];
    if (!pk || (!text && len))
        return -EINVAL;
    int rc = key_decode(tmp, text ? text : "", len, scratch, why);
    if (rc == 0)
        memcpy(pk, tmp, SEC_KEY_BYTES);
    return rc;
}

/* A key file: one key line, an optional final newline (LF or CRLF). The text
 * lands in buf (KEY_FILE_MAX + 1 bytes, sodium memory for secret keys). */
#define KEY_FILE_MAX 128

static int read_key_file(const char *path, int secret, char *buf, size_t *len, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        int e = errno;
        set_err(err, errlen, "%s: %s", path, strerror(e));
        return -e;
    }
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) < 0) {
        rc = -errno;
        set_err(err, errlen, "%s: %s", path, strerror(-rc));
    } else if (!S_ISREG(st.st_mode)) {
        rc = -EINVAL;
        set_err(err, errlen, "%s: not a regular file", path);
    } else if (secret && (st.st_mode & (S_IRWXG | S_IRWXO))) {
        /* ssh's rule: a secret others can read is no longer a secret, and
         * saying so loudly beats using it. */
        rc = -EACCES;
        set_err(err, errlen, "%s: permissions %04o are too open: a secret key must be accessible by its owner only "
                          "(chmod 600 %s)",
                path, (unsigned)(st.st_mode & 07777), path);
    } else if (st.st_size > KEY_FILE_MAX) {
        rc = -EBADMSG;
        set_err(err, errlen, "%s: not a key file (%lld bytes)", path, (long long)st.st_size);
    }
    size_t n = 0;
    while (rc == 0) {
        ssize_t r = read(fd, buf + n, KEY_FILE_MAX + 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = -errno;
            set_err(err, errlen, "%s: %s", path, strerror(-rc));
        } else if (r == 0) {
            break;
        } else if ((n += (size_t)r) > KEY_FILE_MAX) {
            rc = -EBADMSG;
            set_err(err, errlen, "%s: not a key file (too long)", path);
        }
    }
    close(fd);
    if (rc < 0)
        return rc;
    if (n && buf[n - 1] == '\n')
        n--;
    if (n && buf[n - 1] == '\r')
        n--;
    *len = n;
    return 0;
}

int keyfile_read_secret(uint8_t secret[SEC_KEY_BYTES], const char *key_path, char *err, size_t errlen)
{
    if (!secret || !key_path)
        return -EINVAL;
    if (sec_init() < 0) {
        set_err(err, errlen, "cannot initialise libsodium");
        return -EIO;
    }
    /* The file text is as secret as the key: read it into guarded memory. */
    char *text = sodium_malloc(2 * (KEY_FILE_MAX + 1));
    if (!text) {
        set_err(err, errlen, "%s: out of memory", key_path);
        return -ENOMEM;
    }
    size_t len;
    const char *why;
    int rc = read_key_file(key_path, 1, text, &len, err, errlen);
    if (rc == 0 && key_decode(secret, text, len, text + KEY_FILE_MAX + 1, &why) < 0) {
        rc = -EBADMSG;
        set_err(err, errlen, "%s: not a secret key file: %s", key_path, why);
    }
    sodium_free(text);
    return rc;
}

int keyfile_load(sec_keypair *kp, const char *key_path, char *err, size_t errlen)
{
    if (!kp || !key_path)
        return -EINVAL;
    memset(kp, 0, sizeof *kp);
    if (sec_init() < 0) {
        set_err(err, errlen, "cannot initialise libsodium");
        return -EIO;
    }
    kp->sk = sodium_malloc(SEC_KEY_BYTES);
    if (!kp->sk) {
        set_err(err, errlen, "%s: out of memory", key_path);
        return -ENOMEM;
    }
    int rc = keyfile_read_secret(kp->sk, key_path, err, errlen);
    if (rc < 0) {
        sec_keypair_free(kp);
        return rc;
    }
    crypto_scalarmult_base(kp->pk, kp->sk);
    sodium_mprotect_readonly(kp->sk);
    return 0;
}

int keyfile_load_pub(uint8_t pk[SEC_KEY_BYTES], const char *pub_path, char *err, size_t errlen)
{
    if (!pk || !pub_path)
        return -EINVAL;
    if (sec_init() < 0)
        return -EIO;
    char text[KEY_FILE_MAX + 1], scratch[KEYFILE_B64];
    size_t len;
    int rc = read_key_file(pub_path, 0, text, &len, err, errlen);
    if (rc < 0)
        return rc;
    const char *why;
    if (key_decode(pk, text, len, scratch, &why) < 0) {
        set_err(err, errlen, "%s: not a public key file: %s", pub_path, why);
        return -EBADMSG;
    }
    return 0;
}

int keyfile_save(const sec_keypair *kp, const char *key_path, const char *pub_path, int overwrite, char *err,
                 size_t errlen)
{
    if (!kp || !kp->sk)
        return -EINVAL;
    return keyfile_write(kp->sk, kp->pk, key_path, pub_path, overwrite, err, errlen);
}

int keyfile_write(const uint8_t secret[SEC_KEY_BYTES], const uint8_t pk[SEC_KEY_BYTES], const char *key_path,
                  const char *pub_path, int overwrite, char *err, size_t errlen)
{
    if (!secret || !pk || !key_path)
        return -EINVAL;
    if (sec_init() < 0)
        return -EIO;
    if (!overwrite) {
        /* Refuse before writing anything, so that a half-done save never
         * leaves a new secret key next to an old public key. */
        const char *paths[2] = {key_path, pub_path};
        for (int i = 0; i < 2; i++)
            if (paths[i] && access(paths[i], F_OK) == 0) {
                set_err(err, errlen, "%s exists", paths[i]);
                return -EEXIST;
            }
    }
    char *text = sodium_malloc(KEYFILE_B64 + 1);
    if (!text) {
        set_err(err, errlen, "%s: out of memory", key_path);
        return -ENOMEM;
    }
    sodium_bin2base64(text, KEYFILE_B64, secret, SEC_KEY_BYTES, sodium_base64_VARIANT_ORIGINAL);
    text[KEYFILE_B64 - 1] = '\n';
    const int flags = overwrite ? 0 : WHOLEFILE_NOREPLACE;
    int rc = wholefile_write(key_path, text, KEYFILE_B64, 0600, flags, err, errlen);
    sodium_free(text);
    if (rc < 0 || !pub_path)
        return rc;
    char pub[KEYFILE_B64 + 1];
    keyfile_pub_encode(pk, pub);
    pub[KEYFILE_B64 - 1] = '\n';
    rc = wholefile_write(pub_path, pub, KEYFILE_B64, 0644, flags, err, errlen);
    if (rc < 0 && !overwrite)
        unlink(key_path); /* ours, written a moment ago: no key without its .pub */
    return rc;
}
