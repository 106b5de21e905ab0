/* Key files and the text form of keys (peer/wire/WIRE.md "Keys"): `sgp
 * keygen` writes NAME.key and NAME.pub, a peer reads its NAME.key, and the
 * cluster file (CLUSTER.md) lists public keys in the same base64.
 *
 *   sec_keypair me = {0};
 *   char err[256];
 *   if (keyfile_load(&me, "run/0.key", err, sizeof err) < 0) {
 *       fprintf(stderr, "%s\n", err);          // names the path and the problem
 *       ...
 *   }
 *   sec_hs_init(&hs, SEC_INITIATOR, 0, 3, &me, cluster_pubkey_lookup, &c, cid);   // peer/wire/sec.h
 *   sec_keypair_free(&me);
 *
 *   sec_keypair kp;
 *   sec_keypair_generate(&kp);
 *   keyfile_save(&kp, "run/3.key", "run/3.pub", 0, err, sizeof err);
 *   char b64[KEYFILE_B64];
 *   keyfile_pub_encode(kp.pk, b64);            // as in .pub files and the cluster file
 *
 * The keys themselves (sec_keypair, in sodium_malloc memory) belong to
 * peer/wire/sec.h; this file only moves them between files and text.
 */
#ifndef PEER_CONFIG_KEYFILE_H
#define PEER_CONFIG_KEYFILE_H

#include <stddef.h>
#include <stdint.h>

#include "peer/wire/sec.h"

#define KEYFILE_B64 45 /* base64 text of a key with its NUL: 44 + 1 */

/* Read a secret key file (one base64 line) and derive its public key.
 * Refuses, like ssh, a file that its group or others may read or write
 * (-EACCES), as well as one that is not a regular file. 0, or a negative
 * errno with a one-line message in err (which names the path). */
int keyfile_load(sec_keypair *kp, const char *key_path, char *err, size_t errlen);

/* Read a public key file (one base64 line). 0 or a negative errno with a
 * message. */
int keyfile_load_pub(uint8_t pk[SEC_KEY_BYTES], const char *pub_path, char *err, size_t errlen);

/* Write key_path (mode 0600) and pub_path (mode 0644), each one base64 line,
 * atomically (peer/store/wholefile.h: PATH.tmp, fsync, rename; with
 * overwrite == 0 an existing file is never replaced: -EEXIST). pub_path may
 * be NULL. 0 or a negative errno with a message. */
int keyfile_save(const sec_keypair *kp, const char *key_path, const char *pub_path, int overwrite, char *err,
                 size_t errlen);

/* The same for any 32-byte secret and its public key (an admission key's
 * Ed25519 seed, peer/config/credential.h): read into secret (the caller's
 * guarded memory) with the same checks, written the same way. */
int keyfile_read_secret(uint8_t secret[SEC_KEY_BYTES], const char *key_path, char *err, size_t errlen);
int keyfile_write(const uint8_t secret[SEC_KEY_BYTES], const uint8_t pk[SEC_KEY_BYTES], const char *key_path,
                  const char *pub_path, int overwrite, char *err, size_t errlen);

/* Public keys as text: standard base64 with padding (44 characters), as in
 * .pub files and the cluster file. decode accepts exactly one spelling per key
 * (no whitespace, no non-canonical padding bits): 0 or -EINVAL, and with a
 * non-NULL why, a short reason ("not base64", "decodes to 31 bytes, not 32"). */
void keyfile_pub_encode(const uint8_t pk[SEC_KEY_BYTES], char out[KEYFILE_B64]);
int keyfile_pub_decode(uint8_t pk[SEC_KEY_BYTES], const char *text, size_t len, const char **why);

#endif
