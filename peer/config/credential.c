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
static const char DOMAIN[] = "sgp-v1 credential", REVOKE_DOMAIN[] = "sgp-v1 revocation"; /* NULs signed too */

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

/* The start of every signed record: its domain (with its NUL), then the
 * cluster's name with its length byte. */
static size_t message_head(uint8_t *out, const char *domain, const char *cluster)
{
    const size_t d = strlen(domain) + 1, name = strnlen(cluster, CREDENTIAL_NAME_MAX);
    memcpy(out, domain, d);
    out[d] = (uint8_t)name;
    memcpy(out + d + 1, cluster, name);
    return d + 1 + name;
}

/* A record's signature over m and its cluster: 0, or -EPERM with the
 * reason (fields_good 0: a field out of range, taken as forged). */
static int check_signed(const uint8_t sig[CREDENTIAL_SIG_BYTES], const uint8_t *m, size_t len, int fields_good,
                        const uint8_t admit_pk[ADMIT_PK_BYTES], const char *have, const char *want, char *err,
                        size_t errlen)
{
    if (!fields_good || crypto_sign_verify_detached(sig, m, len, admit_pk) != 0) {
        set_err(err, errlen, "not signed by this cluster's admission key");
        return -EPERM;
    }
    if (want && strcmp(want, have) != 0) {
        set_err(err, errlen, "for cluster '%s', not '%s'", have, want);
        return -EPERM;
    }
    return 0;
}

size_t credential_message(const credential *c, uint8_t *out)
{
    size_t o = message_head(out, DOMAIN, c->cluster);
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

int credential_revoked(const credential *c, const uint64_t *revoked, size_t n, char *err, size_t errlen)
{
    for (size_t i = 0; c && i < n; i++)
        if (revoked[i] == c->serial) {
            set_err(err, errlen, "revoked (serial %016" PRIx64 ")", c->serial);
            return -EPERM;
        }
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
    const size_t len = credential_message(c, m);
    const int rc = check_signed(c->sig, m, len, fields_ok(c), admit_pk, c->cluster, cluster, err, errlen);
    if (rc < 0)
        return rc;
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

/* The text form of a signed record: lines "FIELD VALUE", each of fields[]
 * exactly once, '#' lines and blank lines skipped. value(ctx, f, v, vn,
 * &why) takes field f's value: 0, or -1 with why set. */
typedef int (*record_value_fn)(void *ctx, int f, const char *v, size_t vn, const char **why);

static int record_parse(const char *text, size_t len, const char *name, const char *const *fields, int n_fields,
                        record_value_fn value, void *ctx, char *err, size_t errlen)
{
    int seen[8] = {0};
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
        int f = 0;
        while (f < n_fields && !(strlen(fields[f]) == word && memcmp(ln, fields[f], word) == 0))
            f++;
        if (f == n_fields) {
            char expected[128] = "";
            for (int k = 0; k < n_fields; k++)
                snprintf(expected + strlen(expected), sizeof expected - strlen(expected), "%s%s",
                         k == 0 ? "" : k == n_fields - 1 ? " or " : ", ", fields[k]);
            set_err(err, errlen, "%s:%d: unknown field '%.*s' (expected %s)", name, line,
                    (int)(word > 32 ? 32 : word), ln, expected);
            return -EINVAL;
        }
        if (seen[f]) {
            set_err(err, errlen, "%s:%d: '%s' given twice (first on line %d)", name, line, fields[f], seen[f]);
            return -EINVAL;
        }
        seen[f] = line;
        const char *why = "malformed";
        if (value(ctx, f, sp ? sp + 1 : ln + n, sp ? n - word - 1 : 0, &why) < 0) {
            set_err(err, errlen, "%s:%d: bad %s: %s", name, line, fields[f], why);
            return -EINVAL;
        }
    }
    for (int f = 0; f < n_fields; f++)
        if (!seen[f]) {
            set_err(err, errlen, "%s: no '%s' line", name, fields[f]);
            return -EINVAL;
        }
    return 0;
}

/* Values shared by both records. */
static int version_value(const char *v, size_t vn, const char **why)
{
    *why = "this reader knows version 1";
    return vn == 1 && v[0] == '1' ? 0 : -1;
}

static int cluster_value(char out[CREDENTIAL_NAME_MAX + 1], const char *v, size_t vn, const char **why)
{
    *why = "a cluster name is 1 to 64 letters, digits, '.', '_' or '-'";
    if (!name_ok(v, vn))
        return -1;
    memcpy(out, v, vn), out[vn] = 0;
    return 0;
}

static int serial_value(uint64_t *out, const char *v, size_t vn, const char **why)
{
    *why = "a serial is 16 lower-case hexadecimal digits";
    return number(v, vn, 16, UINT64_MAX, out);
}

static int signature_value(uint8_t sig[CREDENTIAL_SIG_BYTES], const char *v, size_t vn, const char **why)
{
    size_t got = 0;
    const char *end = NULL;
    char again[SIG_B64];
    *why = "a signature is 64 bytes in canonical base64 (88 characters)";
    if (vn != SIG_B64 - 1 ||
        sodium_base642bin(sig, CREDENTIAL_SIG_BYTES, v, vn, NULL, &got, &end, sodium_base64_VARIANT_ORIGINAL) ||
        got != CREDENTIAL_SIG_BYTES || end != v + vn)
        return -1;
    sodium_bin2base64(again, sizeof again, sig, CREDENTIAL_SIG_BYTES, sodium_base64_VARIANT_ORIGINAL);
    return memcmp(again, v, vn) == 0 ? 0 : -1; /* one spelling */
}

enum { C_VERSION, C_CLUSTER, C_KEY, C_ID, C_SERIAL, C_EXPIRES, C_SIGNATURE, C_FIELDS };
static const char *const C_FIELD[C_FIELDS] = {"credential", "cluster", "key", "id", "serial", "expires", "signature"};

static int credential_value(void *ctx, int f, const char *v, size_t vn, const char **why)
{
    credential *c = ctx;
    uint64_t u;
    switch (f) {
    case C_VERSION:
        return version_value(v, vn, why);
    case C_CLUSTER:
        return cluster_value(c->cluster, v, vn, why);
    case C_KEY:
        return keyfile_pub_decode(c->key, v, vn, why) < 0 ? -1 : 0;
    case C_ID:
        *why = "an id is a number from 0 to 65535, or any";
        if (vn == 3 && memcmp(v, "any", 3) == 0)
            return c->id = CREDENTIAL_ANY_ID, 0;
        return number(v, vn, 10, 65535, &u) < 0 ? -1 : (c->id = (long)u, 0);
    case C_SERIAL:
        return serial_value(&c->serial, v, vn, why);
    case C_EXPIRES:
        *why = "expires is Unix seconds, or 0 for never";
        return number(v, vn, 10, INT64_MAX, &u) < 0 ? -1 : (c->expires = (int64_t)u, 0);
    default:
        return signature_value(c->sig, v, vn, why);
    }
}

int credential_parse(credential *c, const char *text, size_t len, const char *name, char *err, size_t errlen)
{
    if (!c || (!text && len))
        return -EINVAL;
    memset(c, 0, sizeof *c);
    return record_parse(text, len, name, C_FIELD, C_FIELDS, credential_value, c, err, errlen);
}

/* A record's file, whole (what: "credential", "revocation"). */
static int read_record(const char *path, const char *what, char **text, size_t *len, char *err, size_t errlen)
{
    int rc = wholefile_read(path, CREDENTIAL_FILE_MAX, text, len);
    if (rc < 0)
        set_err(err, errlen, "%s: %s%s%s", path, rc == -EFBIG ? "not a " : strerror(-rc), rc == -EFBIG ? what : "",
                rc == -EFBIG ? " (too long)" : "");
    return rc;
}

int credential_load(credential *c, const char *path, char *err, size_t errlen)
{
    char *text;
    size_t len;
    int rc = read_record(path, "credential", &text, &len, err, errlen);
    if (rc == 0) {
        rc = credential_parse(c, text, len, path, err, errlen);
        free(text);
    }
    return rc;
}

int credential_save(const credential *c, const char *path, int overwrite, char *err, size_t errlen)
{
    char buf[CREDENTIAL_TEXT_MAX];
    const size_t n = credential_write(c, buf);
    return wholefile_write(path, buf, n, 0644, overwrite ? 0 : WHOLEFILE_NOREPLACE, err, errlen);
}

/* ---- revocations ---------------------------------------------------------------- */

static size_t revocation_message(const revocation *r, uint8_t *out)
{
    const size_t o = message_head(out, REVOKE_DOMAIN, r->cluster);
    return o + put_le(out + o, r->serial, 8);
}

int revocation_sign(revocation *r, const admit_key *k)
{
    if (!r || !k || !k->sk || !name_ok(r->cluster, strnlen(r->cluster, sizeof r->cluster)))
        return -EINVAL;
    if (sec_init() < 0)
        return -EIO;
    uint8_t m[CREDENTIAL_MESSAGE_MAX];
    crypto_sign_detached(r->sig, NULL, m, revocation_message(r, m), k->sk);
    return 0;
}

int revocation_check(const revocation *r, const uint8_t admit_pk[ADMIT_PK_BYTES], const char *cluster, char *err,
                     size_t errlen)
{
    if (!r || !admit_pk)
        return -EINVAL;
    if (sec_init() < 0)
        return -EIO;
    uint8_t m[CREDENTIAL_MESSAGE_MAX];
    const size_t len = revocation_message(r, m);
    return check_signed(r->sig, m, len, name_ok(r->cluster, strnlen(r->cluster, sizeof r->cluster)), admit_pk,
                        r->cluster, cluster, err, errlen);
}

size_t revocation_write(const revocation *r, char *buf)
{
    char sig[SIG_B64];
    sodium_bin2base64(sig, sizeof sig, r->sig, CREDENTIAL_SIG_BYTES, sodium_base64_VARIANT_ORIGINAL);
    int n = snprintf(buf, CREDENTIAL_TEXT_MAX,
                     "# sgp revocation (peer/config/CLUSTER.md)\nrevocation 1\ncluster %.64s\nserial %016" PRIx64
                     "\nsignature %s\n",
                     r->cluster, r->serial, sig);
    return n < 0 ? 0 : (size_t)n;
}

enum { R_VERSION, R_CLUSTER, R_SERIAL, R_SIGNATURE, R_FIELDS };
static const char *const R_FIELD[R_FIELDS] = {"revocation", "cluster", "serial", "signature"};

static int revocation_value(void *ctx, int f, const char *v, size_t vn, const char **why)
{
    revocation *r = ctx;
    switch (f) {
    case R_VERSION:
        return version_value(v, vn, why);
    case R_CLUSTER:
        return cluster_value(r->cluster, v, vn, why);
    case R_SERIAL:
        return serial_value(&r->serial, v, vn, why);
    default:
        return signature_value(r->sig, v, vn, why);
    }
}

int revocation_parse(revocation *r, const char *text, size_t len, const char *name, char *err, size_t errlen)
{
    if (!r || (!text && len))
        return -EINVAL;
    memset(r, 0, sizeof *r);
    return record_parse(text, len, name, R_FIELD, R_FIELDS, revocation_value, r, err, errlen);
}

int revocation_load(revocation *r, const char *path, char *err, size_t errlen)
{
    char *text;
    size_t len;
    int rc = read_record(path, "revocation", &text, &len, err, errlen);
    if (rc == 0) {
        rc = revocation_parse(r, text, len, path, err, errlen);
        free(text);
    }
    return rc;
}

int revocation_save(const revocation *r, const char *path, int overwrite, char *err, size_t errlen)
{
    char buf[CREDENTIAL_TEXT_MAX];
    const size_t n = revocation_write(r, buf);
    return wholefile_write(path, buf, n, 0644, overwrite ? 0 : WHOLEFILE_NOREPLACE, err, errlen);
}

int revocations_load(const char *const *paths, int n, const uint8_t admit_pk[ADMIT_PK_BYTES], const char *cluster,
                     revocation *out, char *err, size_t errlen)
{
    char why[400];
    for (int i = 0; i < n; i++) {
        int rc = revocation_load(&out[i], paths[i], why, sizeof why);
        if (rc == 0)
            rc = revocation_check(&out[i], admit_pk, cluster, why, sizeof why);
        if (rc < 0) {
            snprintf(err, errlen, "%s: %s", paths[i], why);
            return rc;
        }
    }
    return 0;
}

static uint64_t get_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << 8 * i;
    return v;
}

void credential_to_wire(const credential *c, uint8_t out[SEC_CRED_BYTES])
{
    out[0] = c->id == CREDENTIAL_ANY_ID ? 1 : 0;
    put_le(out + 1, c->serial, 8);
    put_le(out + 9, (uint64_t)c->expires, 8);
    memcpy(out + 17, c->key, SEC_KEY_BYTES);
    memcpy(out + 17 + SEC_KEY_BYTES, c->sig, CREDENTIAL_SIG_BYTES);
}

int credential_from_wire(credential *c, const uint8_t in[SEC_CRED_BYTES], const char *cluster, long id)
{
    memset(c, 0, sizeof *c);
    if (in[0] & ~1u)
        return -EINVAL;
    snprintf(c->cluster, sizeof c->cluster, "%s", cluster);
    c->id = in[0] & 1 ? CREDENTIAL_ANY_ID : id;
    c->serial = get_le64(in + 1);
    c->expires = (int64_t)get_le64(in + 9);
    memcpy(c->key, in + 17, SEC_KEY_BYTES);
    memcpy(c->sig, in + 17 + SEC_KEY_BYTES, CREDENTIAL_SIG_BYTES);
    return 0;
}
