/* CRC-32 as zlib computes it (see _crc32.c); safe to call without the GIL. */
#ifndef DLIOBENCH_CRC32_H
#define DLIOBENCH_CRC32_H

#include <stddef.h>
#include <stdint.h>

/* Once, before any crc32_update: builds the tables and picks the CPU's fastest way. */
void crc32_init(void);

/* zlib.crc32(data, crc): the CRC-32 of p[0:len] continued from crc (0 to start). */
uint32_t crc32_update(uint32_t crc, const unsigned char *p, size_t len);

/* As crc32_update, the fastest way up to level (crc32_folds' numbers): for tests. */
uint32_t crc32_update_at(int level, uint32_t crc, const unsigned char *p, size_t len);

/* 0: tables; 1: carry-less multiplication (PCLMULQDQ) on 128 bits; 2: on 512 (VPCLMULQDQ). */
int crc32_folds(void);

#endif
