/* The drivers' one clock: seconds on a monotonic clock. gossip/ never reads
 * it; the networked peer passes its readings in, the simulator its virtual
 * time.
 *
 *   double t0 = clock_now();
 *   ... work ...
 *   double elapsed = clock_now() - t0;
 */
#ifndef PEER_CORE_CLOCK_H
#define PEER_CORE_CLOCK_H

double clock_now(void);

#endif
