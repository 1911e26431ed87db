/* rmqrebuild: the common case of RocketMQ's dispatch loop (rebuild-index) in C.
 *
 * Python (mqtool/rocketmq/rebuild.py) owns every piece of state; this helper walks a run of commitlog units
 * from `pos` and, for each plain unit, does what rebuild_store's Python loop does:
 *   - reads the unit with the field offsets/sizes derived from formats/rocketmq.py at import time
 *     (configure(), called once; nothing about the layout is written here),
 *   - finds TAGS / KEYS / UNIQ_KEY in the properties exactly as dispatch.quick_props does,
 *   - appends a consumequeue unit (tagsCode = Java String.hashCode of TAGS) to the queue's bytearray and
 *     updates that queue's state (max physical offset, write position) in an int64 array Python owns,
 *   - puts the index keys (topic#UNIQ_KEY, topic#each KEYS token) into the current index file: the slot
 *     chain in the slot array, the entries appended to the file's bytearray, the header fields in an int64
 *     array (IndexFileBuilder.put_keys).
 * It stops ("declines") at the first unit it does not fully handle, and Python then handles that unit as
 * it always does: any doubt about the bytes (bad magic or lengths, IPv6 hosts), the schedule topic,
 * multi-dispatch properties, empty property values, a topic/tags/keys value that is not clean UTF-8 (Java
 * hashes the UTF-16 units of the decoded text; clean UTF-8, astral characters included, is hashed here),
 * a queue not registered yet or one whose next unit would not simply be appended (skip, gap, repeat,
 * file full), an index file that is new or full or would be filled by this message, more keys than fit
 * the local array. Every length is checked against the unit and the buffer before it is read.
 * No pointer into any buffer is kept past a call; the GIL is held (bytearrays are resized).
 */
#include "mqcore.h"             /* Python.h first; byte order, UTF-8 */
#include "rmqcore.h"

typedef struct { int off, size; } Field;

enum { H_TOTAL, H_MAGIC, H_QID, H_QOFF, H_PHYS, H_SYSFLAG, H_STORETS, H_BODYLEN, H_N };
enum { U_OFF, U_SIZE, U_TAGS, U_N };
enum { E_HASH, E_PHY, E_TD, E_PREV, E_N };
/* strings given to configure(), in this order */
enum { S_PROPSEP, S_NVSEP, S_KEYSEP, S_TAGS, S_KEYS, S_UNIQ, S_MULTI, S_SCHEDULE, S_JOIN, S_N };
#define MAXSTR 64
/* per-queue state (int64 each, QS_N per queue slot) and index state (int64 each) shared with Python */
enum { QS_MAXPHYS, QS_WRITE, QS_FILE_END, QS_UNITS, QS_N };
enum { IS_MODE, IS_COUNT, IS_NUM, IS_SLOTS, IS_HSC, IS_BEGIN_TS, IS_END_PHY, IS_END_TS, IS_N };
#define MAXKEYS 256

static struct {
    int ready;
    Field head[H_N], unit[U_N], entry[E_N];
    Py_ssize_t head_size, unit_size, entry_size;
    int64_t magic_v1, magic_v2, tl_v1, tl_v2, pl_size, min_size, v6_mask, tx_mask, tx_not, tx_commit, tx_rb;
    char s[S_N][MAXSTR];
    Py_ssize_t slen[S_N];
} cfg;

#define rd mq_rd_be          /* mqcore.h */
#define wr mq_wr_be

/* Java String.hashCode step over ASCII bytes (one UTF-16 unit per byte). */
static inline uint32_t jhash(uint32_t h, const uint8_t *p, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++)
        h = h * 31u + p[i];
    return h;
}

/* Java String.hashCode step over the UTF-16 code units of UTF-8 text, exactly what Python's decode gives.
 * Returns 0 (h untouched) for anything Python's strict decoder would not accept unchanged (bad lead byte,
 * missing continuation, overlong form, surrogate, above U+10FFFF): the caller declines the unit, and Python
 * hashes what its "replace" decode gives. Code points above U+FFFF are two units (a surrogate pair). */
static inline int utf16_hash(uint32_t *h, const uint8_t *p, Py_ssize_t n)
{
    uint32_t x = *h;
    Py_ssize_t i = 0;
    while (i < n) {
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

#define utf8_ok mq_utf8_ok

/* IndexFile#indexKeyHashMethod: abs(hashCode), Integer.MIN_VALUE -> 0 */
static inline int64_t key_hash(uint32_t h)
{
    int32_t s = (int32_t)h;
    if (s >= 0)
        return s;
    if (h == 0x80000000u)
        return 0;
    return -(int64_t)s;
}

/* ---- configure ------------------------------------------------------------------------------------ */

static int fields_from(PyObject *ints, Py_ssize_t at, Field *out, int n, Py_ssize_t whole)
{
    for (int i = 0; i < n; i++) {
        long off = PyLong_AsLong(PyTuple_GET_ITEM(ints, at + 2 * i));
        long size = PyLong_AsLong(PyTuple_GET_ITEM(ints, at + 2 * i + 1));
        if (PyErr_Occurred())
            return -1;
        if (!(size == 1 || size == 2 || size == 4 || size == 8) || off < 0 || off + size > whole) {
            PyErr_Format(PyExc_ValueError, "field %d: offset %ld size %ld does not fit %zd bytes", i, off, size,
                         whole);
            return -1;
        }
        out[i].off = (int)off;
        out[i].size = (int)size;
    }
    return 0;
}

#define N_INTS 44

static PyObject *configure(PyObject *self, PyObject *args)
{
    PyObject *ints, *strs;
    if (!PyArg_ParseTuple(args, "O!O!:configure", &PyTuple_Type, &ints, &PyTuple_Type, &strs))
        return NULL;
    if (PyTuple_GET_SIZE(ints) != N_INTS || PyTuple_GET_SIZE(strs) != S_N) {
        PyErr_SetString(PyExc_ValueError, "configure: wrong number of layout values");
        return NULL;
    }
    int64_t v[N_INTS];
    for (int i = 0; i < N_INTS; i++) {
        v[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(ints, i));
        if (v[i] == -1 && PyErr_Occurred())
            return NULL;
    }
    cfg.ready = 0;
    /* sizes first (fields are checked against them) */
    cfg.head_size = (Py_ssize_t)v[16];
    cfg.unit_size = (Py_ssize_t)v[23];
    cfg.entry_size = (Py_ssize_t)v[32];
    if (cfg.head_size <= 0 || cfg.head_size > 4096 || cfg.unit_size <= 0 || cfg.unit_size > 4096 ||
        cfg.entry_size <= 0 || cfg.entry_size > 4096) {
        PyErr_SetString(PyExc_ValueError, "configure: bad struct sizes");
        return NULL;
    }
    if (fields_from(ints, 0, cfg.head, H_N, cfg.head_size) < 0 ||
        fields_from(ints, 17, cfg.unit, U_N, cfg.unit_size) < 0 ||
        fields_from(ints, 24, cfg.entry, E_N, cfg.entry_size) < 0)
        return NULL;
    cfg.magic_v1 = v[33];
    cfg.magic_v2 = v[34];
    cfg.tl_v1 = v[35];
    cfg.tl_v2 = v[36];
    cfg.pl_size = v[37];
    cfg.min_size = v[38];
    cfg.v6_mask = v[39];
    cfg.tx_mask = v[40];
    cfg.tx_not = v[41];
    cfg.tx_commit = v[42];
    cfg.tx_rb = v[43];
    for (int i = 0; i < 3; i++) {
        int64_t s = (&cfg.tl_v1)[i];
        if (!(s == 1 || s == 2 || s == 4)) {
            PyErr_SetString(PyExc_ValueError, "configure: bad length-field size");
            return NULL;
        }
    }
    for (int i = 0; i < S_N; i++) {
        PyObject *b = PyTuple_GET_ITEM(strs, i);
        if (!PyBytes_Check(b) || PyBytes_GET_SIZE(b) >= MAXSTR || PyBytes_GET_SIZE(b) == 0) {
            PyErr_Format(PyExc_ValueError, "configure: string %d must be 1..%d bytes", i, MAXSTR - 1);
            return NULL;
        }
        cfg.slen[i] = PyBytes_GET_SIZE(b);
        memcpy(cfg.s[i], PyBytes_AS_STRING(b), (size_t)cfg.slen[i]);
    }
    if (cfg.slen[S_PROPSEP] != 1 || cfg.slen[S_NVSEP] != 1 || cfg.slen[S_KEYSEP] != 1) {
        PyErr_SetString(PyExc_ValueError, "configure: separators must be one byte");
        return NULL;
    }
    cfg.ready = 1;
    Py_RETURN_NONE;
}

/* ---- properties (dispatch.quick_props over bytes) ------------------------------------------------ */

typedef struct { const uint8_t *p; Py_ssize_t n; int found; } Value;

/* Does the pair starting at q (just after a separator, or at the start) begin with NAME + nv separator? */
static inline int pair_is(const uint8_t *q, const uint8_t *e, int which)
{
    Py_ssize_t n = cfg.slen[which];
    return e - q > n && q[0] == (uint8_t)cfg.s[which][0] && memcmp(q, cfg.s[which], (size_t)n) == 0 && q[n] == (uint8_t)cfg.s[S_NVSEP][0];
}

/* Fill tags/keys/uniq with the last occurrence of each (value up to the next separator). Returns 0 when
 * the message needs the full parse (multi-dispatch property, or an empty value), 1 otherwise. Works on
 * bytes: the markers are ASCII and a UTF-8 decode (even with replacement) keeps every ASCII byte as it is,
 * so the positions of the markers and separators are the ones the str search finds. */
static int quick_props(const uint8_t *p, Py_ssize_t n, Value *v)
{
    const uint8_t *e = p + n, *q = p;
    const uint8_t sep = (uint8_t)cfg.s[S_PROPSEP][0];
    static const int names[3] = {S_TAGS, S_KEYS, S_UNIQ};
    for (int i = 0; i < 3; i++)
        v[i].found = 0;
    for (;;) {                          /* q: start of a pair (after a separator, or the virtual one at 0) */
        if (pair_is(q, e, S_MULTI))
            return 0;
        for (int i = 0; i < 3; i++) {
            if (pair_is(q, e, names[i])) {
                const uint8_t *s = q + cfg.slen[names[i]] + 1;
                const uint8_t *t = memchr(s, sep, (size_t)(e - s));
                v[i].p = s;
                v[i].n = (t ? t : e) - s;
                v[i].found = 1;
                break;
            }
        }
        const uint8_t *t = memchr(q, sep, (size_t)(e - q));
        if (t == NULL)
            break;
        q = t + 1;
    }
    for (int i = 0; i < 3; i++)
        if (v[i].found && v[i].n == 0)
            return 0;                   /* empty value: an earlier pair may win (full parse) */
    return 1;
}

/* ---- queue lookup: keymap[topic bytes + queueId as 4 big-endian bytes] -> slot ------------------- */

#define QCACHE 64
#define QCACHE_TOPIC 56
typedef struct { int len; int32_t qid; Py_ssize_t slot; uint8_t t[QCACHE_TOPIC]; } QEntry;

/* The queue's slot, -1 when not registered (Python registers it), -2 with an exception set. */
static Py_ssize_t queue_slot(PyObject *keymap, QEntry *cache, const uint8_t *topic, Py_ssize_t tl, int32_t qid)
{
    uint32_t h = jhash((uint32_t)qid, topic, tl);
    QEntry *c = &cache[(h ^ (h >> 7)) & (QCACHE - 1)];
    if (c->len == tl && c->qid == qid && memcmp(c->t, topic, (size_t)tl) == 0)
        return c->slot;
    PyObject *key = PyBytes_FromStringAndSize(NULL, tl + 4);
    if (key == NULL)
        return -2;
    uint8_t *k = (uint8_t *)PyBytes_AS_STRING(key);
    memcpy(k, topic, (size_t)tl);
    wr(k + tl, 4, qid);
    PyObject *val = PyDict_GetItemWithError(keymap, key);      /* borrowed */
    Py_DECREF(key);
    if (val == NULL)
        return PyErr_Occurred() ? -2 : -1;
    Py_ssize_t slot = PyLong_AsSsize_t(val);
    if (slot == -1 && PyErr_Occurred())
        return -2;
    if (slot < 0)
        return -1;
    if (tl <= QCACHE_TOPIC) {
        c->len = (int)tl;
        c->qid = qid;
        c->slot = slot;
        memcpy(c->t, topic, (size_t)tl);
    }
    return slot;
}

/* Append n bytes to a bytearray; pointer to the new bytes, NULL with an exception set. */
static uint8_t *grow(PyObject *ba, Py_ssize_t n)
{
    Py_ssize_t old = PyByteArray_GET_SIZE(ba);
    if (PyByteArray_Resize(ba, old + n) < 0)
        return NULL;
    return (uint8_t *)PyByteArray_AS_STRING(ba) + old;
}

/* ---- run ------------------------------------------------------------------------------------------ */

static PyObject *run(PyObject *self, PyObject *args)
{
    PyObject *bufobj, *keymap, *bufs, *qstobj, *istobj, *slotsobj, *entries, *ts;
    Py_ssize_t pos, limit, end;
    long long max_size;
    if (!PyArg_ParseTuple(args, "OnnnLO!O!OOOOO:run", &bufobj, &pos, &limit, &end, &max_size, &PyDict_Type,
                          &keymap, &PyList_Type, &bufs, &qstobj, &istobj, &slotsobj, &entries, &ts))
        return NULL;
    if (!cfg.ready) {
        PyErr_SetString(PyExc_RuntimeError, "rmqrebuild.configure() was not called");
        return NULL;
    }
    const int with_index = istobj != Py_None;
    if (with_index && (!PyByteArray_CheckExact(entries) || (ts != Py_None && !PyByteArray_CheckExact(ts)))) {
        PyErr_SetString(PyExc_TypeError, "run: entries and ts must be bytearrays");
        return NULL;
    }
    Py_buffer b = {0}, qsb = {0}, isb = {0}, slb = {0};
    PyObject *result = NULL;
    int64_t is[IS_N] = {0};
    int is_loaded = 0;
    if (PyObject_GetBuffer(bufobj, &b, PyBUF_SIMPLE) < 0)
        return NULL;
    if (PyObject_GetBuffer(qstobj, &qsb, PyBUF_WRITABLE) < 0)
        goto done;
    if (with_index && (PyObject_GetBuffer(istobj, &isb, PyBUF_WRITABLE) < 0 ||
                       PyObject_GetBuffer(slotsobj, &slb, PyBUF_WRITABLE) < 0))
        goto done;
    if (limit > end)
        limit = end;
    if (end > b.len || pos < 0 || end < 0)
        limit = pos;                                    /* nonsense bounds: consume nothing */
    int64_t *qs_all = (int64_t *)qsb.buf;
    Py_ssize_t nslots = qsb.len / (Py_ssize_t)(sizeof(int64_t) * QS_N);
    if (nslots > PyList_GET_SIZE(bufs))
        nslots = PyList_GET_SIZE(bufs);
    int32_t *slots = NULL;
    if (with_index) {
        if (isb.len < (Py_ssize_t)sizeof(is)) {
            PyErr_SetString(PyExc_ValueError, "run: index state too short");
            goto done;
        }
        memcpy(is, isb.buf, sizeof(is));
        is_loaded = 1;
        slots = (int32_t *)slb.buf;
        /* usable only when the file exists, has its first entry, and its numbers fit an int32 slot table */
        if (is[IS_SLOTS] <= 0 || is[IS_SLOTS] > INT32_MAX || is[IS_SLOTS] * 4 != slb.len || is[IS_NUM] > INT32_MAX ||
            is[IS_COUNT] < 2)
            is[IS_MODE] = 0;
    }
    const uint8_t *buf = (const uint8_t *)b.buf;
    const Field *H = cfg.head;
    QEntry cache[QCACHE];
    for (int i = 0; i < QCACHE; i++)
        cache[i].len = -1;
    Py_ssize_t messages = 0, ncq = 0, added = 0;
    int64_t last_ts = 0, last_cq_ts = 0, max_end = 0;
    Value v[3];
    int64_t hashes[MAXKEYS];

    while (pos < limit && end - pos >= cfg.head_size) {
        const uint8_t *u = buf + pos;
        int64_t total = rd(u + H[H_TOTAL].off, H[H_TOTAL].size);
        int64_t magic = rd(u + H[H_MAGIC].off, H[H_MAGIC].size);
        if ((magic != cfg.magic_v1 && magic != cfg.magic_v2) || total < cfg.min_size || total > max_size ||
            total > end - pos || total < cfg.head_size)
            break;
        int64_t sysflag = rd(u + H[H_SYSFLAG].off, H[H_SYSFLAG].size);
        int64_t body_len = rd(u + H[H_BODYLEN].off, H[H_BODYLEN].size);
        if ((sysflag & cfg.v6_mask) || body_len < 0 || body_len > total)
            break;
        /* offsets below are relative to the unit; every read is checked against total first */
        int64_t p = cfg.head_size + body_len;
        int tls = (int)(magic == cfg.magic_v1 ? cfg.tl_v1 : cfg.tl_v2);
        if (p + tls > total)
            break;
        int64_t tl = rd(u + p, tls);
        p += tls;
        if (tl < 0 || p + tl + cfg.pl_size > total)
            break;
        const uint8_t *topic = u + p;
        p += tl;
        int64_t pl = rd(u + p, (int)cfg.pl_size);
        p += cfg.pl_size;
        if (pl < 0 || p + pl != total)              /* TOTALSIZE must equal the length from the fields */
            break;
        const uint8_t *props = u + p;
        if (tl == cfg.slen[S_SCHEDULE] && memcmp(topic, cfg.s[S_SCHEDULE], (size_t)tl) == 0)
            break;
        if (!quick_props(props, pl, v))
            break;
        if ((v[0].found && !utf8_ok(v[0].p, v[0].n)) || (v[1].found && !utf8_ok(v[1].p, v[1].n)) ||
            (v[2].found && !utf8_ok(v[2].p, v[2].n)))
            break;
        int64_t qid = rd(u + H[H_QID].off, H[H_QID].size);
        int64_t qoff = rd(u + H[H_QOFF].off, H[H_QOFF].size);
        int64_t phys = rd(u + H[H_PHYS].off, H[H_PHYS].size);
        int64_t store_ts = rd(u + H[H_STORETS].off, H[H_STORETS].size);
        if (phys < 0 || phys > INT64_MAX - total || qid < INT32_MIN || qid > INT32_MAX)
            break;
        int64_t tt = sysflag & cfg.tx_mask;

        /* consumequeue: decide (no side effect yet) */
        int cq = tt == cfg.tx_not || tt == cfg.tx_commit;
        int64_t *qs = NULL;
        PyObject *qbuf = NULL;
        int64_t code = 0;
        if (cq) {
            Py_ssize_t slot = queue_slot(keymap, cache, topic, (Py_ssize_t)tl, (int32_t)qid);
            if (slot == -2)
                goto done;
            if (slot < 0 || slot >= nslots)
                break;
            qs = qs_all + slot * QS_N;
            qbuf = PyList_GET_ITEM(bufs, slot);
            if (!PyByteArray_CheckExact(qbuf) || phys + total <= qs[QS_MAXPHYS] || qs[QS_WRITE] < 0 ||
                qs[QS_WRITE] >= qs[QS_FILE_END] || (qoff != 0 && qoff != qs[QS_WRITE]))
                break;              /* skip / first unit / file full / gap / repeat: Python's QueueBuilder */
            if (v[0].found) {
                uint32_t th = 0;
                utf16_hash(&th, v[0].p, v[0].n);            /* validated above */
                code = (int32_t)th;
            }
        }

        /* index: decide and hash */
        Py_ssize_t nkeys = 0;
        if (with_index) {
            if (!is[IS_MODE] || is[IS_COUNT] >= is[IS_NUM])
                break;              /* no file yet, a fresh one, or a full one to roll: Python */
            if (!(phys < is[IS_END_PHY] || tt == cfg.tx_rb)) {
                uint32_t hp = 0, h;
                if (!utf16_hash(&hp, topic, tl) || !utf16_hash(&hp, (const uint8_t *)cfg.s[S_JOIN], cfg.slen[S_JOIN]))
                    break;          /* the topic is not clean UTF-8: Python hashes its decoded form */
                if (v[2].found) {
                    h = hp;
                    utf16_hash(&h, v[2].p, v[2].n);
                    hashes[nkeys++] = key_hash(h);
                }
                if (v[1].found) {
                    const uint8_t *k = v[1].p, *ke = v[1].p + v[1].n;
                    const uint8_t ks = (uint8_t)cfg.s[S_KEYSEP][0];
                    while (k < ke && nkeys < MAXKEYS) {
                        const uint8_t *t = memchr(k, ks, (size_t)(ke - k));
                        const uint8_t *te = t ? t : ke;
                        if (te > k) {           /* a token of valid UTF-8 split at an ASCII byte is valid */
                            h = hp;
                            utf16_hash(&h, k, te - k);
                            hashes[nkeys++] = key_hash(h);
                        }
                        k = t ? t + 1 : ke;
                    }
                    if (k < ke)
                        break;      /* more keys than the local array holds */
                }
                if (nkeys > is[IS_NUM] - is[IS_COUNT])
                    break;          /* this message fills the file: Python rolls it */
                for (Py_ssize_t i = 0; i < nkeys; i++)      /* the slot table is large: start the loads */
                    __builtin_prefetch(&slots[hashes[i] % is[IS_SLOTS]], 1);
            }
        }

        /* commit */
        if (cq) {
            uint8_t *w = grow(qbuf, cfg.unit_size);
            if (w == NULL)
                goto done;
            memset(w, 0, (size_t)cfg.unit_size);
            wr(w + cfg.unit[U_OFF].off, cfg.unit[U_OFF].size, phys);
            wr(w + cfg.unit[U_SIZE].off, cfg.unit[U_SIZE].size, total);
            wr(w + cfg.unit[U_TAGS].off, cfg.unit[U_TAGS].size, code);
            qs[QS_MAXPHYS] = phys + total;
            qs[QS_WRITE] += 1;
            qs[QS_UNITS] += 1;
            ncq++;
            last_cq_ts = store_ts;
        }
        if (nkeys > 0) {
            int64_t count = is[IS_COUNT], begin = is[IS_BEGIN_TS], td = 0, new_slots = 0;
            if (begin > 0 && store_ts > begin) {
                td = (store_ts - begin) / 1000;      /* begin > 0 and store_ts > begin: no overflow */
                if (td > INT32_MAX)
                    td = INT32_MAX;
            }
            uint8_t *w = grow(entries, cfg.entry_size * nkeys);
            if (w == NULL)
                goto done;
            memset(w, 0, (size_t)(cfg.entry_size * nkeys));
            for (Py_ssize_t i = 0; i < nkeys; i++, w += cfg.entry_size) {
                int64_t slot = hashes[i] % is[IS_SLOTS];
                int64_t sv = slots[slot];
                if (sv <= 0 || sv > count) {
                    sv = 0;
                    new_slots++;
                }
                wr(w + cfg.entry[E_HASH].off, cfg.entry[E_HASH].size, hashes[i]);
                wr(w + cfg.entry[E_PHY].off, cfg.entry[E_PHY].size, phys);
                wr(w + cfg.entry[E_TD].off, cfg.entry[E_TD].size, td);
                wr(w + cfg.entry[E_PREV].off, cfg.entry[E_PREV].size, sv);
                slots[slot] = (int32_t)count;
                count++;
            }
            if (ts != Py_None) {            /* store time per entry (compare mode), native int64 */
                uint8_t *tw = grow(ts, (Py_ssize_t)sizeof(int64_t) * nkeys);
                if (tw == NULL)
                    goto done;
                for (Py_ssize_t i = 0; i < nkeys; i++)
                    memcpy(tw + i * sizeof(int64_t), &store_ts, sizeof(int64_t));
            }
            is[IS_HSC] += new_slots;
            is[IS_COUNT] = count;
            is[IS_END_PHY] = phys;
            is[IS_END_TS] = store_ts;
            added += nkeys;
        }
        messages++;
        last_ts = store_ts;
        if (phys + total > max_end)
            max_end = phys + total;
        pos += (Py_ssize_t)total;
    }
    if (with_index)
        memcpy(isb.buf, is, sizeof(is));
    result = Py_BuildValue("(nnnLLLn)", pos, messages, ncq, (long long)last_ts, (long long)last_cq_ts,
                           (long long)max_end, added);
done:
    /* on an error after some units were committed the state arrays hold them; the caller raises anyway */
    if (is_loaded && result == NULL)
        memcpy(isb.buf, is, sizeof(is));
    PyBuffer_Release(&b);
    if (qsb.obj != NULL)
        PyBuffer_Release(&qsb);
    if (isb.obj != NULL)
        PyBuffer_Release(&isb);
    if (slb.obj != NULL)
        PyBuffer_Release(&slb);
    return result;
}

/* Java String.hashCode of the text UTF-8 bytes decode to, as a signed int32; None when the helper would
 * decline them (test hook for the hash above). */
static PyObject *java_hash_utf8(PyObject *self, PyObject *arg)
{
    Py_buffer b;
    if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0)
        return NULL;
    uint32_t h = 0;
    int ok = utf16_hash(&h, (const uint8_t *)b.buf, b.len);
    PyBuffer_Release(&b);
    if (!ok)
        Py_RETURN_NONE;
    return PyLong_FromLong((int32_t)h);
}

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS, "configure(ints, strs): layout and constants from the schema."},
    {"run", run, METH_VARARGS,
     "run(buf, pos, limit, end, max_size, keymap, bufs, qstate, istate, slots, entries, ts) -> "
     "(pos, messages, cq_units, last_ts, last_cq_ts, max_end, index_entries)"},
    {"java_hash_utf8", java_hash_utf8, METH_O, "Java String.hashCode of decoded UTF-8 (int32), None if invalid."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "rmqrebuild", "RocketMQ rebuild-index dispatch loop",
                                    -1, methods};

PyObject *rmq_rebuild_module(void)   /* one part of the rmqcore module (rmqcore.c) */ { return PyModule_Create(&module); }
