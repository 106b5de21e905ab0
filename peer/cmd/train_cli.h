/* The training options of the commands that train (train, sim, peer, and
 * launch, which passes them on), parsed into a train_opts.
 *
 *   train_opts o;
 *   train_opts_defaults(&o);
 *   static const struct option opts[] = {TRAIN_OPTS_LONG, {0, 0, 0, 0}};   // and the command's own
 *   int c, rc;
 *   while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1)
 *       if ((rc = train_opts_parse(&o, "sgp train", c, optarg)) != CLI_NOT_MINE) {
 *           if (rc != 0) return rc;            // CLI_USAGE: a bad value, said on stderr
 *       } else ...                             // the command's own options
 *   if ((rc = train_opts_check(&o, "sgp train")) != 0) return rc;
 *   fputs(TRAIN_OPTS_HELP, stdout);
 */
#ifndef PEER_CMD_TRAIN_CLI_H
#define PEER_CMD_TRAIN_CLI_H

#include <getopt.h>

#include "peer/core/train_opts.h"

enum {
    OPT_MODEL = 1000, OPT_DATA, OPT_EPOCHS, OPT_BATCH, OPT_LR, OPT_MOMENTUM, OPT_NESTEROV, OPT_NO_NESTEROV,
    OPT_WEIGHT_DECAY, OPT_WARMUP, OPT_LR_DECAY, OPT_SEED, OPT_THREADS, OPT_SUMMARY, OPT_PROGRESS, OPT_NO_PROGRESS,
    OPT_CLIP, OPT_OPTIMIZER, OPT_ADAM_BETAS, OPT_ADAM_EPS, OPT_INIT, OPT_SAVE_MODEL, OPT_MODEL_FORMAT, OPT_CONTEXT,
};

#define TRAIN_OPTS_LONG                                                                                           \
    {"model", required_argument, 0, OPT_MODEL}, {"data", required_argument, 0, OPT_DATA},                        \
        {"epochs", required_argument, 0, OPT_EPOCHS}, {"batch", required_argument, 0, OPT_BATCH},                \
        {"lr", required_argument, 0, OPT_LR}, {"momentum", required_argument, 0, OPT_MOMENTUM},                  \
        {"nesterov", no_argument, 0, OPT_NESTEROV}, {"no-nesterov", no_argument, 0, OPT_NO_NESTEROV},            \
        {"weight-decay", required_argument, 0, OPT_WEIGHT_DECAY}, {"warmup", required_argument, 0, OPT_WARMUP},  \
        {"lr-decay", required_argument, 0, OPT_LR_DECAY}, {"seed", required_argument, 0, OPT_SEED},              \
        {"threads", required_argument, 0, OPT_THREADS}, {"summary", required_argument, 0, OPT_SUMMARY},          \
        {"clip", required_argument, 0, OPT_CLIP}, {"optimizer", required_argument, 0, OPT_OPTIMIZER},            \
        {"adam-betas", required_argument, 0, OPT_ADAM_BETAS}, {"adam-eps", required_argument, 0, OPT_ADAM_EPS},  \
        {"init", required_argument, 0, OPT_INIT}, {"save-model", required_argument, 0, OPT_SAVE_MODEL},          \
        {"model-format", required_argument, 0, OPT_MODEL_FORMAT}, {"context", required_argument, 0, OPT_CONTEXT}, \
        {"progress", no_argument, 0, OPT_PROGRESS}, {                                                            \
        "no-progress", no_argument, 0, OPT_NO_PROGRESS                                                           \
    }

#define TRAIN_OPTS_HELP                                                                                           \
    "Training options:\n"                                                                                         \
    "  --model SPEC        layers, e.g. conv:32:3:pad=1,relu,maxpool:2,fc:128,relu,fc (nn/MODELS.md),\n"        \
    "                      or a preset: mlp, mlp:W1,W2,... (hidden widths), lenet,\n"                            \
    "                      gpt:LAYERS:WIDTH:HEADS (a byte-level GPT, for text data) [mlp:256]\n"                 \
    "  --data SPEC         fashion (Fashion-MNIST, after `make data`), DIR (MNIST IDX files, raw or .gz),\n"     \
    "                      cifar10:DIR, csv:TRAIN,TEST, text:FILE[,VALFILE] (bytes as tokens; without\n"         \
    "                      VALFILE the last 10% is held out) or brown (the Brown corpus, after `make data`)\n"  \
    "                      [the embedded 8,000/2,000 MNIST digits]\n"                                             \
    "  --context T         tokens a text sample sees (a window of T + 1 bytes) [64, or --init's]\n"              \
    "  --epochs N          passes over the training data (text: bytes / T windows) [10]\n"                        \
    "  --batch N           mini-batch size (text: windows) [64]\n"                                                \
    "  --optimizer KIND    sgd (momentum, L2 decay) or adamw (decoupled decay), as PyTorch's [sgd]\n"             \
    "  --lr X              peak learning rate [0.1 for sgd, 0.001 for adamw]\n"                                   \
    "  --momentum X        SGD momentum, 0 to switch it off [0.9]\n"                                              \
    "  --nesterov, --no-nesterov   Nesterov momentum [on]\n"                                                      \
    "  --weight-decay X    weight decay [0.0005 (L2) for sgd, 0.01 for adamw]\n"                                  \
    "  --adam-betas B1,B2  AdamW's moment decay rates [0.9,0.999]\n"                                             \
    "  --adam-eps X        AdamW's epsilon [1e-8]\n"                                                              \
    "  --warmup EPOCHS     linear learning-rate warm-up, may be fractional [1]\n"                                 \
    "  --lr-decay KIND     constant, cosine or step:EPOCHS:GAMMA [cosine]\n"                                      \
    "  --clip NORM         clip each gradient to this L2 norm, 0 for none [0]\n"                                 \
    "  --seed N            seed of every random stream (init, shuffles) [1]\n"                                    \
    "  --threads N         OpenBLAS threads [1]\n"                                                                \
    "  --summary FILE      write a JSON summary of the run to FILE\n"                                             \
    "  --init FILE         start from a saved model (safetensors; --model defaults to the file's)\n"            \
    "  --save-model FILE   write the final model: safetensors with the spec in its metadata\n"                  \
    "                      (peer/store/MODELFILE.md); PyTorch and NumPy read it without sgp\n"                  \
    "  --model-format KIND safetensors or raw (bare little-endian float32) [safetensors]\n"                     \
    "  --progress, --no-progress   live progress bar [on when stdout is a terminal]\n"

/* Handles one getopt code c (a cli_option_fn's answers): CLI_OK, CLI_USAGE
 * on a bad value (the error is printed), CLI_NOT_MINE when c is not a
 * training option. */
int train_opts_parse(train_opts *o, const char *cmd, int c, const char *arg);
/* train_opts_finish, with a usage error (CLI_USAGE) when it refuses; with
 * --init, the file's architecture read and checked against --model (exit
 * status 1 and a message naming the file when it cannot be used). 0 when
 * all is well, else the exit status. */
int train_opts_check(train_opts *o, const char *cmd);
/* Writes the final model to --save-model in --model-format with the run's
 * summary (a JSON object, or NULL) in its metadata; 0, or 1 with the error
 * printed. */
int train_cli_save_model(const train_opts *o, const nn_model *m, const float *params, const char *summary,
                         const char *cmd);

#endif
