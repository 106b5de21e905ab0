/* The subcommands of build/sgp. Each takes argc/argv from its own name on and
 * returns the process exit status (0 ok, 1 failure, 2 usage). */
#ifndef PEER_CMD_COMMANDS_H
#define PEER_CMD_COMMANDS_H

int cmd_train(int argc, char **argv);
int cmd_topo(int argc, char **argv);
int cmd_sim(int argc, char **argv);
int cmd_dst(int argc, char **argv);
int cmd_peer(int argc, char **argv);
int cmd_launch(int argc, char **argv);
int cmd_keygen(int argc, char **argv);
int cmd_cluster(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_predict(int argc, char **argv);
int cmd_sample(int argc, char **argv);

#endif
