/* mqcore.h: the primitives every compiled helper shares, written once (header-only: static inline functions,
 * each extension module compiles its own copy).
 *
 *   mq_rd_be / mq_wr_be   signed big-endian integers of 1, 2, 4 or 8 bytes (every broker format is big-endian)
 *   mq_utf8_seq / _ok     strict UTF-8, exactly what Python's bytes.decode('utf-8') accepts (Unicode Table 3-7:
 *                         no overlong forms, no surrogates, nothing above U+10FFFF, no truncated sequence)
 *   mq_json_str           a JSON string of UTF-8 bytes escaped as orjson does, and the code points a terminal
 *                         acts on as \uXXXX (mqtool.ndjson's output)
 *   mq_crc32_*            CRC-32 (zlib's polynomial): mq_crc32 (carry-less-multiply folding where the CPU has
 *                         it -- 512-bit VPCLMULQDQ, else 128-bit PCLMULQDQ -- else the slicing-by-8 table loop
 *                         mq_crc32_s8), or a call of a Python callable
 *                         equal to zlib.crc32 (mqtool.fastcrc.crc32: ISA-L when installed) on a memoryview
 *
 * Layouts (offsets, sizes, magics) are never written here nor in the helpers: they come from the construct
 * schemas through configure() (mqtool/rocketmq/layout.py, mqtool/kafka/records.py).
 */
#ifndef MQCORE_H
#define MQCORE_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* ---- byte order ------------------------------------------------------------------------------------------ */

/* Big-endian signed integer of `size` bytes (1, 2, 4 or 8; callers check sizes when they are configured). */
static inline int64_t mq_rd_be(const uint8_t *p, int size)
{
    switch (size) {
    case 1:
        return (int8_t)p[0];
    case 2:
        return (int16_t)(uint16_t)((p[0] << 8) | p[1]);
    case 4: {
        uint32_t v;
        memcpy(&v, p, 4);
        return (int32_t)(PY_BIG_ENDIAN ? v : __builtin_bswap32(v));
    }
    default: {
        uint64_t v;
        memcpy(&v, p, 8);
        return (int64_t)(PY_BIG_ENDIAN ? v : __builtin_bswap64(v));
    }
    }
}

/* Write `value` as a big-endian integer of `size` bytes (1, 2, 4 or 8), keeping its low bytes. */
static inline void mq_wr_be(uint8_t *p, int size, int64_t value)
{
    uint64_t v = (uint64_t)value;
    if (size == 8) {
        v = PY_BIG_ENDIAN ? v : __builtin_bswap64(v);
        memcpy(p, &v, 8);
    } else if (size == 4) {
        uint32_t w = PY_BIG_ENDIAN ? (uint32_t)v : __builtin_bswap32((uint32_t)v);
        memcpy(p, &w, 4);
    } else {
        for (int i = size - 1; i >= 0; i--, v >>= 8)
            p[i] = (uint8_t)v;
    }
}

/* ---- UTF-8 ----------------------------------------------------------------------------------------------- */

/* Length of the well-formed multi-byte UTF-8 sequence at s[0] (left bytes available), or 0 if it is not one. */
static inline Py_ssize_t mq_utf8_seq(const uint8_t *s, Py_ssize_t left)
{
    uint8_t c = s[0];
    Py_ssize_t len;
    uint8_t lo = 0x80, hi = 0xBF;                    /* range of the second byte */
    if (c >= 0xC2 && c <= 0xDF)
        len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0)
            lo = 0xA0;                               /* overlong */
        else if (c == 0xED)
            hi = 0x9F;                               /* UTF-16 surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0)
            lo = 0x90;                               /* overlong */
        else if (c == 0xF4)
            hi = 0x8F;                               /* above U+10FFFF */
    } else
        return 0;
    if (left < len || s[1] < lo || s[1] > hi)
        return 0;
    for (Py_ssize_t k = 2; k < len; k++)
        if (s[k] < 0x80 || s[k] > 0xBF)
            return 0;
    return len;
}

/* 1 when s[0:n] decodes with Python's strict bytes.decode('utf-8'), else 0. */
static inline int mq_utf8_ok(const uint8_t *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (i < n) {
        while (i + 8 <= n) {                         /* ASCII runs, 8 bytes at a time */
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (w & 0x8080808080808080ULL)
                break;
            i += 8;
        }
        if (i >= n)
            break;
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        Py_ssize_t len = mq_utf8_seq(s + i, n - i);
        if (len == 0)
            return 0;
        i += len;
    }
    return 1;
}

/* ---- JSON ------------------------------------------------------------------------------------------------ */

/* The code point of the UTF-8 sequence at s[0] (`left` bytes there) when it is one JSON lets stand unescaped
 * but a terminal acts on (mqtool.sanitize.ACTIVE_RANGES, less DEL: the C1 controls U+0080-U+009F, U+061C,
 * U+200E/F, U+2028-U+202E, U+2066-U+2069), else 0. Each is 2 (up to U+061C) or 3 bytes long. */
static inline uint32_t mq_json_active(const uint8_t *s, Py_ssize_t left)
{
    if (s[0] == 0xC2)
        return left >= 2 && s[1] >= 0x80 && s[1] <= 0x9F ? s[1] : 0;
    if (s[0] == 0xD8)
        return left >= 2 && s[1] == 0x9C ? 0x61C : 0;
    if (s[0] != 0xE2 || left < 3 || s[1] < 0x80 || s[1] > 0x81 || s[2] < 0x80 || s[2] > 0xBF)
        return 0;
    uint32_t cp = 0x2000 | (uint32_t)(s[1] & 0x3F) << 6 | (uint32_t)(s[2] & 0x3F);
    return (cp >= 0x200E && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069)
           ? cp : 0;
}

/* The JSON string of s[0:n] escaped as orjson does (\" \\ \b \t \n \f \r, other bytes < 0x20 as \u00xx),
 * and DEL and the code points of mq_json_active as \u00xx / \uxxxx (as mqtool.ndjson.escape_active does),
 * everything else as is, written at d, which has room for 6 * n + 2 bytes. Returns the end of what was written.
 * With `strict`, NULL when s is not valid UTF-8 (what was written then is garbage: the caller drops it);
 * without, s is known to be valid UTF-8 (checked before) and bytes >= 0x80 are copied unchecked. */
static inline char *mq_json_str(char *d, const uint8_t *s, Py_ssize_t n, int strict)
{
    static const char hex[] = "0123456789abcdef";
    *d++ = '"';
    Py_ssize_t i = 0;
    while (i < n) {
        if (i + 8 <= n) {                            /* 8 bytes at a time while none needs attention */
            uint64_t x, ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
            memcpy(&x, s + i, 8);
            uint64_t q = x ^ (ones * '"'), b = x ^ (ones * '\\'), del = x ^ (ones * 0x7F);
            uint64_t special = (x & highs) | ((x - ones * 0x20) & ~x & highs) | ((q - ones) & ~q & highs)
                               | ((b - ones) & ~b & highs) | ((del - ones) & ~del & highs);
            if (special == 0) {
                memcpy(d, s + i, 8);
                d += 8;
                i += 8;
                continue;
            }
        }
        uint8_t c = s[i];
        if (c >= 0x80) {
            uint32_t cp = c == 0xC2 || c == 0xD8 || c == 0xE2 ? mq_json_active(s + i, n - i) : 0;
            if (cp) {                                /* 2 or 3 bytes (valid UTF-8 whatever `strict`) -> 6 */
                *d++ = '\\'; *d++ = 'u';
                *d++ = hex[cp >> 12]; *d++ = hex[(cp >> 8) & 15]; *d++ = hex[(cp >> 4) & 15]; *d++ = hex[cp & 15];
                i += cp < 0x800 ? 2 : 3;
                continue;
            }
            if (!strict) {
                *d++ = (char)c;
                i++;
                continue;
            }
            Py_ssize_t len = mq_utf8_seq(s + i, n - i);
            if (len == 0)
                return NULL;
            memcpy(d, s + i, (size_t)len);
            d += len;
            i += len;
            continue;
        }
        if (c >= 0x20 && c != '"' && c != '\\' && c != 0x7F) {    /* plain ASCII */
            *d++ = (char)c;
            i++;
            continue;
        }
        *d++ = '\\';
        switch (c) {
        case '"': *d++ = '"'; break;
        case '\\': *d++ = '\\'; break;
        case '\b': *d++ = 'b'; break;
        case '\t': *d++ = 't'; break;
        case '\n': *d++ = 'n'; break;
        case '\f': *d++ = 'f'; break;
        case '\r': *d++ = 'r'; break;
        default: *d++ = 'u'; *d++ = '0'; *d++ = '0'; *d++ = hex[c >> 4]; *d++ = hex[c & 15]; break;
        }
        i++;
    }
    *d++ = '"';
    return d;
}

/* ---- CRC-32 ---------------------------------------------------------------------------------------------- */

static uint32_t mq_crc_tab[8][256];

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
static int mq_crc_hw;
static int mq_crc_wide;          /* VPCLMULQDQ on 512-bit registers (AVX-512F): mq_crc32_wide */
#endif

/* Fill the slicing-by-8 table and look for carry-less multiplication (call once, at module init, before
 * mq_crc32 / mq_crc32_s8). */
static inline void mq_crc32_init(void)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    mq_crc_hw = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
    mq_crc_wide = mq_crc_hw && __builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("avx512f");
#endif
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        mq_crc_tab[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++)
        for (int t = 1; t < 8; t++)
            mq_crc_tab[t][n] = mq_crc_tab[0][mq_crc_tab[t - 1][n] & 0xFF] ^ (mq_crc_tab[t - 1][n] >> 8);
}

/* zlib.crc32(p[0:n], crc) with the table loop. */
static inline uint32_t mq_crc32_s8(uint32_t crc, const uint8_t *p, Py_ssize_t n)
{
    uint32_t (*T)[256] = mq_crc_tab;
    crc = ~crc;
    while (n >= 8) {                    /* (unaligned loads: no byte loop to an aligned start first) */
        uint32_t a, b;
        memcpy(&a, p, 4);
        memcpy(&b, p + 4, 4);
#if PY_BIG_ENDIAN
        a = __builtin_bswap32(a);
        b = __builtin_bswap32(b);
#endif
        a ^= crc;
        crc = T[7][a & 0xFF] ^ T[6][(a >> 8) & 0xFF] ^ T[5][(a >> 16) & 0xFF] ^ T[4][a >> 24]
            ^ T[3][b & 0xFF] ^ T[2][(b >> 8) & 0xFF] ^ T[1][(b >> 16) & 0xFF] ^ T[0][b >> 24];
        p += 8;
        n -= 8;
    }
    if (n >= 4) {                       /* four bytes: the first four tables (slicing-by-4) */
        uint32_t a;
        memcpy(&a, p, 4);
#if PY_BIG_ENDIAN
        a = __builtin_bswap32(a);
#endif
        a ^= crc;
        crc = T[3][a & 0xFF] ^ T[2][(a >> 8) & 0xFF] ^ T[1][(a >> 16) & 0xFF] ^ T[0][a >> 24];
        p += 4;
        n -= 4;
    }
    while (n--) crc = T[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

/* The same CRC by carry-less multiplication (x86-64 with PCLMULQDQ and SSE4.1, checked at run time by
 * mq_crc32_init): the input is folded 64 bytes at a time into four 128-bit remainders, those into one, that to
 * 64 bits, and a Barrett reduction gives the 32-bit CRC -- the method of Gopal et al., "Fast CRC Computation for
 * Generic Polynomials Using PCLMULQDQ Instruction" (Intel, 2009). The constants are powers of x modulo the
 * bit-reflected polynomial 0xEDB88320 (as published with that paper and in the Linux kernel):
 *   K1/K2  x^(4*128+32), x^(4*128-32)  fold 512 bits;   K3/K4  x^(128+32), x^(128-32)  fold 128 bits;
 *   K5     x^64  fold 96 -> 64;   P  the polynomial (33 bits), MU  floor(x^64 / P)  (Barrett). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define MQ_CRC_CLMUL 1

__attribute__((target("pclmul,sse4.1")))
static inline uint32_t mq_crc32_clmul_from(__m128i a, const uint8_t *p, Py_ssize_t n);

__attribute__((target("pclmul,sse4.1")))
static uint32_t mq_crc32_clmul(uint32_t crc, const uint8_t *p, Py_ssize_t n)
{
    /* the register (already inverted) over p[0:n], n >= 64 */
    const __m128i k12 = _mm_set_epi64x(0x01c6e41596LL, 0x0154442bd4LL);
    const __m128i k34 = _mm_set_epi64x(0x00ccaa009eLL, 0x01751997d0LL);
    __m128i a = _mm_loadu_si128((const __m128i *)p), b = _mm_loadu_si128((const __m128i *)(p + 16));
    __m128i c = _mm_loadu_si128((const __m128i *)(p + 32)), d = _mm_loadu_si128((const __m128i *)(p + 48));
    a = _mm_xor_si128(a, _mm_cvtsi32_si128((int)crc));
    p += 64;
    n -= 64;
#define MQ_FOLD(r, k, next) _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(r, k, 0x00), \
                                                        _mm_clmulepi64_si128(r, k, 0x11)), next)
    while (n >= 64) {
        a = MQ_FOLD(a, k12, _mm_loadu_si128((const __m128i *)p));
        b = MQ_FOLD(b, k12, _mm_loadu_si128((const __m128i *)(p + 16)));
        c = MQ_FOLD(c, k12, _mm_loadu_si128((const __m128i *)(p + 32)));
        d = MQ_FOLD(d, k12, _mm_loadu_si128((const __m128i *)(p + 48)));
        p += 64;
        n -= 64;
    }
    a = MQ_FOLD(a, k34, b);                          /* four remainders into one */
    a = MQ_FOLD(a, k34, c);
    a = MQ_FOLD(a, k34, d);
#undef MQ_FOLD
    return mq_crc32_clmul_from(a, p, n);
}

/* Byte shuffles for the last partial block (mq_crc32_clmul_from): 16 bytes loaded from MQ_CRC_SHF + 16 + n move a
 * register n bytes down (zeros in), from MQ_CRC_SHF + n its first n bytes to its end (zeros before them). */
static const uint8_t MQ_CRC_SHF[48] = {
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80};

/* The end of mq_crc32_clmul: the 128-bit remainder a of what came before p[0:n] (at least 16 bytes came before),
 * folded over those 16 bytes at a time, then over the last partial block, and reduced to the 32-bit register
 * (also the end of mq_crc32_wide). */
__attribute__((target("pclmul,sse4.1")))
static inline uint32_t mq_crc32_clmul_from(__m128i a, const uint8_t *p, Py_ssize_t n)
{
    const __m128i k34 = _mm_set_epi64x(0x00ccaa009eLL, 0x01751997d0LL);
    const __m128i k5 = _mm_set_epi64x(0, 0x0163cd6124LL);
    const __m128i pmu = _mm_set_epi64x(0x01f7011641LL, 0x01db710641LL);
    const __m128i low32 = _mm_setr_epi32(-1, 0, -1, 0);
    while (n >= 16) {
        a = _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(a, k34, 0x00), _mm_clmulepi64_si128(a, k34, 0x11)),
                          _mm_loadu_si128((const __m128i *)p));
        p += 16;
        n -= 16;
    }
    if (n > 0) {
        /* n (1..15) bytes R left: a * x^8n + R = (a's first n bytes) * x^128 + (a's other bytes, then R), so the
         * remainder takes its last 16 - n bytes and R (R from a load that ends at the data's end: the bytes before
         * it were read already), and its first n bytes, set at the low end of a block, are folded onto that by
         * 128 bits. No table loop and no branch per byte. */
        const __m128i down = _mm_loadu_si128((const __m128i *)(MQ_CRC_SHF + 16 + n));
        const __m128i first = _mm_loadu_si128((const __m128i *)(MQ_CRC_SHF + n));
        const __m128i out = _mm_shuffle_epi8(a, first);
        const __m128i next = _mm_blendv_epi8(_mm_loadu_si128((const __m128i *)(p + n - 16)), _mm_shuffle_epi8(a, down),
                                             first);      /* (first's high bits: the places a's bytes stay) */
        a = _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(out, k34, 0x00), _mm_clmulepi64_si128(out, k34, 0x11)),
                          next);
    }
    /* 128 -> 96 -> 64 bits */
    __m128i t = _mm_clmulepi64_si128(a, k34, 0x10);
    a = _mm_xor_si128(_mm_srli_si128(a, 8), t);
    t = _mm_srli_si128(a, 4);
    a = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(a, low32), k5, 0x00), t);
    /* Barrett reduction to 32 bits */
    t = _mm_clmulepi64_si128(_mm_and_si128(a, low32), pmu, 0x10);
    t = _mm_clmulepi64_si128(_mm_and_si128(t, low32), pmu, 0x00);
    a = _mm_xor_si128(a, t);
    return (uint32_t)_mm_extract_epi32(a, 1);
}

/* The same fold four times wider (VPCLMULQDQ on 512-bit registers, AVX-512F; checked at run time by
 * mq_crc32_init): four 512-bit remainders take 256 bytes a step (each 128-bit lane folded forward 2048 bits),
 * are folded into one (512 bits a step), its four lanes into one 128-bit remainder (by 384, 256 and 128 bits),
 * and mq_crc32_clmul's tail finishes it. The constants are the same powers of x as above, for those distances:
 * x^(D+32), x^(D-32) mod P for a fold by D bits (K1/K2 is D = 512, K3/K4 D = 128). */
__attribute__((target("pclmul,sse4.1,avx512f,vpclmulqdq")))
static uint32_t mq_crc32_wide(uint32_t crc, const uint8_t *p, Py_ssize_t n)
{
    /* the register (already inverted) over p[0:n], n >= 256 */
    const __m512i k2048 = _mm512_broadcast_i32x4(_mm_set_epi64x(0x01322d1430LL, 0x011542778aLL));
    const __m512i k512 = _mm512_broadcast_i32x4(_mm_set_epi64x(0x01c6e41596LL, 0x0154442bd4LL));
    const __m128i k384 = _mm_set_epi64x(0x0174359406LL, 0x003db1ecdcLL);
    const __m128i k256 = _mm_set_epi64x(0x015a546366LL, 0x00f1da05aaLL);
    const __m128i k128 = _mm_set_epi64x(0x00ccaa009eLL, 0x01751997d0LL);
    __m512i a = _mm512_loadu_si512((const void *)p), b = _mm512_loadu_si512((const void *)(p + 64));
    __m512i c = _mm512_loadu_si512((const void *)(p + 128)), d = _mm512_loadu_si512((const void *)(p + 192));
    a = _mm512_xor_si512(a, _mm512_castsi128_si512(_mm_cvtsi32_si128((int)crc)));
    p += 256;
    n -= 256;
    /* r * K (both halves) ^ next, the three-way XOR in one instruction (0x96: a ^ b ^ c) */
#define MQ_FOLDW(r, k, next) _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(r, k, 0x00), \
                                                       _mm512_clmulepi64_epi128(r, k, 0x11), next, 0x96)
    while (n >= 256) {
        a = MQ_FOLDW(a, k2048, _mm512_loadu_si512((const void *)p));
        b = MQ_FOLDW(b, k2048, _mm512_loadu_si512((const void *)(p + 64)));
        c = MQ_FOLDW(c, k2048, _mm512_loadu_si512((const void *)(p + 128)));
        d = MQ_FOLDW(d, k2048, _mm512_loadu_si512((const void *)(p + 192)));
        p += 256;
        n -= 256;
    }
    a = MQ_FOLDW(a, k512, b);                        /* four remainders into one */
    a = MQ_FOLDW(a, k512, c);
    a = MQ_FOLDW(a, k512, d);
    while (n >= 64) {
        a = MQ_FOLDW(a, k512, _mm512_loadu_si512((const void *)p));
        p += 64;
        n -= 64;
    }
#undef MQ_FOLDW
    /* its four 128-bit lanes into one: lane i folded forward (3 - i) * 128 bits onto lane 3 */
#define MQ_FOLD(r, k, next) _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(r, k, 0x00), \
                                                        _mm_clmulepi64_si128(r, k, 0x11)), next)
    __m128i r = _mm512_extracti32x4_epi32(a, 3);
    r = MQ_FOLD(_mm512_extracti32x4_epi32(a, 0), k384, r);
    r = MQ_FOLD(_mm512_extracti32x4_epi32(a, 1), k256, r);
    r = MQ_FOLD(_mm512_extracti32x4_epi32(a, 2), k128, r);
#undef MQ_FOLD
    /* the rest (n < 64) and the reduction: mq_crc32_clmul over this remainder and the rest,
     * i.e. fold the remainder into the next 16 bytes as its first block would be */
    return mq_crc32_clmul_from(r, p, n);
}
#endif

/* zlib.crc32(p[0:n], crc): carry-less multiplication where the CPU has it (inputs of 64 bytes and more), else
 * the table loop. */
static inline uint32_t mq_crc32(uint32_t crc, const uint8_t *p, Py_ssize_t n)
{
#ifdef MQ_CRC_CLMUL
    if (mq_crc_hw && n >= 64)
        return ~(mq_crc_wide && n >= 256 ? mq_crc32_wide(~crc, p, n) : mq_crc32_clmul(~crc, p, n));
#endif
    return mq_crc32_s8(crc, p, n);
}

/* Whether mq_crc32 folds with carry-less multiplication on this CPU. */
static inline int mq_crc32_hardware(void)
{
#ifdef MQ_CRC_CLMUL
    return mq_crc_hw;
#else
    return 0;
#endif
}

/* fn(memoryview of p[0:n]) into *out, fn a callable equal to zlib.crc32 (ISA-L's or zlib's). The read-only
 * view lives only for the call; if the callable kept a reference it is released, cutting it off from memory
 * that is not ours. 0, or -1 with an exception set. */
static inline int mq_crc32_call(PyObject *fn, const uint8_t *p, Py_ssize_t n, uint32_t *out)
{
    PyObject *mv = PyMemoryView_FromMemory((char *)p, n, PyBUF_READ);
    PyObject *r = mv ? PyObject_CallOneArg(fn, mv) : NULL;
    if (mv != NULL) {
        if (Py_REFCNT(mv) > 1) {
            PyObject *rel = PyObject_CallMethod(mv, "release", NULL);
            if (rel == NULL)
                PyErr_Clear();                       /* still exported: it cannot be used any more anyway */
            Py_XDECREF(rel);
        }
        Py_DECREF(mv);
    }
    if (r == NULL)
        return -1;
    unsigned long long v = PyLong_AsUnsignedLongLongMask(r);
    Py_DECREF(r);
    if (v == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    *out = (uint32_t)v;
    return 0;
}

/* ---- decimal integers (appended: the NDJSON writers' fast integer formatting) ------------------------------ */

/* v in decimal at d (at most 20 bytes: a sign and 19 digits); returns the end. Two digits per division, the
 * length counted first so the digits go straight to their place. */
static inline char *mq_fmt_i64(char *d, int64_t v)
{
    static const char pairs[] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
                                "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
                                "8081828384858687888990919293949596979899";
    static const uint64_t p10[20] = {1ULL, 10ULL, 100ULL, 1000ULL, 10000ULL, 100000ULL, 1000000ULL, 10000000ULL,
                                     100000000ULL, 1000000000ULL, 10000000000ULL, 100000000000ULL,
                                     1000000000000ULL, 10000000000000ULL, 100000000000000ULL,
                                     1000000000000000ULL, 10000000000000000ULL, 100000000000000000ULL,
                                     1000000000000000000ULL, 10000000000000000000ULL};
    uint64_t u = (uint64_t)v;
    if (v < 0) {
        *d++ = '-';
        u = 0 - u;
    }
    if (u < 10) {
        *d++ = (char)('0' + u);
        return d;
    }
    int t = ((64 - __builtin_clzll(u)) * 1233) >> 12;          /* floor(log10(u)) or one more */
    char *e = d + t + 1 - (u < p10[t]), *p = e;
    while (u >= 100000000ULL) {                  /* eight digits at a time, those in 32-bit arithmetic */
        uint64_t q = u / 100000000ULL;
        uint32_t r = (uint32_t)(u - q * 100000000ULL);
        for (int k = 0; k < 4; k++, r /= 100) {
            p -= 2;
            memcpy(p, pairs + 2 * (r % 100), 2);
        }
        u = q;
    }
    uint32_t w = (uint32_t)u;
    for (; w >= 100; w /= 100) {
        p -= 2;
        memcpy(p, pairs + 2 * (w % 100), 2);
    }
    if (w >= 10) {
        p -= 2;
        memcpy(p, pairs + 2 * w, 2);
    } else
        *--p = (char)('0' + w);
    return e;
}

#endif
