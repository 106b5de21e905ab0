/* build/sgp: one binary, one subcommand per job. */
#include <stdio.h>
#include <string.h>

#include "peer/cmd/cli.h"
#include "peer/cmd/commands.h"
#include "peer/core/memory.h"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *what;
} commands[] = {
    {"train", cmd_train, "train one model on one machine (the single-peer baseline)"},
    {"eval", cmd_eval, "accuracy, loss and confusion matrix of a saved model on a data set"},
    {"predict", cmd_predict, "classify images or rows with a saved model"},
    {"sample", cmd_sample, "generate text with a saved language model (gpt:L:C:H)"},
    {"topo", cmd_topo, "check, show, draw, generate and analyse topology files"},
    {"sim", cmd_sim, "simulate N peers training with SGP on a virtual clock"},
    {"dst", cmd_dst, "random fault schedules in the simulator, invariants checked (deterministic simulation testing)"},
    {"peer", cmd_peer, "run one networked peer of a cluster"},
    {"launch", cmd_launch, "run N peers as processes on this machine, with one progress view"},
    {"keygen", cmd_keygen, "make a peer's long-term key pair"},
    {"cluster", cmd_cluster, "a cluster's admission key and the credentials it signs for new peers"},
};

static void usage(FILE *out)
{
    fputs("usage: sgp COMMAND [OPTIONS]\n\n"
          "Decentralized training with Stochastic Gradient Push.\n\nCommands:\n",
          out);
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].what);
    fputs("\nRun 'sgp COMMAND --help' for a command's options.\n", out);
}

int main(int argc, char **argv)
{
    mem_start();
    if (argc < 2) {
        usage(stderr);
        return CLI_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "sgp: unknown command '%s' (see 'sgp --help')\n", argv[1]);
    return CLI_USAGE;
}
