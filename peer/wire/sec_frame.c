/* Sessions and encrypted frames (peer/wire/WIRE.md "Frames"): what the
 * handshake hands over, one crypto_secretstream per direction. The input is
 * untrusted: a length prefix is checked from its 4 bytes before anything is
 * read or allocated, and a frame that fails once ends the session. */
#include <errno.h>
#include <limits.h>
#include <sodium.h>
#include <string.h>

#include "peer/wire/sec.h"
#include "peer/wire/sec_secret.h"

_Static_assert(SEC_ABYTES == crypto_secretstream_xchacha20poly1305_ABYTES, "stream overhead");
_Static_assert(SEC_FRAME_MAX <= INT_MAX - 4, "frame sizes are returned as int");
_Static_assert(SEC_PT_OFFSET == 4 + crypto_secretstream_xchacha20poly1305_ABYTES - crypto_onetimeauth_poly1305_BYTES,
               "the prefix and the tag byte come before the ciphertext");

int sec_session_set_max(sec_session *s, size_t max_frame)
{
    if (!s || max_frame < SEC_FRAME_MIN || max_frame > SEC_FRAME_MAX)
        return -EINVAL;
    s->max_frame = max_frame;
    return 0;
}

int sec_frame_need(const uint8_t *buf, size_t have, size_t max)
{
    if (max < SEC_FRAME_MIN || (!buf && have))
        return -EINVAL;
    if (max > SEC_FRAME_MAX)
        max = SEC_FRAME_MAX;
    if (have < 4)
        return 4;
    uint32_t n = sec_get_u32(buf);
    if (n > max)
        return -EMSGSIZE;
    if (n < SEC_FRAME_MIN)
        return -EBADMSG;
    return (int)(4 + n);
}

/* Whether [a, a + an) and [b, b + bn) share a byte. Overlap is allowed at
 * one offset only: secretstream writes the tag byte before it reads the
 * message and then encrypts (or, opening, checks the MAC over the
 * ciphertext and then decrypts) byte for byte, so a message one byte past
 * the tag is sealed or opened in place; anything else would read what it
 * has just written (tests/unit/test_peer_sec.c checks both against the
 * copying form). */
static int overlaps(const uint8_t *a, size_t an, const uint8_t *b, size_t bn)
{
    return an && bn && a < b + bn && b < a + an;
}

/* A failed frame ends the session: record why, for every later call. */
static int sess_fail(sec_session *s, int rc)
{
    s->err = rc;
    return rc;
}

/* The stream's tag of a piece that more pieces of its message follow:
 * libsodium's PUSH tag, which no sgp frame used before (WIRE.md "Frames"). */
#define SEC_TAG_MORE crypto_secretstream_xchacha20poly1305_TAG_PUSH

int sec_seal(sec_session *s, const void *pt, size_t len, uint8_t *out, size_t cap)
{
    return sec_seal_piece(s, pt, len, out, cap, 0);
}

int sec_seal_piece(sec_session *s, const void *pt, size_t len, uint8_t *out, size_t cap, int more)
{
    static const uint8_t empty[1];
    if (!s || !s->st || (!pt && len) || !out)
        return -EINVAL;
    if (s->err)
        return s->err;
    if (len > s->max_frame - SEC_ABYTES)
        return -EMSGSIZE;
    if (cap < sec_seal_bound(len))
        return -ENOBUFS;
    if ((const uint8_t *)pt != out + SEC_PT_OFFSET && overlaps(pt, len, out, sec_seal_bound(len)))
        return -EINVAL;
    sec_put_u32(out, (uint32_t)(len + SEC_ABYTES));
    crypto_secretstream_xchacha20poly1305_push(&s->st->tx, out + 4, NULL, len ? pt : empty, len, NULL, 0,
                                               more ? SEC_TAG_MORE : crypto_secretstream_xchacha20poly1305_TAG_MESSAGE);
    s->sent++;
    return (int)sec_seal_bound(len);
}

int sec_open(sec_session *s, const uint8_t *in, size_t len, uint8_t *out, size_t cap)
{
    return sec_open_piece(s, in, len, out, cap, NULL);
}

int sec_open_piece(sec_session *s, const uint8_t *in, size_t len, uint8_t *out, size_t cap, int *more)
{
    uint8_t empty[1];
    if (!s || !s->st || (!in && len))
        return -EINVAL;
    if (s->err)
        return s->err;
    int need = sec_frame_need(in, len, s->max_frame);
    if (need < 0)
        return sess_fail(s, need);
    if ((size_t)need != len) /* a short frame is a truncated one; extra bytes are not ours */
        return sess_fail(s, -EBADMSG);
    size_t plen = len - 4 - SEC_ABYTES;
    if (cap < plen || (!out && plen))
        return -ENOBUFS;
    if (out != in + SEC_PT_OFFSET && overlaps(in, len, out, plen))
        return -EINVAL;
    unsigned char tag = 0;
    /* The MAC is checked before anything is decrypted into out, and a
     * failure leaves the stream's nonce where it was; the session dies all
     * the same. The stream's counter makes a replayed or reordered frame
     * fail here too. */
    if (crypto_secretstream_xchacha20poly1305_pull(&s->st->rx, plen ? out : empty, NULL, &tag, in + 4, len - 4, NULL,
                                                   0) != 0)
        return sess_fail(s, -EBADMSG);
    const int piece = tag == SEC_TAG_MORE && more;
    if (tag != crypto_secretstream_xchacha20poly1305_TAG_MESSAGE && !piece) {
        if (plen)
            sodium_memzero(out, plen);
        return sess_fail(s, -EPROTO);
    }
    if (more)
        *more = piece;
    s->received++;
    return (int)plen;
}

void sec_session_free(sec_session *s)
{
    if (!s)
        return;
    sodium_free(s->st);
    memset(s, 0, sizeof *s);
}
