/* The run's push-sum mass at the end of a launch, from the ledger each peer
 * writes at the end of its log (RUN/peerI.jsonl, peer/net/node_log.c): its
 * weight w, and on every edge the running total of weight sent (out) or
 * applied (in) under the sender's incarnation.
 *
 *   launch_mass m;
 *   rc = launch_ledger("run", 8, absent, &m, err, sizeof err);
 *   // m.held + m.in_flight == 8 to rounding when no peer died (GUARANTEES.md)
 *
 * in_flight is weight a finished peer sent to another finished peer that the
 * receiver had not applied when it stopped: shares still in a socket, or kept
 * by a receiver that ignores the sender's older incarnation. Weight sent to
 * or held by a peer killed for good (absent) is in neither.
 *
 * The comebacks' part (gossip/GUARANTEES.md, "Mass at comebacks"): with
 * N peers started, J joins and no kill,
 *  held + in_flight == N + J + rescaled - adopted
 * where rescaled is what resumes added (gsp_resume's power of two) and
 * adopted what resumed and joining peers took as a baseline on an in-edge
 * (sent to the id, taken in by a run of it that died, or by none). A kill
 * also loses what the killed run held beyond its checkpoint and the shares
 * it had sent that nobody applied: no log knows those. */
#ifndef PEER_LAUNCH_LAUNCH_LEDGER_H
#define PEER_LAUNCH_LAUNCH_LEDGER_H

#include <stddef.h>
#include <stdint.h>

typedef struct launch_mass {
    double held;      /* sum of the finished peers' w */
    double in_flight; /* sent between finished peers and not applied */
    double rescaled;  /* added by resumes: w - w_checkpoint (gsp_resume) */
    double adopted;   /* taken as a baseline on in-edges after a comeback (gsp_stats.w_adopted) */
} launch_mass;

/* 0; -ENOENT when a finished peer's log has no ledger (err names it; a peer
 * on another host whose log was not brought back), -EBADMSG for a ledger
 * line that does not parse (err: file and line). absent may be NULL. */
int launch_ledger(const char *run_dir, int n, const uint8_t *absent, launch_mass *m, char *err, size_t errlen);

#endif
