/* The sgp release that writes the files here (a model file's sgp_version).
 *
 *   st_writer_meta(&w, "sgp_version", STORE_SGP_VERSION);
 *
 * The public header peer/lib/sgp.h carries the same string as SGP_VERSION
 * (the Makefile and peer/python/setup.py read it there). That header must
 * stand alone once installed, so it cannot include this one, and this floor
 * may not include it: change both lines together (tests/process/test_lib_api.c holds
 * them equal).
 */
#ifndef PEER_STORE_VERSION_H
#define PEER_STORE_VERSION_H

#define STORE_SGP_VERSION "0.5.0"

#endif
