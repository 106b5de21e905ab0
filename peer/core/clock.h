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

#include <stdint.h>

double clock_now(void);
/* Microseconds of the wall clock (a process's incarnation, and the bound on
 * the ones it accepts). */
uint64_t clock_wall_us(void);

#endif
