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


static int jb_reserve(JB *b, Py_ssize_t need)
{
    if (need > PY_SSIZE_T_MAX / 2 - b->n) { PyErr_NoMemory(); return -1; }
    if (b->n + need <= b->cap) return 0;
    Py_ssize_t cap = b->cap * 2 > b->n + need ? b->cap * 2 : b->n + need + 65536;
    char *p = PyMem_Realloc(b->p, (size_t)cap);
    if (p == NULL) { PyErr_NoMemory(); return -1; }
    b->p = p;
    b->cap = cap;
    return 0;
}

/* The writers below never check room: the caller reserved the worst case of the whole unit. */
static inline void w_raw(JB *b, const void *p, Py_ssize_t n) { memcpy(b->p + b->n, p, (size_t)n); b->n += n; }
static inline void w_ch(JB *b, char c) { b->p[b->n++] = c; }

static void w_i64(JB *b, long long v)
{
    char d[24];
    int k = 0;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do { d[k++] = (char)('0' + u % 10); u /= 10; } while (u);
    if (v < 0) w_ch(b, '-');
    while (k) w_ch(b, d[--k]);
}


static const char HEXL[] = "0123456789abcdef", HEXU[] = "0123456789ABCDEF";

/* A JSON string of p[0:n] (valid UTF-8: rmq_dump_ok checked the text it comes from), escaped as orjson does. */
static inline void w_str(JB *b, const unsigned char *p, Py_ssize_t n)
{
    b->n = mq_json_str(b->p + b->n, p, n, 0) - b->p;
}

#define KEYBUF 48                    /* every ,"key": prefix is padded to this size (copied whole, then cut) */
static inline void w_key(JB *b, int k)
{
    memcpy(b->p + b->n, S.jkey[k], KEYBUF);                 /* fixed size: inlined; the room is reserved */
    b->n += S.jkey_len[k];
}
static inline void w_bytes(JB *b, PyObject *o) { w_raw(b, PyBytes_AS_STRING(o), PyBytes_GET_SIZE(o)); }

/* "a.b.c.d:port" as a JSON string (formats.common.format_host for IPv4); the last one of each kind (born,
 * store) is remembered by its 8 raw bytes. */
typedef struct { unsigned char raw[8]; char text[32]; Py_ssize_t len; } HostCache;
static HostCache HC[2];

static void w_host(JB *b, int which, const unsigned char *addr, const unsigned char *port_raw, long long port)
{
    HostCache *h = &HC[which];
    if (h->len == 0 || memcmp(h->raw, addr, 4) != 0 || memcmp(h->raw + 4, port_raw, 4) != 0) {
        JB t = {h->text, 0, sizeof h->text};                /* at most 1+15+1+11+1 = 29 bytes */
        w_ch(&t, '"');
        for (int i = 0; i < 4; i++) {
            w_i64(&t, addr[i]);
            w_ch(&t, i < 3 ? '.' : ':');
        }
        w_i64(&t, port);
        w_ch(&t, '"');
        memcpy(h->raw, addr, 4);
        memcpy(h->raw + 4, port_raw, 4);
        h->len = t.n;
    }
    w_raw(b, h->text, h->len);
}

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static void w_base64(JB *b, const unsigned char *p, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    w_ch(b, '"');
    for (; i + 3 <= n; i += 3) {
        uint32_t v = ((uint32_t)p[i] << 16) | ((uint32_t)p[i + 1] << 8) | p[i + 2];
        char q[4] = {B64[v >> 18], B64[(v >> 12) & 63], B64[(v >> 6) & 63], B64[v & 63]};
        w_raw(b, q, 4);
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)p[i] << 16;
        char q[4] = {B64[v >> 18], B64[(v >> 12) & 63], '=', '='};
        w_raw(b, q, 4);
    } else if (n - i == 2) {
        uint32_t v = ((uint32_t)p[i] << 16) | ((uint32_t)p[i + 1] << 8);
        char q[4] = {B64[v >> 18], B64[(v >> 12) & 63], B64[(v >> 6) & 63], '='};
        w_raw(b, q, 4);
    }
    w_ch(b, '"');
}

/* One unit's line (the walker framed it and computed its CRC); 1 written, 0 left to the other paths (nothing
 * written), -1 error. */
int rmq_json_unit(JB *b, const unsigned char *u, const Unit *x, long long base, PyObject *file_json, int body_mode)
{
    const long long pos = x->pos;
    const unsigned char *body = u + RMQ.fixed_size, *props = u + x->pp;
    Py_ssize_t pl = (Py_ssize_t)x->total - x->pp, bl = (Py_ssize_t)x->body_len;
    /* properties: split as records.property_dict does; a repeated name or too many: the dict path */
    Pairs P;
    if (!rmq_pairs(props, pl, &P)) return 0;
    const int crc_ok = x->crc_ok;
    /* worst case: every text byte escaped to 6 bytes, the body as hex or base64, the fixed fields */
    if (jb_reserve(b, 6 * (Py_ssize_t)x->total + 2 * bl + 4096 + KEYBUF + PyBytes_GET_SIZE(file_json)) < 0)
        return -1;
    long long sys_flag = x->sys_flag;
    w_ch(b, '{');
    w_key(b, K_KIND); w_bytes(b, S.jkind);   /* the first key has no comma (see rmq_json_configure) */
    w_key(b, K_FILE); w_bytes(b, file_json);
    w_key(b, K_POSITION); w_i64(b, pos);
    w_key(b, K_OFFSET); w_i64(b, base + pos);
    w_key(b, K_SIZE); w_i64(b, x->total);
    w_key(b, K_MAGIC); w_bytes(b, x->v2 ? S.jv2 : S.jv1);
    w_key(b, K_BODY_CRC); w_i64(b, rmq_field(u, F_BODYCRC));
    w_key(b, K_CRC_OK); if (crc_ok) w_raw(b, "true", 4); else w_raw(b, "false", 5);
    w_key(b, K_QUEUE_ID); w_i64(b, rmq_field(u, F_QUEUEID));
    w_key(b, K_FLAG); w_i64(b, rmq_field(u, F_FLAG));
    w_key(b, K_QUEUE_OFFSET); w_i64(b, rmq_field(u, F_QOFF));
    w_key(b, K_PHYSICAL_OFFSET); w_i64(b, rmq_field(u, F_PHYS));
    w_key(b, K_SYS_FLAG); w_i64(b, sys_flag);
    w_key(b, K_TRANSACTION); w_bytes(b, PyTuple_GET_ITEM(S.jtxn, sys_flag & S.txn_mask));
    w_key(b, K_BORN_TS); w_i64(b, rmq_field(u, F_BORNTS));
    w_key(b, K_BORN_HOST); w_host(b, 0, u + RMQ.off[F_BADDR], u + RMQ.off[F_BPORT], rmq_field(u, F_BPORT));
    w_key(b, K_STORE_TS); w_i64(b, rmq_field(u, F_STORETS));
    w_key(b, K_STORE_HOST); w_host(b, 1, u + RMQ.off[F_SADDR], u + RMQ.off[F_SPORT], rmq_field(u, F_SPORT));
    w_key(b, K_RECONSUME); w_i64(b, rmq_field(u, F_RECONSUME));
    w_key(b, K_PREPARED); w_i64(b, rmq_field(u, F_PREPARED));
    w_key(b, K_TOPIC); w_str(b, u + x->tp, x->tl);
    w_key(b, K_PROPERTIES); w_ch(b, '{');
    for (int i = 0; i < P.n; i++) {
        if (i) w_ch(b, ',');
        w_str(b, P.np[i], P.nn[i]); w_ch(b, ':'); w_str(b, P.vp[i], P.vn[i]);
    }
    w_ch(b, '}');
    /* keys: the KEYS value split at the separator, empty pieces dropped */
    w_key(b, K_KEYS); w_ch(b, '[');
    int k = find_pair(&P, S.keys_u8, S.keys_n), first = 1;
    if (k >= 0) {
        const unsigned char *v = P.vp[k];
        Py_ssize_t n = P.vn[k];
        for (Py_ssize_t i = 0; i <= n;) {
            const unsigned char *e = memchr(v + i, S.key_sep_c, (size_t)(n - i));
            Py_ssize_t len = e ? (Py_ssize_t)(e - (v + i)) : n - i;
            if (len > 0) {
                if (!first) w_ch(b, ',');
                w_str(b, v + i, len);
                first = 0;
            }
            i += len + 1;
        }
    }
    w_ch(b, ']');
    w_key(b, K_TAGS);
    if ((k = find_pair(&P, S.tags_u8, S.tags_n)) >= 0) w_str(b, P.vp[k], P.vn[k]); else w_raw(b, "null", 4);
    w_key(b, K_UNIQ_KEY);
    if ((k = find_pair(&P, S.uniq_u8, S.uniq_n)) >= 0) w_str(b, P.vp[k], P.vn[k]); else w_raw(b, "null", 4);
    /* msg_id: store address, store port and PHYSICALOFFSET as stored, upper-case hex */
    w_key(b, K_MSG_ID); w_ch(b, '"');
    const int parts[3] = {F_SADDR, F_SPORT, F_PHYS};
    for (int j = 0; j < 3; j++)
        for (Py_ssize_t i = 0; i < RMQ.size[parts[j]]; i++) {
            unsigned char c = u[RMQ.off[parts[j]] + i];
            w_ch(b, HEXU[c >> 4]);
            w_ch(b, HEXU[c & 15]);
        }
    w_ch(b, '"');
    w_key(b, K_BODY_SIZE); w_i64(b, x->body_len);
    w_key(b, K_COMPRESSION);
    if (sys_flag & S.compressed_flag)
        w_bytes(b, PyTuple_GET_ITEM(S.jcomp, (sys_flag & S.comp_mask) >> S.comp_shift));
    else
        w_raw(b, "null", 4);
    if (body_mode != 0) {
        w_key(b, K_BODY);
        if (body_mode == 1) w_str(b, body, bl);
        else if (body_mode == 2) {
            w_ch(b, '"');
            for (Py_ssize_t i = 0; i < bl; i++) { w_ch(b, HEXL[body[i] >> 4]); w_ch(b, HEXL[body[i] & 15]); }
            w_ch(b, '"');
        } else w_base64(b, body, bl);
    }
    w_raw(b, "}\n", 2);
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
