/* CRC-32 (zlib's, the zip entry's: reflected polynomial 0xEDB88320), callable without the GIL.
 *
 * The C side of read_checked (_readfiles.c) checks each npz member's CRC-32 as np.load does,
 * in the stretch where the GIL is released. zlib's own crc32 runs at 1-4 GB/s, a 64 KiB
 * member 16-60 us against the 10 us its read costs. This one folds with carry-less
 * multiplication where the CPU has it: 64 bytes per step with PCLMULQDQ (~15 GB/s here),
 * 256 with AVX-512's VPCLMULQDQ (~57 GB/s, as isal's), after Gopal et al., "Fast CRC
 * Computation for Generic Polynomials Using PCLMULQDQ Instruction" (Intel, 2009), with the
 * bit-reflected constants of its appendix (also in Linux's arch/x86/crypto/crc32-pclmul_asm.S;
 * a fold by D bits multiplies by x^(D+32) and x^(D-32) mod P, bit-reflected, shifted left
 * by one); elsewhere, and for the last bytes, 8 table lookups per 8 bytes. Tested against
 * zlib.crc32 on odd lengths and offsets (tests/unit/test_read_checked.py).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "_crc32.h"

static uint32_t table[8][256];

static void make_tables(void)
{
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++)
        for (int t = 1; t < 8; t++)
            table[t][n] = (table[t - 1][n] >> 8) ^ table[0][table[t - 1][n] & 0xFF];
}

/* Eight bytes per step through eight tables ("slicing-by-8"); c is the inverted register. */
static uint32_t crc_tables(uint32_t c, const unsigned char *p, size_t len)
{
    while (len >= 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        lo = __builtin_bswap32(lo);
        hi = __builtin_bswap32(hi);
#endif
        lo ^= c;
        c = table[7][lo & 0xFF] ^ table[6][(lo >> 8) & 0xFF] ^ table[5][(lo >> 16) & 0xFF]
            ^ table[4][lo >> 24] ^ table[3][hi & 0xFF] ^ table[2][(hi >> 8) & 0xFF]
            ^ table[1][(hi >> 16) & 0xFF] ^ table[0][hi >> 24];
        p += 8;
        len -= 8;
    }
    while (len--)
        c = table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_FOLD 1

#define FOLD(x, k, y) _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), \
                                                  _mm_clmulepi64_si128(x, k, 0x11)), y)

/* Four 128-bit lanes (the first 64 bytes, the register already in) folded 64 bytes forward
 * per step over p[0:len] (len a multiple of 16), then into one, then 16 bytes per step, then
 * reduced to 32 bits (Barrett): the inverted register. */
__attribute__((target("pclmul,sse4.1")))
static uint32_t fold_lanes(__m128i x1, __m128i x2, __m128i x3, __m128i x4,
                           const unsigned char *p, size_t len)
{
    const __m128i k1k2 = _mm_set_epi64x(0x01c6e41596, 0x0154442bd4);  /* x^480, x^544 */
    const __m128i k3k4 = _mm_set_epi64x(0x00ccaa009e, 0x01751997d0);  /* x^96, x^160 */
    const __m128i k5 = _mm_set_epi64x(0, 0x0163cd6124);
    const __m128i poly = _mm_set_epi64x(0x01f7011641, 0x01db710641);
    const __m128i low32 = _mm_setr_epi32(~0, 0, ~0, 0);
    for (; len >= 64; p += 64, len -= 64) {
        x1 = FOLD(x1, k1k2, _mm_loadu_si128((const __m128i *)p));
        x2 = FOLD(x2, k1k2, _mm_loadu_si128((const __m128i *)(p + 16)));
        x3 = FOLD(x3, k1k2, _mm_loadu_si128((const __m128i *)(p + 32)));
        x4 = FOLD(x4, k1k2, _mm_loadu_si128((const __m128i *)(p + 48)));
    }
    x1 = FOLD(x1, k3k4, x2);
    x1 = FOLD(x1, k3k4, x3);
    x1 = FOLD(x1, k3k4, x4);
    for (; len >= 16; p += 16, len -= 16)
        x1 = FOLD(x1, k3k4, _mm_loadu_si128((const __m128i *)p));
    /* 128 bits to 64 */
    __m128i t = _mm_clmulepi64_si128(x1, k3k4, 0x10);
    x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), t);
    t = _mm_srli_si128(x1, 4);
    x1 = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x1, low32), k5, 0x00), t);
    /* Barrett reduction to 32 bits */
    t = _mm_clmulepi64_si128(_mm_and_si128(x1, low32), poly, 0x10);
    t = _mm_clmulepi64_si128(_mm_and_si128(t, low32), poly, 0x00);
    return (uint32_t)_mm_extract_epi32(_mm_xor_si128(x1, t), 1);
}

/* The inverted register c over len bytes, len a multiple of 16 and at least 64. */
__attribute__((target("pclmul,sse4.1")))
static uint32_t crc_fold(uint32_t c, const unsigned char *p, size_t len)
{
    __m128i x1 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)p), _mm_cvtsi32_si128((int)c));
    return fold_lanes(x1, _mm_loadu_si128((const __m128i *)(p + 16)),
                      _mm_loadu_si128((const __m128i *)(p + 32)),
                      _mm_loadu_si128((const __m128i *)(p + 48)), p + 64, len - 64);
}

#define FOLD512(x, k, y) _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, k, 0x00), \
                                                   _mm512_clmulepi64_epi128(x, k, 0x11), \
                                                   y, 0x96)

/* As crc_fold with len at least 256: sixteen 128-bit lanes in four 512-bit registers
 * (VPCLMULQDQ), folded 256 bytes forward per step, then 64 bytes back into the four lanes
 * of fold_lanes. */
__attribute__((target("pclmul,sse4.1,avx512f,vpclmulqdq")))
static uint32_t crc_fold512(uint32_t c, const unsigned char *p, size_t len)
{
    const __m512i k2048 = _mm512_broadcast_i32x4(_mm_set_epi64x(0x01322d1430, 0x011542778a));
    const __m512i k512 = _mm512_broadcast_i32x4(_mm_set_epi64x(0x01c6e41596, 0x0154442bd4));
    __m512i in = _mm512_inserti32x4(_mm512_setzero_si512(), _mm_cvtsi32_si128((int)c), 0);
    __m512i z0 = _mm512_xor_si512(_mm512_loadu_si512(p), in);
    __m512i z1 = _mm512_loadu_si512(p + 64), z2 = _mm512_loadu_si512(p + 128);
    __m512i z3 = _mm512_loadu_si512(p + 192);
    for (p += 256, len -= 256; len >= 256; p += 256, len -= 256) {
        z0 = FOLD512(z0, k2048, _mm512_loadu_si512(p));
        z1 = FOLD512(z1, k2048, _mm512_loadu_si512(p + 64));
        z2 = FOLD512(z2, k2048, _mm512_loadu_si512(p + 128));
        z3 = FOLD512(z3, k2048, _mm512_loadu_si512(p + 192));
    }
    z0 = FOLD512(z0, k512, z1);
    z0 = FOLD512(z0, k512, z2);
    z0 = FOLD512(z0, k512, z3);
    return fold_lanes(_mm512_extracti32x4_epi32(z0, 0), _mm512_extracti32x4_epi32(z0, 1),
                      _mm512_extracti32x4_epi32(z0, 2), _mm512_extracti32x4_epi32(z0, 3),
                      p, len);
}
#endif

static int use_fold;

void crc32_init(void)
{
    make_tables();
#ifdef HAVE_FOLD
    __builtin_cpu_init();
    use_fold = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
    use_fold += use_fold && __builtin_cpu_supports("avx512f")
                && __builtin_cpu_supports("vpclmulqdq");
#endif
}

uint32_t crc32_update_at(int level, uint32_t crc, const unsigned char *p, size_t len)
{
    uint32_t c = ~crc;
    level = level < use_fold ? level : use_fold;
#ifdef HAVE_FOLD
    if (level > 0 && len >= 64) {
        size_t bulk = len & ~(size_t)15;
        c = level == 2 && bulk >= 256 ? crc_fold512(c, p, bulk) : crc_fold(c, p, bulk);
        p += bulk;
        len -= bulk;
    }
#endif
    return ~crc_tables(c, p, len);
}

uint32_t crc32_update(uint32_t crc, const unsigned char *p, size_t len)
{
    return crc32_update_at(use_fold, crc, p, len);
}

/* 0: tables; 1: PCLMULQDQ on 128 bits; 2: VPCLMULQDQ on 512 bits (AVX-512). */
int crc32_folds(void)
{
    return use_fold;
}
