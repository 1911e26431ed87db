/* rmqunit.h: the RocketMQ core every part of rmqcore shares -- the layout, the framing rule, the body CRC and
 * the one unit walker.
 *
 * The layout (each field's offset and size by name, the tail's length-field widths, the magic codes, the
 * minimum size, the IPv6 host flags) is handed over once by rmqcore.configure() from mqtool/rocketmq/layout.py,
 * which derives it from formats/rocketmq.py; configure() refuses a layout whose fingerprint is not the one this
 * code was written for (RMQ_LAYOUT_FINGERPRINT in rmqcore.c), and every part then stays off.
 *
 * The walker (rmq_walk, below: one function, inlined into each part) frames each unit with the tail rule, stops at a BLANK unit, at a unit it cannot frame, at
 * the limit or the cap, computes the body CRC when the verb wants it, and hands every framed unit to the verb's
 * hook (verify checks, dump rows / NDJSON, rebuild dispatch, Message objects), which consumes it or ends the run.
 */
#ifndef RMQUNIT_H
#define RMQUNIT_H
#include "mqcore.h"             /* Python.h first; byte order, UTF-8, JSON strings, CRC-32 */

/* Fixed-part fields, by the names configure() receives them under (layout.FIXED_NAMES). */
enum { F_TOTAL, F_MAGIC, F_BODYCRC, F_QUEUEID, F_FLAG, F_QOFF, F_PHYS, F_SYSFLAG, F_BORNTS, F_BADDR, F_BPORT,
       F_STORETS, F_SADDR, F_SPORT, F_RECONSUME, F_PREPARED, F_BODYLEN, NFIELDS };

typedef struct {
    int configured;
    Py_ssize_t off[NFIELDS], size[NFIELDS], fixed_size;
    int tl_size[2], pl_size;         /* TOPICLENGTH width of v1 / v2; PROPERTIESLENGTH width */
    long long magic_v1, magic_v2, blank_magic, min_size, v6_flags;
    PyObject *crc32;                 /* a callable equal to zlib.crc32 (strong ref), or NULL: slicing-by-8 */
} RmqLayout;

extern RmqLayout RMQ;               /* rmqcore.c: set by rmqcore.configure() */

/* A framed unit: positions are relative to the unit's first byte. */
typedef struct {
    Py_ssize_t pos;                  /* where the unit starts in the buffer */
    long long total, body_len, sys_flag;
    int v2;
    Py_ssize_t tp, tl, pp;           /* topic start and length; properties start (they end at total) */
    int crc_ok;                      /* 1 / 0 when the walk computed it (RMQ_CRC_ON / _MUST), else -1 */
} RmqUnit;

static inline long long rmq_field(const unsigned char *u, int f)
{
    return mq_rd_be(u + RMQ.off[f], (int)RMQ.size[f]);   /* sizes checked by configure() */
}

/* The part called on a run: 0, or -1 with a RuntimeError set when rmqcore.configure() was not called (or
 * refused the layout). */
static inline int rmq_ready(const char *part)
{
    if (RMQ.configured) return 0;
    PyErr_Format(PyExc_RuntimeError, "rmqcore.%s: rmqcore.configure() was not called or refused the layout", part);
    return -1;
}

/* ---- the walker ---------------------------------------------------------------------------------------- */

enum { RMQ_V1 = 1, RMQ_V2 = 2 };                                  /* magics a walk takes */
enum { RMQ_CRC_OFF, RMQ_CRC_ON, RMQ_CRC_MUST };                   /* body CRC: skip / compute / stop if wrong */
enum { RMQ_STOP_LIMIT, RMQ_STOP_CAP, RMQ_STOP_BLANK, RMQ_STOP_FRAME, RMQ_STOP_CRC, RMQ_STOP_VERB };

typedef struct RmqWalk RmqWalk;
/* A verb's hook: 1 the unit is consumed, 0 the run ends before it (nothing of it kept), -1 error set. */
typedef int (*RmqHook)(RmqWalk *w, const unsigned char *u, RmqUnit *x);

struct RmqWalk {
    const unsigned char *buf;
    Py_ssize_t len;                  /* bytes in buf (end is capped to it) */
    Py_ssize_t pos, limit, end;      /* units start in [pos, limit) and end by end; pos is where the run ended */
    long long max_size;              /* TOTALSIZE above it: not framed */
    Py_ssize_t cap, count;           /* at most cap units; count consumed */
    int magics;                      /* RMQ_V1 | RMQ_V2 */
    long long decline_flags;         /* sysFlag bits that end the run (the IPv6 host flags always do) */
    int crc;                         /* RMQ_CRC_* */
    RmqHook hook;
    void *verb;                      /* the verb's state */
    int stop;                        /* RMQ_STOP_*: why the run ended */
};

/* zlib.crc32(p[0:n], value) with the core's slicing-by-8 table (the one table of rmqcore; rmqcore.c). */
uint32_t rmq_crc32_s8(uint32_t value, const unsigned char *p, Py_ssize_t n);

/* crc32(p[0:n]) & 0x7FFFFFFF with the configured CRC (a callable, or the slicing-by-8 table). 0 or -1. */
int rmq_body_crc(const unsigned char *p, Py_ssize_t n, long long *out);

/* ---- the walker (one function; static inline so each part's hook is called directly) ------------------- */

/* Frame the unit at u (avail bytes left in the buffer) as records.decode_common / layout.frame_tail do: a magic
 * the walk takes, TOTALSIZE within [min size, avail, max_size], no declining sysFlag bit, BODYLENGTH >= 0, and
 * the topic and properties lengths (signed) ending exactly at TOTALSIZE. The integer checks come before any
 * byte past the fixed part is read; each later read is at an index proven < total <= avail. 1 framed, else 0
 * with w->stop set. */
static inline int rmq_frame(RmqWalk *w, const unsigned char *u, Py_ssize_t avail, RmqUnit *x)
{
    const RmqLayout *L = &RMQ;
    w->stop = RMQ_STOP_FRAME;
    if (avail < L->fixed_size) return 0;
    long long magic = rmq_field(u, F_MAGIC);
    int v2 = magic == L->magic_v2;
    if (!(v2 ? (w->magics & RMQ_V2) : (magic == L->magic_v1 && (w->magics & RMQ_V1)))) {
        if (magic == L->blank_magic) w->stop = RMQ_STOP_BLANK;   /* end of the data: the Python path reads it */
        return 0;
    }
    long long total = rmq_field(u, F_TOTAL), sys_flag = rmq_field(u, F_SYSFLAG);
    long long body_len = rmq_field(u, F_BODYLEN);
    if (total < L->min_size || total > avail || total > w->max_size || (sys_flag & (L->v6_flags | w->decline_flags))
        || body_len < 0 || body_len > total - L->fixed_size)
        return 0;
    Py_ssize_t p = L->fixed_size + (Py_ssize_t)body_len;          /* TOPICLENGTH */
    int tls = L->tl_size[v2], pls = L->pl_size;
    if (p + tls + pls > total) return 0;
    long long tl = mq_rd_be(u + p, tls);
    Py_ssize_t tp = p + tls;
    if (tl < 0 || tp + tl + pls > total) return 0;
    Py_ssize_t pp = tp + (Py_ssize_t)tl + pls;                     /* first properties byte */
    long long pl = mq_rd_be(u + pp - pls, pls);
    if (pl < 0 || pp + pl != total) return 0;                      /* TOTALSIZE = the length the fields give */
    x->total = total; x->body_len = body_len; x->sys_flag = sys_flag; x->v2 = v2;
    x->tp = tp; x->tl = (Py_ssize_t)tl; x->pp = pp;
    return 1;
}

/* Walk units from w->pos. 0 (w->pos, w->count, w->stop set), or -1 with an exception set (w->pos and w->count
 * are those of the units consumed before the error). */
static inline int rmq_walk(RmqWalk *w)
{
    w->count = 0;
    w->stop = RMQ_STOP_LIMIT;
    if (w->pos < 0 || !RMQ.configured) return 0;                    /* nonsense: consume nothing */
    const Py_ssize_t end = w->end < w->len ? w->end : w->len;      /* never trust the caller's end */
    const RmqHook hook = w->hook;
    while (w->pos < w->limit) {
        if (w->count >= w->cap) {
            w->stop = RMQ_STOP_CAP;
            break;
        }
        const unsigned char *u = w->buf + w->pos;
        RmqUnit x;
        if (!rmq_frame(w, u, end - w->pos, &x)) break;
        x.pos = w->pos;
        x.crc_ok = -1;
        if (w->crc != RMQ_CRC_OFF) {
            long long c;
            if (rmq_body_crc(u + RMQ.fixed_size, (Py_ssize_t)x.body_len, &c) < 0) return -1;
            x.crc_ok = c == rmq_field(u, F_BODYCRC);
            if (!x.crc_ok && w->crc == RMQ_CRC_MUST) {
                w->stop = RMQ_STOP_CRC;
                break;
            }
        }
        int r = hook(w, u, &x);
        if (r < 0) return -1;
        if (r == 0) {
            w->stop = RMQ_STOP_VERB;
            break;
        }
        w->pos += (Py_ssize_t)x.total;
        w->count++;
    }
    return 0;
}

/* ---- the dispatch's hashes (CommitLog dispatch to the consume queue and the index), shared by rebuild's
 * dispatch and verify's cross-check table; dispatch.py is the Python reference. */

/* Java String.hashCode step over the UTF-16 code units of UTF-8 text, exactly what Python's decode gives.
 * Returns 0 (h untouched) for anything Python's strict decoder would not accept unchanged (bad lead byte,
 * missing continuation, overlong form, surrogate, above U+10FFFF): the caller declines the unit, and Python
 * hashes what its "replace" decode gives. Code points above U+FFFF are two units (a surrogate pair). */
static inline int rmq_utf16_hash(uint32_t *h, const uint8_t *p, Py_ssize_t n)
{
    uint32_t x = *h;
    Py_ssize_t i = 0;
    while (i < n) {
        /* eight ASCII bytes in one step: x * 31^8 + sum c[k] * 31^(7-k) (mod 2^32), the products independent */
        while (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, p + i, 8);
            if (w & 0x8080808080808080ULL)
                break;
            const uint8_t *q = p + i;
            x = x * 2487512833u + q[0] * 1742810335u + q[1] * 887503681u + q[2] * 28629151u + q[3] * 923521u
                + q[4] * 29791u + q[5] * 961u + q[6] * 31u + q[7];
            i += 8;
        }
        if (i + 4 <= n) {               /* four ASCII bytes: x * 31^4 + sum c[k] * 31^(3-k) */
            uint32_t w4;
            memcpy(&w4, p + i, 4);
            if (!(w4 & 0x80808080u)) {
                const uint8_t *q = p + i;
                x = x * 923521u + q[0] * 29791u + q[1] * 961u + q[2] * 31u + q[3];
                i += 4;
                if (i >= n)
                    break;
            }
        }
        if (i >= n)
            break;
        uint32_t c = p[i];
        if (c < 0x80) {
            x = x * 31u + c;
            i++;
            continue;
        }
        /* lead byte: C2..DF two bytes, E0..EF three, F0..F4 four; anything else is invalid */
        int len = (c >= 0xC2 && c <= 0xDF) ? 2 : (c >= 0xE0 && c <= 0xEF) ? 3 : (c >= 0xF0 && c <= 0xF4) ? 4 : 0;
        if (len == 0)
            return 0;
        uint32_t cp = c & (0x7Fu >> len);
        if (n - i < len)
            return 0;
        for (int k = 1; k < len; k++) {
            uint32_t d = p[i + k];
            if ((d & 0xC0) != 0x80)
                return 0;
            cp = (cp << 6) | (d & 0x3F);
        }
        if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
            (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
            return 0;
        if (cp < 0x10000) {
            x = x * 31u + cp;
        } else {
            cp -= 0x10000;
            x = x * 31u + (0xD800u + (cp >> 10));
            x = x * 31u + (0xDC00u + (cp & 0x3FF));
        }
        i += len;
    }
    *h = x;
    return 1;
}

/* IndexFile#indexKeyHashMethod: abs(hashCode), Integer.MIN_VALUE -> 0 (always in [0, 2^31 - 1]). */
static inline int32_t rmq_key_hash(uint32_t h)
{
    int32_t s = (int32_t)h;
    if (s >= 0)
        return s;
    if (h == 0x80000000u)
        return 0;
    return -s;
}

/* The index keys of a message, in the broker's order: topic#UNIQ_KEY, then topic#each non-empty KEYS token
 * (split at keysep). prefix: the hash of topic + the join text (rmq_utf16_hash); uniq/keys: the values, a
 * length <= 0 when absent; both already known to be valid UTF-8. Returns how many hashes went to out, or -1
 * when there are more than max (the caller leaves the message to Python). */
static inline int rmq_index_hashes(uint32_t prefix, const uint8_t *uniq, Py_ssize_t un, const uint8_t *keys,
                                   Py_ssize_t kn, uint8_t keysep, int32_t *out, int max)
{
    int nk = 0;
    uint32_t h;
    if (un > 0) {
        if (max < 1)
            return -1;
        h = prefix;
        rmq_utf16_hash(&h, uniq, un);
        out[nk++] = rmq_key_hash(h);
    }
    const uint8_t *k = keys, *ke = keys + (kn > 0 ? kn : 0);
    while (k < ke) {
        const uint8_t *t = memchr(k, keysep, (size_t)(ke - k));
        const uint8_t *te = t ? t : ke;
        if (te > k) {                   /* a token of valid UTF-8 split at an ASCII byte is valid */
            if (nk == max)
                return -1;
            h = prefix;
            rmq_utf16_hash(&h, k, te - k);
            out[nk++] = rmq_key_hash(h);
        }
        k = t ? t + 1 : ke;
    }
    return nk;
}

/* ---- the property splitter (MessageDecoder#string2messageProperties over bytes, for the few names a verb
 * reads); dispatch.quick_props / dispatch.props_dict are the Python reference. */

typedef struct { const uint8_t *p; Py_ssize_t n; } RmqProp;     /* a value in the properties; n < 0: absent */
enum { RMQ_PROPS_KEEP_EMPTY = 0, RMQ_PROPS_SKIP_EMPTY = 1 };

/* The names a split looks for, made once (rmq_names_init) so that a pair is compared with each in one step:
 * word[i] is the name's first eight bytes, or the name and the name/value separator after it when that is
 * shorter, and mask[i] covers those bytes; first[b] has bit i set when a pair starting with byte b may be a
 * pair of name i (most pairs are of none: one lookup). */
#define RMQ_NAMES_MAX 8
typedef struct {
    int k;
    uint8_t nv;
    uint8_t first[256];
    const char *s[RMQ_NAMES_MAX];
    Py_ssize_t len[RMQ_NAMES_MAX];
    uint64_t word[RMQ_NAMES_MAX], mask[RMQ_NAMES_MAX];
} RmqNames;

/* k (<= RMQ_NAMES_MAX) names: names[i], lens[i] bytes, no separator in them (the names stay the caller's). */
static inline void rmq_names_init(RmqNames *ns, int k, const char *const *names, const Py_ssize_t *lens, uint8_t nv)
{
    ns->k = k;
    ns->nv = nv;
    memset(ns->first, 0, sizeof ns->first);
    for (int i = 0; i < k; i++) {
        ns->first[lens[i] ? (uint8_t)names[i][0] : nv] |= (uint8_t)(1u << i);
        uint8_t w[8] = {0}, m[8] = {0};
        const Py_ssize_t c = lens[i] < 8 ? lens[i] : 8;
        memcpy(w, names[i], (size_t)c);
        memset(m, 0xFF, (size_t)c);
        if (lens[i] < 8) {
            w[lens[i]] = nv;
            m[lens[i]] = 0xFF;
        }
        ns->s[i] = names[i];
        ns->len[i] = lens[i];
        memcpy(&ns->word[i], w, 8);
        memcpy(&ns->mask[i], m, 8);
    }
}

/* One pair [s, se) (room >= se - s bytes readable from s) against the names: the first name it is a pair of
 * takes its value (see rmq_props). */
static inline void rmq_pair(const uint8_t *s, const uint8_t *se, Py_ssize_t room, const RmqNames *ns,
                            int skip_empty, RmqProp *v)
{
    const Py_ssize_t pn = se - s;
    if (pn <= 0)
        return;                         /* an empty pair is no name's */
    unsigned cand = ns->first[s[0]];
    if (cand == 0)
        return;
    uint64_t w;
    if (room >= 8) {
        memcpy(&w, s, 8);
    } else {
        uint8_t t[8] = {0};
        memcpy(t, s, (size_t)room);
        memcpy(&w, t, 8);
    }
    for (; cand; cand &= cand - 1) {    /* in the names' order: the first that matches */
        const int i = __builtin_ctz(cand);
        const Py_ssize_t nl = ns->len[i];
        /* (the length test keeps the compared bytes inside the pair) */
        if (((w ^ ns->word[i]) & ns->mask[i]) == 0 && pn > nl + skip_empty
            && (nl < 8 || (s[nl] == ns->nv && memcmp(s + 8, ns->s[i] + 8, (size_t)(nl - 8)) == 0))) {
            v[i].p = s + nl + 1;
            v[i].n = se - v[i].p;
            break;
        }
    }
}

/* The test hooks' side (split_props, props_scan): names from a tuple of bytes (at most max) into ns; 0, or -1
 * with TypeError/ValueError set. The bytes stay the tuple's (it outlives ns). */
static inline int rmq_names_from(PyObject *names, int max, uint8_t nv, RmqNames *ns)
{
    const Py_ssize_t k = PyTuple_GET_SIZE(names);
    const char *nm[RMQ_NAMES_MAX];
    Py_ssize_t nl[RMQ_NAMES_MAX];
    if (k > max || k > RMQ_NAMES_MAX) {
        PyErr_Format(PyExc_ValueError, "at most %d names", max);
        return -1;
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *o = PyTuple_GET_ITEM(names, i);
        if (!PyBytes_Check(o)) {
            PyErr_SetString(PyExc_TypeError, "names must be bytes");
            return -1;
        }
        nm[i] = PyBytes_AS_STRING(o);
        nl[i] = PyBytes_GET_SIZE(o);
    }
    rmq_names_init(ns, (int)k, nm, nl, nv);
    return 0;
}

/* The values found for ns's names as a tuple (bytes, or None where absent); NULL with an exception set. */
static inline PyObject *rmq_values_tuple(const RmqProp *v, const RmqNames *ns)
{
    PyObject *out = PyTuple_New(ns->k);
    for (Py_ssize_t i = 0; out != NULL && i < ns->k; i++) {
        PyObject *val = v[i].n < 0 ? Py_NewRef(Py_None) : PyBytes_FromStringAndSize((const char *)v[i].p, v[i].n);
        if (val == NULL)
            Py_CLEAR(out);
        else
            PyTuple_SET_ITEM(out, i, val);
    }
    return out;
}

/* For each of the names, the value of its last pair in the
 * properties p[0:n] ("name" nv "value" pairs joined by sep; a value runs to the next sep) into v[i].
 * RMQ_PROPS_KEEP_EMPTY: a pair with an empty value counts like any other (n == 0: rebuild's dispatch then
 * leaves the message to the full parse, where an earlier pair may win); RMQ_PROPS_SKIP_EMPTY: such a pair is
 * passed over, so the last non-empty one stands (verify's cross-check table). Only ASCII bytes are compared:
 * a UTF-8 decode keeps them where they are, so the positions are those the text search finds. */
static inline void rmq_props(const uint8_t *p, Py_ssize_t n, uint8_t sep, const RmqNames *ns, int skip_empty,
                             RmqProp *v)
{
    const uint8_t *e = p + n, *s = p;
    for (int i = 0; i < ns->k; i++)
        v[i].n = -1;
    for (;;) {                          /* s: start of a pair */
        const uint8_t *t = memchr(s, sep, (size_t)(e - s));
        const uint8_t *se = t ? t : e;
        rmq_pair(s, se, e - s, ns, skip_empty, v);
        if (t == NULL)
            break;
        s = t + 1;
    }
}

/* ---- verify's one pass over the properties ------------------------------------------------------------- */

/* A byte string looked for in the properties (Python's `needle in props[from:]`, the start given per message):
 * len 0 is always found. */
typedef struct { const uint8_t *s; Py_ssize_t len; } RmqNeedle;

#if defined(__SSE2__) && !defined(RMQ_NO_SIMD)      /* (RMQ_NO_SIMD: build the portable path) */
#include <emmintrin.h>
#define RMQ_PROPS_SCAN_SIMD 1

/* p[at:at+16], bytes at and past avail read as zero (the load never reaches past avail). */
static inline __m128i rmq_load16(const uint8_t *p, Py_ssize_t at, Py_ssize_t avail)
{
    if (at + 16 <= avail)
        return _mm_loadu_si128((const __m128i *)(p + at));
    uint8_t t[16] = {0};
    memcpy(t, p + at, (size_t)(avail - at));
    return _mm_loadu_si128((const __m128i *)t);
}
#endif

/* What one pass looks for, made once (rmq_scan_init) for every message of a walk: the property separator and
 * up to two needles, with the bytes each 16-byte step compares against (a needle's first and last byte). */
typedef struct {
    uint8_t sep;
    int nn;
    RmqNeedle nd[2];
    Py_ssize_t d[2];                    /* a needle's last byte: this far after its first */
#ifdef RMQ_PROPS_SCAN_SIMD
    __m128i vsep, first[2], last[2];
    uint8_t wsep[32], wfirst[2][32], wlast[2][32];    /* the same bytes 32 times (the AVX2 pass loads them) */
#endif
} RmqScanSet;

static inline void rmq_scan_init(RmqScanSet *S, uint8_t sep, const RmqNeedle *nd, int nn)
{
    S->sep = sep;
    S->nn = nn;
    for (int j = 0; j < 2; j++) {
        /* (an absent second needle: the first again) */
        const RmqNeedle x = nn > 0 ? nd[j < nn ? j : 0] : (RmqNeedle){NULL, 0};
        S->nd[j] = x;
        S->d[j] = x.len > 0 ? x.len - 1 : 0;
#ifdef RMQ_PROPS_SCAN_SIMD
        S->first[j] = _mm_set1_epi8((char)(x.len > 0 ? x.s[0] : 0));
        S->last[j] = _mm_set1_epi8((char)(x.len > 0 ? x.s[S->d[j]] : 0));
        memset(S->wfirst[j], x.len > 0 ? x.s[0] : 0, 32);
        memset(S->wlast[j], x.len > 0 ? x.s[S->d[j]] : 0, 32);
#endif
    }
#ifdef RMQ_PROPS_SCAN_SIMD
    S->vsep = _mm_set1_epi8((char)sep);
    memset(S->wsep, sep, 32);
#endif
}

/* Whether one of the needles occurs at c (its first byte is there) inside p[0:n], starting at or after its from. */
static inline int rmq_needle_at(const uint8_t *p, Py_ssize_t n, Py_ssize_t c, const RmqScanSet *S,
                                const Py_ssize_t *from)
{
    for (int j = 0; j < S->nn; j++) {
        const RmqNeedle *x = &S->nd[j];
        if (x->len > 0 && p[c] == x->s[0] && c >= from[j] && c + x->len <= n && p[c + S->d[j]] == x->s[S->d[j]]
            && memcmp(p + c, x->s, (size_t)x->len) == 0)
            return 1;
    }
    return 0;
}

/* What verify's lane asks of a message's properties p[0:n], in one pass (SSE2 16 bytes a step, or AVX2 32 where
 * the CPU has it; elsewhere the same answers a byte at a time): 1 when one of the set's needles occurs at or after
 * its from[j] (the lane declines the unit; the values are then not all found), else 0 with the values of the
 * names as rmq_props gives them and *ascii set when no byte is >= 0x80 (the caller then knows the text is valid
 * UTF-8). avail: bytes readable from p (>= n); no load reaches past it.
 *
 * The SIMD step, for a vector of W bytes (RMQ_SCAN_STEP below, written once for both widths): the candidates of a
 * needle are its first byte here and its last byte d further (a candidate whose last byte would lie past n is no
 * occurrence: the loads past n read zeros or other bytes, and rmq_needle_at checks every candidate in full); the
 * separators end pairs; the sign bits say non-ASCII. Bits past n are masked off: those bytes are not the text's. */
#ifdef RMQ_PROPS_SCAN_SIMD
#define RMQ_SCAN_STEP(W, VEC, LOAD, EQ, AND, MOVEMASK, FIRST, LAST, VSEP)                                        \
    for (Py_ssize_t b = 0; b < n; b += W) {                                                                      \
        const VEC x = LOAD(p, b, avail);                                                                         \
        const uint32_t m = n - b >= W ? (uint32_t)(((uint64_t)1 << W) - 1) : (uint32_t)(((uint64_t)1 << (n - b)) - 1); \
        hi |= (uint32_t)MOVEMASK(x) & m;                                                                         \
        if (nn > 0) {                                                                                            \
            uint32_t c = 0;                                                                                      \
            if (b + d0 < n)                                                                                      \
                c |= (uint32_t)MOVEMASK(AND(EQ(x, FIRST(0)), EQ(LOAD(p, b + d0, avail), LAST(0))));              \
            if (b + d1 < n)                                                                                      \
                c |= (uint32_t)MOVEMASK(AND(EQ(x, FIRST(1)), EQ(LOAD(p, b + d1, avail), LAST(1))));              \
            for (c &= m; c; c &= c - 1)                                                                          \
                if (rmq_needle_at(p, n, b + __builtin_ctz(c), S, from))                                          \
                    return 1;                                                                                    \
        }                                                                                                        \
        if (k > 0) {                                                                                             \
            for (uint32_t t = (uint32_t)MOVEMASK(EQ(x, VSEP)) & m; t; t &= t - 1) {                              \
                const Py_ssize_t e = b + __builtin_ctz(t);                                                       \
                rmq_pair(p + s, p + e, avail - s, ns, skip_empty, v);                                            \
                s = e + 1;                                                                                       \
            }                                                                                                    \
        }                                                                                                        \
    }

#define RMQ_SCAN_FIRST16(j) S->first[j]
#define RMQ_SCAN_LAST16(j) S->last[j]

static inline int rmq_props_scan16(const uint8_t *p, Py_ssize_t n, Py_ssize_t avail, const RmqScanSet *S,
                                   const Py_ssize_t *from, const RmqNames *ns, int skip_empty, RmqProp *v,
                                   int *ascii)
{
    const int nn = S->nn, k = ns->k;
    const Py_ssize_t d0 = S->d[0], d1 = S->d[1];
    uint32_t hi = 0;
    Py_ssize_t s = 0;                                   /* start of the pair being read */
    RMQ_SCAN_STEP(16, __m128i, rmq_load16, _mm_cmpeq_epi8, _mm_and_si128, _mm_movemask_epi8, RMQ_SCAN_FIRST16,
                  RMQ_SCAN_LAST16, S->vsep)
    if (k > 0)
        rmq_pair(p + s, p + n, avail - s, ns, skip_empty, v);
    *ascii = hi == 0;
    return 0;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define RMQ_PROPS_SCAN_AVX2 1

/* p[at:at+32], bytes at and past avail read as zero (the load never reaches past avail). */
__attribute__((target("avx2")))
static inline __m256i rmq_load32(const uint8_t *p, Py_ssize_t at, Py_ssize_t avail)
{
    if (at + 32 <= avail)
        return _mm256_loadu_si256((const __m256i *)(p + at));
    uint8_t t[32] = {0};
    memcpy(t, p + at, (size_t)(avail - at));
    return _mm256_loadu_si256((const __m256i *)t);
}

#define RMQ_SCAN_FIRST32(j) _mm256_loadu_si256((const __m256i *)S->wfirst[j])
#define RMQ_SCAN_LAST32(j) _mm256_loadu_si256((const __m256i *)S->wlast[j])

__attribute__((target("avx2"), noinline, unused))
static int rmq_props_scan32(const uint8_t *p, Py_ssize_t n, Py_ssize_t avail, const RmqScanSet *S,
                            const Py_ssize_t *from, const RmqNames *ns, int skip_empty, RmqProp *v, int *ascii)
{
    const int nn = S->nn, k = ns->k;
    const Py_ssize_t d0 = S->d[0], d1 = S->d[1];
    const __m256i vsep = _mm256_loadu_si256((const __m256i *)S->wsep);
    uint32_t hi = 0;
    Py_ssize_t s = 0;
    RMQ_SCAN_STEP(32, __m256i, rmq_load32, _mm256_cmpeq_epi8, _mm256_and_si256, _mm256_movemask_epi8,
                  RMQ_SCAN_FIRST32, RMQ_SCAN_LAST32, vsep)
    if (k > 0)
        rmq_pair(p + s, p + n, avail - s, ns, skip_empty, v);
    *ascii = hi == 0;
    return 0;
}
#endif

/* Which step rmq_props_scan takes: 32 (AVX2, where the CPU has it) or 16; the test hook sets it to compare both. */
static int rmq_scan_width __attribute__((unused)) = 16;

static inline int rmq_scan_width_best(void)   /* (rmqverify's module init sets rmq_scan_width) */
{
#ifdef RMQ_PROPS_SCAN_AVX2
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2"))
        return 32;
#endif
    return 16;
}
#endif

static inline int rmq_props_scan(const uint8_t *p, Py_ssize_t n, Py_ssize_t avail, const RmqScanSet *S,
                                 const Py_ssize_t *from, const RmqNames *ns, int skip_empty, RmqProp *v, int *ascii)
{
    const int nn = S->nn, k = ns->k;
    for (int j = 0; j < nn; j++)
        if (S->nd[j].len == 0)
            return 1;
    for (int i = 0; i < k; i++)
        v[i].n = -1;
#ifdef RMQ_PROPS_SCAN_SIMD
#ifdef RMQ_PROPS_SCAN_AVX2
    if (rmq_scan_width == 32)
        return rmq_props_scan32(p, n, avail, S, from, ns, skip_empty, v, ascii);
#endif
    return rmq_props_scan16(p, n, avail, S, from, ns, skip_empty, v, ascii);
#else
    (void)avail;                        /* (the same answers, a byte at a time) */
    for (int j = 0; j < nn; j++)
        for (Py_ssize_t c = from[j]; c + S->nd[j].len <= n; c++)
            if (p[c] == S->nd[j].s[0] && memcmp(p + c, S->nd[j].s, (size_t)S->nd[j].len) == 0)
                return 1;
    if (k > 0)
        rmq_props(p, n, S->sep, ns, skip_empty, v);
    Py_ssize_t i = 0;
    while (i < n && p[i] < 0x80)
        i++;
    *ascii = i == n;
    return 0;
#endif
}

#endif
