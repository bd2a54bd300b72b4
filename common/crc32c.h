/*
 * CRC-32C (Castagnoli), the checksum of changelog records, checkpoints and
 * chunk blocks. Uses the SSE4.2 instruction when the CPU has it.
 */
#ifndef SWEEPFS_COMMON_CRC32C_H
#define SWEEPFS_COMMON_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/*
 * Extend @crc (0 to start) over @len bytes at @p and return the new value.
 * sw_crc32c(0, "123456789", 9) == 0xe3069283.
 */
uint32_t sw_crc32c(uint32_t crc, const void *p, size_t len);

/* The table-driven path whatever the CPU has; for tests. */
uint32_t sw_crc32c_portable(uint32_t crc, const void *p, size_t len);

#endif
