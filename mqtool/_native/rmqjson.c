/* rmqjson: the NDJSON lines of `mqtool dump commitlog --json` for runs of common RocketMQ units, written in C.
 *
 * json_rows(buf, pos, limit, end, base, file_json, max_size, body_mode, cap) -> (new_pos, count, bytes) -- the
 * dump hook of the core's walker (rmqdump.c) calling rmq_json_unit() per unit -- gives, for the units rows()
 * would turn into dicts, the very bytes render.write_ndjson writes for those dicts with orjson: the same keys
 * in the same order, orjson's string escaping (\" \\ \b \t \n \f \r, other control characters as \u00xx,
 * everything else as UTF-8), integers in decimal, true/false/null. No dict, no str, no orjson call per
 * message. Its run ends (the unit is left to the dict path / Python path) at a unit whose text is not valid
 * UTF-8 (Python would put U+FFFD in), or whose properties repeat a name (the row then has "property_pairs"),
 * or that has more than MAXPAIRS properties -- besides every unit the walker or rmq_dump_ok() declines.
 * Values that come from Python tables (kind, magic, transaction and compression names, the file name) are
 * passed in already rendered by orjson (configure() and file_json). Every unit is written whole or not at all.
 */
#include "rmqdump.h"
#ifdef __SSE2__
#include <emmintrin.h>
#endif


static int jb_reserve(JB *b, Py_ssize_t need)
{
    if (need > PY_SSIZE_T_MAX / 2 - b->n) { PyErr_NoMemory(); return -1; }
    if (b->n + need <= b->cap) return 0;
    Py_ssize_t cap = b->cap * 2 > b->n + need ? b->cap * 2 : b->n + need + 65536;
    if (b->ba != NULL) {                                /* a caller's bytearray: its size is the capacity */
        if (PyByteArray_Resize(b->ba, cap) < 0) return -1;
        b->p = PyByteArray_AS_STRING(b->ba);
        b->cap = cap;
        return 0;
    }
    char *p = PyMem_Realloc(b->p, (size_t)cap);
    if (p == NULL) { PyErr_NoMemory(); return -1; }
    b->p = p;
    b->cap = cap;
    return 0;
}

/* The writers below write at a cursor (a local pointer: no reload of the buffer through the JB at each byte)
 * and never check room: the caller reserved the worst case of the whole unit. */
static inline char *w_raw(char *o, const void *p, Py_ssize_t n) { memcpy(o, p, (size_t)n); return o + n; }

static inline char *w_i64(char *o, long long v) { return mq_fmt_i64(o, v); }

static const char HEXL[] = "0123456789abcdef", HEXU[] = "0123456789ABCDEF";

/* A JSON string of p[0:n] (valid UTF-8: rmq_dump_ok checked the text it comes from), escaped as mq_json_str does.
 * Most text needs no escape at all: it is looked at 16 bytes at a time and copied whole (SSE2: the loads may
 * read up to 15 bytes past the text, which the caller allows only when they lie inside the buffer -- `far`,
 * below -- and the stores may write up to 15 bytes past it, inside the room reserved for the line); text with
 * a byte to escape goes to mq_json_str. */
static inline char *w_str_scan(char *o, const unsigned char *p, Py_ssize_t n)
{
#ifdef __SSE2__
    const __m128i q = _mm_set1_epi8('"'), bs = _mm_set1_epi8('\\'), c1f = _mm_set1_epi8(0x1f);
    /* DEL and the first bytes of the code points mq_json_active escapes (C1 controls, U+061C, U+20xx) */
    const __m128i del = _mm_set1_epi8(0x7f), lc2 = _mm_set1_epi8((char)0xc2), ld8 = _mm_set1_epi8((char)0xd8),
                  le2 = _mm_set1_epi8((char)0xe2);
    char *d = o + 1;
    for (Py_ssize_t i = 0; i < n; i += 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(p + i));
        __m128i bad = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, q), _mm_cmpeq_epi8(x, bs)),
                                   _mm_cmpeq_epi8(_mm_min_epu8(x, c1f), x));        /* x <= 0x1f */
        bad = _mm_or_si128(bad, _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, del), _mm_cmpeq_epi8(x, lc2)),
                                             _mm_or_si128(_mm_cmpeq_epi8(x, ld8), _mm_cmpeq_epi8(x, le2))));
        unsigned m = (unsigned)_mm_movemask_epi8(bad);
        if (n - i < 16) m &= (1u << (n - i)) - 1;
        if (m) return mq_json_str(o, p, n, 0);
        _mm_storeu_si128((__m128i *)(d + i), x);
    }
    o[0] = '"';
    d[n] = '"';
    return d + n + 1;
#else
    return mq_json_str(o, p, n, 0);
#endif
}

static const unsigned char *FAR;     /* the run's buffer end less 16: text ending before it may be over-read */

static inline char *w_str(char *o, const unsigned char *p, Py_ssize_t n)
{
    if (p + n <= FAR) return w_str_scan(o, p, n);
    return mq_json_str(o, p, n, 0);
}

#define KEYBUF 32                    /* every ,"key": prefix is padded to this size (copied whole, then cut) */
static inline char *w_key(char *o, int k)
{
    memcpy(o, S.jkey[k], KEYBUF);                           /* fixed size: inlined; the room is reserved */
    return o + S.jkey_len[k];
}
static inline char *w_bytes(char *o, PyObject *x) { return w_raw(o, PyBytes_AS_STRING(x), PyBytes_GET_SIZE(x)); }

/* "a.b.c.d:port" as a JSON string (formats.common.format_host for IPv4); the last one of each kind (born,
 * store) is remembered by its 8 raw bytes. */
typedef struct { unsigned char raw[8]; char text[32]; Py_ssize_t len; } HostCache;
static HostCache HC[2];

static char *w_host(char *o, int which, const unsigned char *addr, const unsigned char *port_raw, long long port)
{
    HostCache *h = &HC[which];
    if (h->len == 0 || memcmp(h->raw, addr, 4) != 0 || memcmp(h->raw + 4, port_raw, 4) != 0) {
        char *t = h->text;                                  /* at most 1+15+1+11+1 = 29 bytes */
        *t++ = '"';
        for (int i = 0; i < 4; i++) {
            t = w_i64(t, addr[i]);
            *t++ = i < 3 ? '.' : ':';
        }
        t = w_i64(t, port);
        *t++ = '"';
        memcpy(h->raw, addr, 4);
        memcpy(h->raw + 4, port_raw, 4);
        h->len = t - h->text;
    }
    return w_raw(o, h->text, h->len);
}

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static char *w_base64(char *o, const unsigned char *p, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    *o++ = '"';
    for (; i + 3 <= n; i += 3) {
        uint32_t v = ((uint32_t)p[i] << 16) | ((uint32_t)p[i + 1] << 8) | p[i + 2];
        o[0] = B64[v >> 18]; o[1] = B64[(v >> 12) & 63]; o[2] = B64[(v >> 6) & 63]; o[3] = B64[v & 63];
        o += 4;
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)p[i] << 16;
        o[0] = B64[v >> 18]; o[1] = B64[(v >> 12) & 63]; o[2] = '='; o[3] = '=';
        o += 4;
    } else if (n - i == 2) {
        uint32_t v = ((uint32_t)p[i] << 16) | ((uint32_t)p[i + 1] << 8);
        o[0] = B64[v >> 18]; o[1] = B64[(v >> 12) & 63]; o[2] = B64[(v >> 6) & 63]; o[3] = '=';
        o += 4;
    }
    *o++ = '"';
    return o;
}

/* One unit's line (the walker framed it and computed its CRC); 1 written, 0 left to the other paths (nothing
 * written), -1 error. */
int rmq_json_unit(JB *b, const unsigned char *u, const Unit *x, long long base, PyObject *file_json, int body_mode,
                  const unsigned char *buf_end)
{
    FAR = buf_end - 16;
    const long long pos = x->pos;
    const unsigned char *body = u + RMQ.fixed_size, *props = u + x->pp;
    Py_ssize_t pl = (Py_ssize_t)x->total - x->pp, bl = (Py_ssize_t)x->body_len;
    /* properties: split as records.property_dict does; a repeated name or too many: the dict path */
    Pairs P;
    if (!rmq_pairs(props, pl, &P)) return 0;
    const int crc_ok = x->crc_ok;
    /* worst case: every text byte escaped to 6 bytes, the body as hex or base64, the fixed fields */
    if (jb_reserve(b, 6 * (Py_ssize_t)x->total + 2 * bl + 4096 + KEYBUF + 16 + PyBytes_GET_SIZE(file_json)) < 0)
        return -1;
    long long sys_flag = x->sys_flag;
    char *o = b->p + b->n;
    *o++ = '{';
    o = w_key(o, K_KIND); o = w_bytes(o, S.jkind);   /* the first key has no comma (see rmq_json_configure) */
    o = w_key(o, K_FILE); o = w_bytes(o, file_json);
    o = w_key(o, K_POSITION); o = w_i64(o, pos);
    o = w_key(o, K_OFFSET); o = w_i64(o, base + pos);
    o = w_key(o, K_SIZE); o = w_i64(o, x->total);
    o = w_key(o, K_MAGIC); o = w_bytes(o, x->v2 ? S.jv2 : S.jv1);
    o = w_key(o, K_BODY_CRC); o = w_i64(o, rmq_field(u, F_BODYCRC));
    o = w_key(o, K_CRC_OK); o = crc_ok ? w_raw(o, "true", 4) : w_raw(o, "false", 5);
    o = w_key(o, K_QUEUE_ID); o = w_i64(o, rmq_field(u, F_QUEUEID));
    o = w_key(o, K_FLAG); o = w_i64(o, rmq_field(u, F_FLAG));
    o = w_key(o, K_QUEUE_OFFSET); o = w_i64(o, rmq_field(u, F_QOFF));
    o = w_key(o, K_PHYSICAL_OFFSET); o = w_i64(o, rmq_field(u, F_PHYS));
    o = w_key(o, K_SYS_FLAG); o = w_i64(o, sys_flag);
    o = w_key(o, K_TRANSACTION); o = w_bytes(o, PyTuple_GET_ITEM(S.jtxn, sys_flag & S.txn_mask));
    o = w_key(o, K_BORN_TS); o = w_i64(o, rmq_field(u, F_BORNTS));
    o = w_key(o, K_BORN_HOST);
    o = w_host(o, 0, u + RMQ.off[F_BADDR], u + RMQ.off[F_BPORT], rmq_field(u, F_BPORT));
    o = w_key(o, K_STORE_TS); o = w_i64(o, rmq_field(u, F_STORETS));
    o = w_key(o, K_STORE_HOST);
    o = w_host(o, 1, u + RMQ.off[F_SADDR], u + RMQ.off[F_SPORT], rmq_field(u, F_SPORT));
    o = w_key(o, K_RECONSUME); o = w_i64(o, rmq_field(u, F_RECONSUME));
    o = w_key(o, K_PREPARED); o = w_i64(o, rmq_field(u, F_PREPARED));
    o = w_key(o, K_TOPIC); o = w_str(o, u + x->tp, x->tl);
    o = w_key(o, K_PROPERTIES); *o++ = '{';
    for (int i = 0; i < P.n; i++) {
        if (i) *o++ = ',';
        o = w_str(o, P.np[i], P.nn[i]); *o++ = ':'; o = w_str(o, P.vp[i], P.vn[i]);
    }
    *o++ = '}';
    /* keys: the KEYS value split at the separator, empty pieces dropped */
    o = w_key(o, K_KEYS); *o++ = '[';
    int k = find_pair(&P, S.keys_u8, S.keys_n), first = 1;
    if (k >= 0) {
        const unsigned char *v = P.vp[k];
        Py_ssize_t n = P.vn[k];
        for (Py_ssize_t i = 0; i <= n;) {
            const unsigned char *e = memchr(v + i, S.key_sep_c, (size_t)(n - i));
            Py_ssize_t len = e ? (Py_ssize_t)(e - (v + i)) : n - i;
            if (len > 0) {
                if (!first) *o++ = ',';
                o = w_str(o, v + i, len);
                first = 0;
            }
            i += len + 1;
        }
    }
    *o++ = ']';
    o = w_key(o, K_TAGS);
    if ((k = find_pair(&P, S.tags_u8, S.tags_n)) >= 0) o = w_str(o, P.vp[k], P.vn[k]); else o = w_raw(o, "null", 4);
    o = w_key(o, K_UNIQ_KEY);
    if ((k = find_pair(&P, S.uniq_u8, S.uniq_n)) >= 0) o = w_str(o, P.vp[k], P.vn[k]); else o = w_raw(o, "null", 4);
    /* msg_id: store address, store port and PHYSICALOFFSET as stored, upper-case hex */
    o = w_key(o, K_MSG_ID); *o++ = '"';
    const int parts[3] = {F_SADDR, F_SPORT, F_PHYS};
    for (int j = 0; j < 3; j++) {
        const unsigned char *f = u + RMQ.off[parts[j]];
        for (Py_ssize_t i = 0, n = RMQ.size[parts[j]]; i < n; i++) {
            o[0] = HEXU[f[i] >> 4];
            o[1] = HEXU[f[i] & 15];
            o += 2;
        }
    }
    *o++ = '"';
    o = w_key(o, K_BODY_SIZE); o = w_i64(o, x->body_len);
    o = w_key(o, K_COMPRESSION);
    if (sys_flag & S.compressed_flag)
        o = w_bytes(o, PyTuple_GET_ITEM(S.jcomp, (sys_flag & S.comp_mask) >> S.comp_shift));
    else
        o = w_raw(o, "null", 4);
    if (body_mode != 0) {
        o = w_key(o, K_BODY);
        if (body_mode == 1) o = w_str(o, body, bl);
        else if (body_mode == 2) {
            *o++ = '"';
            for (Py_ssize_t i = 0; i < bl; i++) { o[0] = HEXL[body[i] >> 4]; o[1] = HEXL[body[i] & 15]; o += 2; }
            *o++ = '"';
        } else o = w_base64(o, body, bl);
    }
    o = w_raw(o, "}\n", 2);
    b->n = o - b->p;
    return 1;
}

/* ---- configuration (called by configure() in rmqdump.c, after the row keys and name tables) ---------------- */

int rmq_json_configure(PyObject *const js[5])
{
    static const char *onames[] = {"kind_json", "v1_json", "v2_json", "txn_json", "comp_json"};
    PyObject **slots[] = {&S.jkind, &S.jv1, &S.jv2, &S.jtxn, &S.jcomp};
    for (int i = 0; i < 5; i++) {
        PyObject *o = js[i];
        int ok = i < 3 ? PyBytes_Check(o) : PyTuple_Check(o);
        for (Py_ssize_t j = 0; ok && i >= 3 && j < PyTuple_GET_SIZE(o); j++) ok = PyBytes_Check(PyTuple_GET_ITEM(o, j));
        if (!ok || (i == 3 && PyTuple_GET_SIZE(o) != PyTuple_GET_SIZE(S.txn_names))
            || (i == 4 && PyTuple_GET_SIZE(o) != PyTuple_GET_SIZE(S.comp_names))) {
            PyErr_Format(PyExc_ValueError, "%s: JSON bytes (a tuple of them, as long as the names) expected", onames[i]);
            return -1;
        }
        Py_INCREF(o);
        Py_XSETREF(*slots[i], o);
    }
    /* "key": for every row key (plain ASCII names: nothing to escape) */
    for (int k = 0; k < NKEYS; k++) {
        Py_ssize_t n;
        const char *s = PyUnicode_AsUTF8AndSize(S.keys[k], &n);
        if (s == NULL) return -1;
        for (Py_ssize_t i = 0; i < n; i++)
            if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x80 || s[i] == '"' || s[i] == '\\') {
                PyErr_Format(PyExc_ValueError, "row key %d needs escaping", k);
                return -1;
            }
        int comma = k != K_KIND;                            /* ,"key": -- every key after the first */
        if (n + 3 + comma > KEYBUF) {
            PyErr_Format(PyExc_ValueError, "row key %d is too long", k);
            return -1;
        }
        char *p = PyMem_Realloc(S.jkey[k], KEYBUF);
        if (p == NULL) { PyErr_NoMemory(); return -1; }
        memset(p, 0, KEYBUF);
        if (comma) p[0] = ',';
        p[comma] = '"';
        memcpy(p + comma + 1, s, (size_t)n);
        p[comma + n + 1] = '"';
        p[comma + n + 2] = ':';
        S.jkey[k] = p;
        S.jkey_len[k] = n + 3 + comma;
    }
    Py_ssize_t n;
    if ((S.keys_u8 = PyUnicode_AsUTF8AndSize(S.prop_keys, &S.keys_n)) == NULL
        || (S.tags_u8 = PyUnicode_AsUTF8AndSize(S.prop_tags, &S.tags_n)) == NULL
        || (S.uniq_u8 = PyUnicode_AsUTF8AndSize(S.prop_uniq, &S.uniq_n)) == NULL)
        return -1;
    const char *sep = PyUnicode_AsUTF8AndSize(S.key_sep, &n);
    if (sep == NULL) return -1;
    if (n != 1 || (unsigned char)sep[0] >= 0x80) {
        PyErr_SetString(PyExc_ValueError, "the key separator must be one ASCII character");
        return -1;
    }
    S.key_sep_c = (unsigned char)sep[0];
    return 0;
}
