/* libFuzzer target for the cluster file parser: any bytes must give 0 or a
 * negative errno with a one-line message on a line that exists, never a
 * crash, a leak or an unbounded allocation. What parses must be a complete
 * cluster (ids 0..n-1 in place, hosts the builder accepts too, distinct keys
 * and addresses) and must survive write-then-parse unchanged, cluster id
 * included (the zstd habit: fuzz targets that round-trip).
 *
 *   make fuzz FUZZ_SECONDS=60      (every target, this one on tests/fuzz/corpus/cluster)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* open_memstream under -std=c17 */
#endif
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peer/config/cluster.h"
#include "tests/fuzz/fuzz_check.h"

static void same(const cluster *a, const cluster *b)
{
    check(!strcmp(a->name, b->name) && !strcmp(a->topology, b->topology) && a->n_peers == b->n_peers);
    for (int i = 0; i < a->n_peers; i++) {
        const cluster_peer *p = &a->peers[i], *q = &b->peers[i];
        check(p->id == q->id && p->port == q->port && p->family == q->family);
        check(!strcmp(p->host, q->host));
        check(!memcmp(p->pk, q->pk, SEC_KEY_BYTES));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cluster c;
    parse_error e;
    int rc = cluster_parse(&c, (const char *)data, size, "fuzz", "/base", &e);
    if (rc < 0) {
        check(rc == -EBADMSG || rc == -ENOMEM || rc == -EFBIG);
        check(e.msg[0] != 0 && memchr(e.msg, 0, sizeof e.msg) != NULL && !strchr(e.msg, '\n'));
        check(!strcmp(e.file, "fuzz"));
        size_t lines = 1;
        for (size_t i = 0; i < size; i++)
            lines += data[i] == '\n';
        check(e.line >= 0 && (size_t)e.line <= lines);
        check(c.peers == NULL && c.n_peers == 0 && c.topology_path == NULL);
        return 0;
    }
    check(c.n_peers >= 1 && c.n_peers <= CLUSTER_MAX_PEERS && c.name[0] && c.topology[0]);
    check(c.topology_path && (c.topology[0] == '/' ? !strcmp(c.topology_path, c.topology)
                                                   : !strncmp(c.topology_path, "/base/", 6)));

    /* Every peer in its place, and acceptable to the builder as well: the
     * builder refuses exactly what the parser refuses (bad host, duplicate
     * key or address), so rebuilding must succeed peer for peer. Bounded,
     * since the builder's duplicate check is linear per peer. */
    cluster b;
    check(cluster_init(&b, c.name, c.topology) == 0);
    for (int i = 0; i < c.n_peers; i++) {
        const cluster_peer *p = &c.peers[i];
        check(p->id == (uint32_t)i && p->port >= 1 && p->line >= 1);
        uint8_t pk[SEC_KEY_BYTES];
        check(cluster_pubkey_lookup(&c, (uint32_t)i, pk) == 0 && !memcmp(pk, p->pk, SEC_KEY_BYTES));
        if (c.n_peers <= 256)
            check(cluster_add_peer(&b, p->host, p->port, p->pk) == i);
    }
    uint8_t pk[SEC_KEY_BYTES];
    check(cluster_pubkey_lookup(&c, (uint32_t)c.n_peers, pk) == -ENOENT);
    if (c.n_peers <= 256)
        same(&c, &b);
    cluster_free(&b);

    /* write, parse, compare */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    check(f != NULL);
    check(cluster_write(&c, f, "fuzz round trip") == 0);
    fclose(f);
    cluster r;
    rc = cluster_parse(&r, buf, len, "fuzz-rt", "/base", &e);
    if (rc != 0)
        fprintf(stderr, "round trip: %d: %s\n%s", e.line, e.msg, buf);
    check(rc == 0);
    same(&c, &r);
    uint8_t ia[SEC_CLUSTER_ID_BYTES], ib[SEC_CLUSTER_ID_BYTES];
    cluster_id(&c, ia);
    cluster_id(&r, ib);
    check(!memcmp(ia, ib, sizeof ia));
    cluster_free(&r);
    free(buf);
    cluster_free(&c);
    return 0;
}
