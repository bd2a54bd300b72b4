/*
 * Memory faulted in on a second thread while the first fills it.
 *
 * The first write to anonymous memory costs the kernel a fault and a
 * page of zeroes; loading a namespace of 34 M files writes 4.7 GiB of
 * fresh memory, and on this project's 2-core VM that zeroing was a
 * quarter of the load (clear_page, some 700 MB/s under the hypervisor).
 * A helper thread asks the kernel to fault ranges in
 * (MADV_POPULATE_WRITE: contents untouched, so it is safe beside the
 * thread that writes them) while the loader parses, on the other core.
 *
 * Two ways to hand it a range:
 *  - sw_prefault_ahead(): memory the loader will fill in order later
 *    (the slab's next regions). The helper works through such ranges in
 *    the background, in the order given, 2 MiB at a time.
 *  - sw_prefault_now(): memory the loader is about to write all over (a
 *    hash table it fills at random): the caller faults the first half
 *    in, the helper the second, and it returns when both are done.
 *    These go before anything ahead.
 *
 * Only a speed-up: without the helper (a kernel older than 5.14, no
 * thread) the loader faults the same memory in itself. Not a place for
 * memory the caller may unmap while the helper runs: ranges given ahead
 * must stay mapped until sw_prefault_stop().
 */
#ifndef SWEEPFS_COMMON_PREFAULT_H
#define SWEEPFS_COMMON_PREFAULT_H

#include <stddef.h>
#include <stdint.h>

struct sw_prefault;

/* A helper thread, or NULL (then every call below does nothing). */
struct sw_prefault *sw_prefault_start(void);

/* Fault [@p, @p + @len) in, in the background. */
void sw_prefault_ahead(struct sw_prefault *pf, void *p, size_t len);

/* Fault [@p, @p + @len) in now, on both threads. */
void sw_prefault_now(struct sw_prefault *pf, void *p, size_t len);

/* Stop (what is left ahead stays to be faulted by its first write),
 * join and free the helper: bytes it faulted in. @pf may be NULL. */
uint64_t sw_prefault_stop(struct sw_prefault *pf);

#endif
