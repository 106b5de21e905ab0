/* Resident memory from the kernel, and the parts the job says it holds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "peer/core/memory.h"

static size_t runtime_rss;

static size_t rss_now(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long pages = 0, resident = 0;
    if (f) {
        if (fscanf(f, "%lu %lu", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

static size_t meminfo(const char *key)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[128];
    size_t kb = 0, len = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, len) && line[len] == ':') {
            kb = strtoull(line + len + 1, NULL, 10);
            break;
        }
    if (f)
        fclose(f);
    return kb * 1024;
}

size_t mem_available(void) { return meminfo("MemAvailable"); }
size_t mem_total(void) { return meminfo("MemTotal"); }

void mem_start(void)
{
    runtime_rss = rss_now();
}

void mem_measure(mem_parts *m)
{
    struct rusage ru;
    m->rss = rss_now();
    m->peak_rss = getrusage(RUSAGE_SELF, &ru) == 0 ? (size_t)ru.ru_maxrss * 1024 : 0; /* Linux: KiB */
    m->runtime = runtime_rss;
}

size_t mem_accounted(const mem_parts *m)
{
    return m->model + m->gossip + m->codec + m->in_flight + m->data + m->runtime;
}

void mem_print(FILE *f, const mem_parts *m, int per)
{
    const double mb = 1e6 * (per > 0 ? per : 1);
    fprintf(f, "memory%s: peak RSS %.1f MB, now %.1f MB; model and optimizer %.1f, gossip state %.1f, "
               "codec scratch %.1f, messages in flight %.1f, data %.1f, runtime %.1f (MB)\n",
            per > 1 ? " a peer" : "", m->peak_rss / mb, m->rss / mb, m->model / mb, m->gossip / mb, m->codec / mb,
            m->in_flight / mb, m->data / mb, m->runtime / mb);
}

void mem_json(json_obj *j, const mem_parts *m)
{
    json_u64(j, "memory_model_bytes", m->model);
    json_u64(j, "memory_gossip_bytes", m->gossip);
    json_u64(j, "memory_codec_bytes", m->codec);
    json_u64(j, "memory_in_flight_bytes", m->in_flight);
    json_u64(j, "memory_data_bytes", m->data);
    json_u64(j, "memory_runtime_bytes", m->runtime);
    json_u64(j, "rss_bytes", m->rss);
    json_u64(j, "peak_rss_bytes", m->peak_rss);
}
