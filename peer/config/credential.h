/* Admission credentials (CLUSTER.md, "Admission credentials"): whoever holds
 * a cluster's admission key (an Ed25519 key pair, `sgp cluster keygen`)
 * admits a peer that is not in the cluster file by signing its X25519 public
 * key together with the cluster's name, the id it may take (or any), a
 * serial (what a revocation names) and an expiry. The credential is a small
 * text file; checking it needs only the admission public key, so no service
 * runs during training.
 *
 *   admit_key ak;                                     // sodium_malloc'ed secret
 *   admit_key_generate(&ak);
 *   admit_key_save(&ak, "keys/admit.key", "keys/admit.pub", 0, err, sizeof err);
 *
 *   credential c = {.id = 7, .expires = 0};
 *   snprintf(c.cluster, sizeof c.cluster, "my-run");
 *   memcpy(c.key, peer_pk, SEC_KEY_BYTES);
 *   credential_sign(&c, &ak);                          // fills serial (random) and sig
 *   credential_save(&c, "7.cred", 0, err, sizeof err);
 *
 *   credential_load(&c, "7.cred", err, sizeof err);    // "7.cred:4: ..." on a bad line
 *   if (credential_check(&c, admit_pk, "my-run", time(NULL), err, sizeof err) < 0)
 *       ...                                            // forged, another cluster's, expired
 *   admit_key_free(&ak);
 */
#ifndef PEER_CONFIG_CREDENTIAL_H
#define PEER_CONFIG_CREDENTIAL_H

#include <stddef.h>
#include <stdint.h>

#include "peer/wire/sec.h"

#define CREDENTIAL_ANY_ID (-1L)
#define ADMIT_PK_BYTES 32 /* = SEC_KEY_BYTES: spelled as a peer's key is */
#define ADMIT_SK_BYTES 64
#define CREDENTIAL_SIG_BYTES 64
#define CREDENTIAL_NAME_MAX 64
#define CREDENTIAL_FILE_MAX 4096 /* a credential is a few hundred bytes */

typedef struct admit_key {
    uint8_t pk[ADMIT_PK_BYTES];
    uint8_t *sk; /* ADMIT_SK_BYTES in sodium_malloc memory (guarded, wiped on free) */
} admit_key;

typedef struct credential {
    char cluster[CREDENTIAL_NAME_MAX + 1]; /* the cluster's name (CLUSTER.md "cluster NAME") */
    uint8_t key[SEC_KEY_BYTES];            /* the admitted peer's X25519 public key */
    long id;                               /* the id it may take, 0..65535, or CREDENTIAL_ANY_ID */
    uint64_t serial;                       /* what a revocation names */
    int64_t expires;                       /* Unix seconds after which it is refused; 0: never */
    uint8_t sig[CREDENTIAL_SIG_BYTES];     /* Ed25519 over credential_message() */
} credential;

/* 0, or -ENOMEM (no guarded memory) / -EIO (libsodium did not start). */
int admit_key_generate(admit_key *k);
void admit_key_free(admit_key *k);
/* Files as keyfile.h writes keys: one base64 line each, the secret (the
 * 32-byte seed) 0600
 * (refused on load if its group or others may read it), written whole
 * (overwrite 0: an existing file is never replaced, -EEXIST). pub_path may
 * be NULL. 0 or a negative errno with one line naming the file. */
int admit_key_save(const admit_key *k, const char *key_path, const char *pub_path, int overwrite, char *err,
                   size_t errlen);
int admit_key_load(admit_key *k, const char *key_path, char *err, size_t errlen);
/* (The key files hold the Ed25519 seed and the public key in keyfile.h's
 * form: keyfile_load_pub and keyfile_pub_encode read and spell the public
 * key as they do a peer's.) */

/* The bytes the signature covers:
 *  "sgp-v1 credential" 0x00 || u8 len(cluster) || cluster || key (32) ||
 *  i32le id (-1: any) || u64le serial || i64le expires
 * into out (at least CREDENTIAL_MESSAGE_MAX bytes); returns the length. */
#define CREDENTIAL_MESSAGE_MAX (18 + 1 + CREDENTIAL_NAME_MAX + SEC_KEY_BYTES + 4 + 8 + 8)
size_t credential_message(const credential *c, uint8_t *out);

/* Draws a random serial (when c->serial is 0) and signs. 0, or -EINVAL when
 * a field is out of range (a bad cluster name, an id past 65535). */
int credential_sign(credential *c, const admit_key *k);
/* 0 when c is signed by the holder of admit_pk, names `cluster` (NULL: any)
 * and has not expired at `now`; else -EPERM with the reason: "not signed by
 * this cluster's admission key", "for cluster 'x', not 'y'", "expired at
 * ..." (a stale credential). */
int credential_check(const credential *c, const uint8_t admit_pk[ADMIT_PK_BYTES], const char *cluster,
                     int64_t now, char *err, size_t errlen);

/* -EPERM ("revoked (serial ...)") when c's serial is among the n serials of
 * revocations that revocation_check accepted; else 0. */
int credential_revoked(const credential *c, const uint64_t *revoked, size_t n, char *err, size_t errlen);

/* The credential in a joiner's handshake (WIRE.md "Joining": flags, serial,
 * expires, key, signature; SEC_CRED_BYTES): to_wire writes it; from_wire
 * reads it back for the slot `id` it was offered for, with the responder's
 * own cluster name (what the signature must cover). from_wire: 0, or
 * -EINVAL (unknown flags). */
void credential_to_wire(const credential *c, uint8_t out[SEC_CRED_BYTES]);
int credential_from_wire(credential *c, const uint8_t in[SEC_CRED_BYTES], const char *cluster, long id);

/* The text form (CLUSTER.md). parse: name is the file's for messages
 * ("FILE:LINE: message"); every field exactly once, nothing else. 0 or
 * -EINVAL with the message. load: the same from a file (at most
 * CREDENTIAL_FILE_MAX bytes). save: written whole, mode 0644. write: into
 * buf (at least CREDENTIAL_TEXT_MAX bytes); the length. */
#define CREDENTIAL_TEXT_MAX 512
size_t credential_write(const credential *c, char *buf);
int credential_parse(credential *c, const char *text, size_t len, const char *name, char *err, size_t errlen);
int credential_load(credential *c, const char *path, char *err, size_t errlen);
int credential_save(const credential *c, const char *path, int overwrite, char *err, size_t errlen);

/* A revocation: the admission key's word that the credential with this
 * serial is no longer good. Signed over
 *  "sgp-v1 revocation" 0x00 || u8 len(cluster) || cluster || u64le serial
 * and written, read and checked as a credential is (check: -EPERM with
 * "not signed by this cluster's admission key" or "for cluster ..."). */
typedef struct revocation {
    char cluster[CREDENTIAL_NAME_MAX + 1];
    uint64_t serial;
    uint8_t sig[CREDENTIAL_SIG_BYTES];
} revocation;

int revocation_sign(revocation *r, const admit_key *k);
int revocation_check(const revocation *r, const uint8_t admit_pk[ADMIT_PK_BYTES], const char *cluster, char *err,
                     size_t errlen);
size_t revocation_write(const revocation *r, char *buf);
int revocation_parse(revocation *r, const char *text, size_t len, const char *name, char *err, size_t errlen);
int revocation_load(revocation *r, const char *path, char *err, size_t errlen);
int revocation_save(const revocation *r, const char *path, int overwrite, char *err, size_t errlen);
/* The revocation files paths[0 .. n), each loaded and checked against
 * admit_pk and cluster, into out. 0, or the first file's error with
 * "PATH: why" in err. */
int revocations_load(const char *const *paths, int n, const uint8_t admit_pk[ADMIT_PK_BYTES], const char *cluster,
                     revocation *out, char *err, size_t errlen);

#endif
