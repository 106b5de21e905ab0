/* Fuzz target for the data-set parsers (IDX pair, CIFAR-10 records, CSV,
 * text) and gunzip: the first byte picks the parser, the rest is the file.
 * They must return an error, never crash, leak or read out of bounds. Text
 * that parses is also batched, walked in evaluation windows and sharded, the
 * places where a window's offsets could run past the bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_batch.h"
#include "nn/nn_data.h"

static void fuzz_text(const uint8_t *data, size_t size, int context, nn_dataset *d)
{
    char err[256];
    if (nn_text_parse(data, size, "text", context, d, err, sizeof err) < 0)
        return;
    float x[32];
    int y[32];
    for (int i = 0; i < nn_text_windows(d); i++)
        nn_text_window(d, i, x, y);
    nn_batcher b = {0};
    if (nn_batcher_init(&b, d, 3, 1, 0) == 0)
        for (int i = 0; i < 4; i++)
            nn_batcher_next(&b);
    nn_batcher_free(&b);
    for (int p = 0; p < 3; p++) {
        nn_dataset shard = {0};
        nn_dataset_shard(d, p, 3, 0, 1, &shard, err, sizeof err);
        nn_dataset_free(&shard);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const uint8_t which = data[0] % 5;
    data++, size--;
    nn_dataset d = {0};
    char err[256];
    switch (which) {
    case 0: { /* images then labels, split where the next two bytes say */
        size_t cut = size >= 2 ? ((size_t)data[0] << 8 | data[1]) : 0;
        const uint8_t *rest = size >= 2 ? data + 2 : data;
        size_t n = size >= 2 ? size - 2 : 0;
        if (cut > n)
            cut = n;
        nn_idx_parse(rest, cut, "images", rest + cut, n - cut, "labels", &d, err, sizeof err);
        break;
    }
    case 1:
        nn_cifar10_parse(data, size, "cifar", &d, err, sizeof err);
        break;
    case 2: {
        char *text = malloc(size + 1); /* the parser takes a length; the NUL is a trap for overreads */
        if (!text)
            return 0;
        memcpy(text, data, size);
        text[size] = 0;
        nn_csv_parse(text, size, "csv", &d, err, sizeof err);
        free(text);
        break;
    }
    case 3: {
        uint8_t *out = NULL;
        size_t out_len = 0;
        if (nn_gunzip(data, size, "gz", &out, &out_len, err, sizeof err) == 0)
            free(out);
        break;
    }
    case 4:
        if (size >= 1)
            fuzz_text(data + 1, size - 1, 1 + data[0] % 32, &d);
        break;
    }
    nn_dataset_free(&d);
    return 0;
}
