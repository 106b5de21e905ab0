/* The embedded MNIST subset (see README.md here), linked into the binary so
 * that `sgp train` needs no download and no data path.
 *
 * Each blob gets a start and an end symbol; nn/nn_embedded.c takes the size as
 * end - start, which needs no relocation arithmetic in C. Assembled with
 * `cc -c -I nn/data`, which is where .incbin looks for the files.
 */
#define NN_BLOB(sym, file)             \
        .globl sym;                    \
        .type sym, %object;            \
        .balign 16;                    \
sym:                                   \
        .incbin file;                  \
        .size sym, . - sym;            \
        .globl sym##_end;              \
sym##_end:

        .section .rodata.nn_embed, "a", %progbits
NN_BLOB(nn_embed_train_images, "train-images-idx3-ubyte.gz")
NN_BLOB(nn_embed_train_labels, "train-labels-idx1-ubyte.gz")
NN_BLOB(nn_embed_test_images, "t10k-images-idx3-ubyte.gz")
NN_BLOB(nn_embed_test_labels, "t10k-labels-idx1-ubyte.gz")

/* No executable stack: without this note the linker makes the stack executable.
 * ("%" rather than "@" because "@" starts a comment on 32-bit ARM.) */
        .section .note.GNU-stack, "", %progbits
