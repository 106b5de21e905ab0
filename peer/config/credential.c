/* Admission credentials (credential.h): Ed25519 over a fixed byte layout,
 * and a line-per-field text form that is read back strictly, each field
 * once, so that one credential has one spelling. */
#include <errno.h>
#include <inttypes.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "peer/config/credential.h"
#include "peer/config/keyfile.h"
#include "peer/store/wholefile.h"

_Static_assert(ADMIT_PK_BYTES == crypto_sign_PUBLICKEYBYTES && ADMIT_PK_BYTES == SEC_KEY_BYTES, "pk");
_Static_assert(ADMIT_SK_BYTES == crypto_sign_SECRETKEYBYTES && SEC_KEY_BYTES == crypto_sign_SEEDBYTES, "sk");
_Static_assert(CREDENTIAL_SIG_BYTES == crypto_sign_BYTES, "sig");

#define SIG_B64 sodium_base64_ENCODED_LEN(CREDENTIAL_SIG_BYTES, sodium_base64_VARIANT_ORIGINAL)
static const char DOMAIN[] = "sgp-v1 credential"; /* its NUL is part of the message */

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

/* The cluster file's rule for names (CLUSTER.md): 1 to 64 of A-Z a-z 0-9 . _ - */
static int name_ok(const char *s, size_t len)
{
    if (len < 1 || len > CREDENTIAL_NAME_MAX)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') ||
              s[i] == '.' || s[i] == '_' || s[i] == '-'))
            return 0;
    return 1;
}

static int fields_ok(const credential *c)
{
    return name_ok(c->cluster, strnlen(c->cluster, sizeof c->cluster)) &&
           (c->id == CREDENTIAL_ANY_ID || (c->id >= 0 && c->id <= 65535)) && c->expires >= 0;
}

int admit_key_generate(admit_key *k)
{
    if (!k)
        return -EINVAL;
    memset(k, 0, sizeof *k);
    if (sec_init() < 0)
        return -EIO;
    if (!(k->sk = sodium_malloc(ADMIT_SK_BYTES)))
        return -ENOMEM;
    crypto_sign_keypair(k->pk, k->sk);
    sodium_mprotect_readonly(k->sk);
    return 0;
}

void admit_key_free(admit_key *k)
{
    if (!k)
        return;
    sodium_free(k->sk); /* wipes */
    k->sk = NULL;
}

int admit_key_save(const admit_key *k, const char *key_path, const char *pub_path, int overwrite, char *err,
                   size_t errlen)
{
    if (!k || !k->sk)
        return -EINVAL;
    uint8_t *seed = sodium_malloc(crypto_sign_SEEDBYTES);
    if (!seed) {
        set_err(err, errlen, "%s: out of memory", key_path);
        return -ENOMEM;
    }
    crypto_sign_ed25519_sk_to_seed(seed, k->sk);
    int rc = keyfile_write(seed, k->pk, key_path, pub_path, overwrite, err, errlen);
    sodium_free(seed);
    return rc;
}

int admit_key_load(admit_key *k, const char *key_path, char *err, size_t errlen)
{
    if (!k)
        return -EINVAL;
    memset(k, 0, sizeof *k);
    if (sec_init() < 0)
        return -EIO;
    uint8_t *seed = sodium_malloc(crypto_sign_SEEDBYTES);
    k->sk = sodium_malloc(ADMIT_SK_BYTES);
    int rc = -ENOMEM;
    if (!seed || !k->sk)
        set_err(err, errlen, "%s: out of memory", key_path);
    else if ((rc = keyfile_read_secret(seed, key_path, err, errlen)) == 0) {
        crypto_sign_seed_keypair(k->pk, k->sk, seed);
        sodium_mprotect_readonly(k->sk);
    }
    sodium_free(seed);
    if (rc < 0)
        admit_key_free(k);
    return rc;
}

static size_t put_le(uint8_t *out, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        out[i] = (uint8_t)(v >> (8 * i));
    return (size_t)bytes;
}

size_t credential_message(const credential *c, uint8_t *out)
{
    const size_t name = strnlen(c->cluster, CREDENTIAL_NAME_MAX);
    size_t o = 0;
    memcpy(out, DOMAIN, sizeof DOMAIN), o += sizeof DOMAIN;
    out[o++] = (uint8_t)name;
    memcpy(out + o, c->cluster, name), o += name;
    memcpy(out + o, c->key, SEC_KEY_BYTES), o += SEC_KEY_BYTES;
    o += put_le(out + o, (uint32_t)(int32_t)c->id, 4);
    o += put_le(out + o, c->serial, 8);
    o += put_le(out + o, (uint64_t)c->expires, 8);
    return o;
}

int credential_sign(credential *c, const admit_key *k)
{
    if (!c || !k || !k->sk || !fields_ok(c))
        return -EINVAL;
    if (sec_init() < 0)
        return -EIO;
    while (c->serial == 0)
        randombytes_buf(&c->serial, sizeof c->serial);
    uint8_t m[CREDENTIAL_MESSAGE_MAX];
    crypto_sign_detached(c->sig, NULL, m, credential_message(c, m), k->sk);
    return 0;
}

int credential_check(const credential *c, const uint8_t admit_pk[ADMIT_PK_BYTES], const char *cluster, int64_t now,
                     char *err, size_t errlen)
{
    if (!c || !admit_pk)
        return -EINVAL;
    if (sec_init() < 0)
        return -EIO;
    uint8_t m[CREDENTIAL_MESSAGE_MAX];
    if (!fields_ok(c) || crypto_sign_verify_detached(c->sig, m, credential_message(c, m), admit_pk) != 0) {
        set_err(err, errlen, "not signed by this cluster's admission key");
        return -EPERM;
    }
    if (cluster && strcmp(cluster, c->cluster) != 0) {
        set_err(err, errlen, "for cluster '%s', not '%s'", c->cluster, cluster);
        return -EPERM;
    }
    if (c->expires && now > c->expires) {
        char when[32] = "?";
        const time_t t = (time_t)c->expires;
        struct tm tm;
        if (gmtime_r(&t, &tm))
            strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
        set_err(err, errlen, "expired at %s (serial %016" PRIx64 ")", when, c->serial);
        return -EPERM;
    }
    return 0;
}

size_t credential_write(const credential *c, char *buf)
{
    char key[KEYFILE_B64], sig[SIG_B64], id[24];
    keyfile_pub_encode(c->key, key);
    sodium_bin2base64(sig, sizeof sig, c->sig, CREDENTIAL_SIG_BYTES, sodium_base64_VARIANT_ORIGINAL);
    if (c->id == CREDENTIAL_ANY_ID)
        snprintf(id, sizeof id, "any");
    else
        snprintf(id, sizeof id, "%ld", c->id);
    int n = snprintf(buf, CREDENTIAL_TEXT_MAX,
                     "# sgp admission credential (peer/config/CLUSTER.md)\n"
                     "credential 1\ncluster %.64s\nkey %s\nid %s\nserial %016" PRIx64 "\nexpires %" PRId64
                     "\nsignature %s\n",
                     c->cluster, key, id, c->serial, c->expires, sig);
    return n < 0 ? 0 : (size_t)n;
}

/* One field's text, [s, s + len), as a number: decimal (base 10) or 16
 * hexadecimal digits (base 16); 0 or -1. */
static int number(const char *s, size_t len, int base, uint64_t max, uint64_t *out)
{
    if (len == 0 || len > 20 || (base == 16 && len != 16))
        return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        int d = s[i] >= '0' && s[i] <= '9' ? s[i] - '0'
                : base == 16 && s[i] >= 'a' && s[i] <= 'f' ? s[i] - 'a' + 10
                                                           : -1;
        if (d < 0 || v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base)
            return -1;
        v = v * (uint64_t)base + (uint64_t)d;
    }
    if (v > max || (base == 10 && len > 1 && s[0] == '0'))
        return -1;
    *out = v;
    return 0;
}

enum { F_VERSION, F_CLUSTER, F_KEY, F_ID, F_SERIAL, F_EXPIRES, F_SIGNATURE, N_FIELDS };
static const char *const FIELD[N_FIELDS] = {"credential", "cluster", "key", "id", "serial", "expires", "signature"};

int credential_parse(credential *c, const char *text, size_t len, const char *name, char *err, size_t errlen)
{
    if (!c || (!text && len))
        return -EINVAL;
    memset(c, 0, sizeof *c);
    int seen[N_FIELDS] = {0};
    size_t at = 0;
    for (int line = 1; at < len; line++) {
        const char *ln = text + at, *nl = memchr(ln, '\n', len - at);
        size_t n = nl ? (size_t)(nl - ln) : len - at;
        at += n + (nl != NULL);
        if (n && ln[n - 1] == '\r')
            n--;
        if (n == 0 || ln[0] == '#')
            continue;
        const char *sp = memchr(ln, ' ', n);
        const size_t word = sp ? (size_t)(sp - ln) : n;
        const char *v = sp ? sp + 1 : ln + n;
        const size_t vn = sp ? n - word - 1 : 0;
        int f = 0;
        while (f < N_FIELDS && !(strlen(FIELD[f]) == word && memcmp(ln, FIELD[f], word) == 0))
            f++;
        if (f == N_FIELDS) {
            set_err(err, errlen, "%s:%d: unknown field '%.*s' (expected credential, cluster, key, id, serial, "
                                 "expires or signature)",
                    name, line, (int)(word > 32 ? 32 : word), ln);
            return -EINVAL;
        }
        if (seen[f]) {
            set_err(err, errlen, "%s:%d: '%s' given twice (first on line %d)", name, line, FIELD[f], seen[f]);
            return -EINVAL;
        }
        seen[f] = line;
        uint64_t u = 0;
        const char *why = NULL;
        int bad = 0;
        switch (f) {
        case F_VERSION:
            bad = vn != 1 || v[0] != '1';
            why = "this reader knows credential version 1";
            break;
        case F_CLUSTER:
            bad = !name_ok(v, vn);
            why = "a cluster name is 1 to 64 letters, digits, '.', '_' or '-'";
            if (!bad)
                memcpy(c->cluster, v, vn);
            break;
        case F_KEY:
            bad = keyfile_pub_decode(c->key, v, vn, &why) < 0;
            break;
        case F_ID:
            if (vn == 3 && memcmp(v, "any", 3) == 0)
                c->id = CREDENTIAL_ANY_ID;
            else if (!(bad = number(v, vn, 10, 65535, &u) < 0))
                c->id = (long)u;
            why = "an id is a number from 0 to 65535, or any";
            break;
        case F_SERIAL:
            bad = number(v, vn, 16, UINT64_MAX, &c->serial) < 0;
            why = "a serial is 16 lower-case hexadecimal digits";
            break;
        case F_EXPIRES:
            bad = number(v, vn, 10, INT64_MAX, &u) < 0;
            c->expires = (int64_t)u;
            why = "expires is Unix seconds, or 0 for never";
            break;
        case F_SIGNATURE: {
            size_t got = 0;
            const char *end = NULL;
            char again[SIG_B64];
            bad = vn != SIG_B64 - 1 ||
                  sodium_base642bin(c->sig, sizeof c->sig, v, vn, NULL, &got, &end, sodium_base64_VARIANT_ORIGINAL) ||
                  got != CREDENTIAL_SIG_BYTES || end != v + vn;
            if (!bad) { /* one spelling */
                sodium_bin2base64(again, sizeof again, c->sig, CREDENTIAL_SIG_BYTES, sodium_base64_VARIANT_ORIGINAL);
                bad = memcmp(again, v, vn) != 0;
            }
            why = "a signature is 64 bytes in canonical base64 (88 characters)";
            break;
        }
        }
        if (bad) {
            set_err(err, errlen, "%s:%d: bad %s: %s", name, line, FIELD[f], why);
            return -EINVAL;
        }
    }
    for (int f = 0; f < N_FIELDS; f++)
        if (!seen[f]) {
            set_err(err, errlen, "%s: no '%s' line", name, FIELD[f]);
            return -EINVAL;
        }
    return 0;
}

int credential_load(credential *c, const char *path, char *err, size_t errlen)
{
    char *text;
    size_t len;
    int rc = wholefile_read(path, CREDENTIAL_FILE_MAX, &text, &len);
    if (rc < 0) {
        set_err(err, errlen, "%s: %s", path, rc == -EFBIG ? "not a credential (too long)" : strerror(-rc));
        return rc;
    }
    rc = credential_parse(c, text, len, path, err, errlen);
    free(text);
    return rc;
}

int credential_save(const credential *c, const char *path, int overwrite, char *err, size_t errlen)
{
    char buf[CREDENTIAL_TEXT_MAX];
    const size_t n = credential_write(c, buf);
    return wholefile_write(path, buf, n, 0644, overwrite ? 0 : WHOLEFILE_NOREPLACE, err, errlen);
}
