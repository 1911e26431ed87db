/* rmqrebuild: the common case of RocketMQ's dispatch loop (rebuild-index) in C.
 *
 * Python (mqtool/rocketmq/rebuild.py) owns every piece of state; this helper walks a run of commitlog units
 * from `pos` and, for each plain unit, does what rebuild_store's Python loop does:
 *   - is the rebuild hook of the core's one unit walker (rmq_walk, rmqcore.c), which frames each unit with the
 *     layout rmqcore.configure() got from formats/rocketmq.py (nothing about a layout is written here: the
 *     consumequeue unit and index entry layouts come by field name through this part's configure()),
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
#include "rmqunit.h"            /* Python.h first; the core: layout, walker, body CRC */
#include "rmqcore.h"

typedef struct { int off, size; } Field;

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
    Field unit[U_N], entry[E_N];
    Py_ssize_t unit_size, entry_size;
    int64_t tx_mask, tx_not, tx_commit, tx_rb;
    char s[S_N][MAXSTR];
    Py_ssize_t slen[S_N];
} cfg;

#define wr mq_wr_be          /* mqcore.h */

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

/* The (offset, size) of each of names[0:n] in the dict `fields` (a struct of `whole` bytes) into out. */
static int fields_from(PyObject *fields, const char *const *names, Field *out, int n, Py_ssize_t whole)
{
    for (int i = 0; i < n; i++) {
        PyObject *pair = PyDict_GetItemString(fields, names[i]);
        long off, size;
        if (pair == NULL) {
            PyErr_Format(PyExc_ValueError, "configure: no field %s", names[i]);
            return -1;
        }
        if (!PyArg_ParseTuple(pair, "ll", &off, &size))
            return -1;
        if (!(size == 1 || size == 2 || size == 4 || size == 8) || off < 0 || off + size > whole) {
            PyErr_Format(PyExc_ValueError, "field %s: offset %ld size %ld does not fit %zd bytes", names[i], off,
                         size, whole);
            return -1;
        }
        out[i].off = (int)off;
        out[i].size = (int)size;
    }
    return 0;
}

PyDoc_STRVAR(configure_doc,
"configure(*, cq_unit, cq_unit_size, index_entry, index_entry_size, tx_mask, tx_not, tx_commit, tx_rollback,\n"
"          prop_sep, nv_sep, key_sep, tags, keys, uniq, multi_dispatch, schedule_topic, key_join)\n\n"
"The rebuild's own options by name (the message layout is rmqcore.configure()'s): the consumequeue unit\n"
"{offset, size, tagsCode: (offset, size)} and index entry {keyHash, phyOffset, timeDiff, prevIndex: ...} layouts\n"
"and sizes, the transaction type mask and values, and the separators and names of formats/rocketmq.py (bytes).");

static PyObject *configure(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"cq_unit", "cq_unit_size", "index_entry", "index_entry_size", "tx_mask", "tx_not",
                             "tx_commit", "tx_rollback", "prop_sep", "nv_sep", "key_sep", "tags", "keys", "uniq",
                             "multi_dispatch", "schedule_topic", "key_join", NULL};
    static const char *const unit_names[U_N] = {"offset", "size", "tagsCode"};
    static const char *const entry_names[E_N] = {"keyHash", "phyOffset", "timeDiff", "prevIndex"};
    PyObject *unit, *entry, *str[S_N];
    Py_ssize_t unit_size, entry_size;
    long long tx[4];
    if (!PyArg_ParseTupleAndKeywords(args, kw, "$O!nO!nLLLLSSSSSSSSS:configure", kwlist, &PyDict_Type, &unit,
                                     &unit_size, &PyDict_Type, &entry, &entry_size, &tx[0], &tx[1], &tx[2], &tx[3],
                                     &str[0], &str[1], &str[2], &str[3], &str[4], &str[5], &str[6], &str[7],
                                     &str[8]))
        return NULL;
    cfg.ready = 0;
    if (unit_size <= 0 || unit_size > 4096 || entry_size <= 0 || entry_size > 4096) {
        PyErr_SetString(PyExc_ValueError, "configure: bad struct sizes");
        return NULL;
    }
    cfg.unit_size = unit_size;
    cfg.entry_size = entry_size;
    if (fields_from(unit, unit_names, cfg.unit, U_N, unit_size) < 0 ||
        fields_from(entry, entry_names, cfg.entry, E_N, entry_size) < 0)
        return NULL;
    cfg.tx_mask = tx[0];
    cfg.tx_not = tx[1];
    cfg.tx_commit = tx[2];
    cfg.tx_rb = tx[3];
    for (int i = 0; i < S_N; i++) {
        PyObject *b = str[i];
        if (PyBytes_GET_SIZE(b) >= MAXSTR || PyBytes_GET_SIZE(b) == 0) {
            PyErr_Format(PyExc_ValueError, "configure: %s must be 1..%d bytes", kwlist[8 + i], MAXSTR - 1);
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

/* ---- run: the rebuild hook of rmq_walk() --------------------------------------------------------- */

typedef struct {
    PyObject *keymap, *bufs, *entries, *ts;
    int64_t *qs_all;
    Py_ssize_t nslots;
    int with_index;
    int32_t *slots;
    int64_t is[IS_N];
    QEntry cache[QCACHE];
    Py_ssize_t ncq, added;
    int64_t last_ts, last_cq_ts, max_end;
    int64_t hashes[MAXKEYS];
} RebuildRun;

/* One framed unit through the dispatch: its consumequeue unit and index keys, or 0 (Python dispatches it). */
static int rebuild_unit(RmqWalk *w, const unsigned char *u, RmqUnit *x)
{
    RebuildRun *r = w->verb;
    int64_t *is = r->is;
    const int64_t total = x->total, tl = x->tl, sysflag = x->sys_flag;
    const uint8_t *topic = u + x->tp, *props = u + x->pp;
    const int64_t pl = total - x->pp;
    Value v[3];
    if (tl == cfg.slen[S_SCHEDULE] && memcmp(topic, cfg.s[S_SCHEDULE], (size_t)tl) == 0)
        return 0;
    if (!quick_props(props, pl, v))
        return 0;
    if ((v[0].found && !mq_utf8_ok(v[0].p, v[0].n)) || (v[1].found && !mq_utf8_ok(v[1].p, v[1].n)) ||
        (v[2].found && !mq_utf8_ok(v[2].p, v[2].n)))
        return 0;
    int64_t qid = rmq_field(u, F_QUEUEID), qoff = rmq_field(u, F_QOFF);
    int64_t phys = rmq_field(u, F_PHYS), store_ts = rmq_field(u, F_STORETS);
    if (phys < 0 || phys > INT64_MAX - total || qid < INT32_MIN || qid > INT32_MAX)
        return 0;
    int64_t tt = sysflag & cfg.tx_mask;

    /* consumequeue: decide (no side effect yet) */
    int cq = tt == cfg.tx_not || tt == cfg.tx_commit;
    int64_t *qs = NULL;
    PyObject *qbuf = NULL;
    int64_t code = 0;
    if (cq) {
        Py_ssize_t slot = queue_slot(r->keymap, r->cache, topic, (Py_ssize_t)tl, (int32_t)qid);
        if (slot == -2)
            return -1;
        if (slot < 0 || slot >= r->nslots)
            return 0;
        qs = r->qs_all + slot * QS_N;
        qbuf = PyList_GET_ITEM(r->bufs, slot);
        if (!PyByteArray_CheckExact(qbuf) || phys + total <= qs[QS_MAXPHYS] || qs[QS_WRITE] < 0 ||
            qs[QS_WRITE] >= qs[QS_FILE_END] || (qoff != 0 && qoff != qs[QS_WRITE]))
            return 0;               /* skip / first unit / file full / gap / repeat: Python's QueueBuilder */
        if (v[0].found) {
            uint32_t th = 0;
            utf16_hash(&th, v[0].p, v[0].n);            /* validated above */
            code = (int32_t)th;
        }
    }

    /* index: decide and hash */
    Py_ssize_t nkeys = 0;
    int64_t *hashes = r->hashes;
    if (r->with_index) {
        if (!is[IS_MODE] || is[IS_COUNT] >= is[IS_NUM])
            return 0;               /* no file yet, a fresh one, or a full one to roll: Python */
        if (!(phys < is[IS_END_PHY] || tt == cfg.tx_rb)) {
            uint32_t hp = 0, h;
            if (!utf16_hash(&hp, topic, tl) || !utf16_hash(&hp, (const uint8_t *)cfg.s[S_JOIN], cfg.slen[S_JOIN]))
                return 0;           /* the topic is not clean UTF-8: Python hashes its decoded form */
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
                    return 0;       /* more keys than the local array holds */
            }
            if (nkeys > is[IS_NUM] - is[IS_COUNT])
                return 0;           /* this message fills the file: Python rolls it */
            for (Py_ssize_t i = 0; i < nkeys; i++)      /* the slot table is large: start the loads */
                __builtin_prefetch(&r->slots[hashes[i] % is[IS_SLOTS]], 1);
        }
    }

    /* commit */
    if (cq) {
        uint8_t *o = grow(qbuf, cfg.unit_size);
        if (o == NULL)
            return -1;
        memset(o, 0, (size_t)cfg.unit_size);
        wr(o + cfg.unit[U_OFF].off, cfg.unit[U_OFF].size, phys);
        wr(o + cfg.unit[U_SIZE].off, cfg.unit[U_SIZE].size, total);
        wr(o + cfg.unit[U_TAGS].off, cfg.unit[U_TAGS].size, code);
        qs[QS_MAXPHYS] = phys + total;
        qs[QS_WRITE] += 1;
        qs[QS_UNITS] += 1;
        r->ncq++;
        r->last_cq_ts = store_ts;
    }
    if (nkeys > 0) {
        int64_t count = is[IS_COUNT], begin = is[IS_BEGIN_TS], td = 0, new_slots = 0;
        if (begin > 0 && store_ts > begin) {
            td = (store_ts - begin) / 1000;      /* begin > 0 and store_ts > begin: no overflow */
            if (td > INT32_MAX)
                td = INT32_MAX;
        }
        uint8_t *o = grow(r->entries, cfg.entry_size * nkeys);
        if (o == NULL)
            return -1;
        memset(o, 0, (size_t)(cfg.entry_size * nkeys));
        for (Py_ssize_t i = 0; i < nkeys; i++, o += cfg.entry_size) {
            int64_t slot = hashes[i] % is[IS_SLOTS];
            int64_t sv = r->slots[slot];
            if (sv <= 0 || sv > count) {
                sv = 0;
                new_slots++;
            }
            wr(o + cfg.entry[E_HASH].off, cfg.entry[E_HASH].size, hashes[i]);
            wr(o + cfg.entry[E_PHY].off, cfg.entry[E_PHY].size, phys);
            wr(o + cfg.entry[E_TD].off, cfg.entry[E_TD].size, td);
            wr(o + cfg.entry[E_PREV].off, cfg.entry[E_PREV].size, sv);
            r->slots[slot] = (int32_t)count;
            count++;
        }
        if (r->ts != Py_None) {            /* store time per entry (compare mode), native int64 */
            uint8_t *tw = grow(r->ts, (Py_ssize_t)sizeof(int64_t) * nkeys);
            if (tw == NULL)
                return -1;
            for (Py_ssize_t i = 0; i < nkeys; i++)
                memcpy(tw + i * sizeof(int64_t), &store_ts, sizeof(int64_t));
        }
        is[IS_HSC] += new_slots;
        is[IS_COUNT] = count;
        is[IS_END_PHY] = phys;
        is[IS_END_TS] = store_ts;
        r->added += nkeys;
    }
    r->last_ts = store_ts;
    if (phys + total > r->max_end)
        r->max_end = phys + total;
    return 1;
}

static PyObject *run(PyObject *self, PyObject *args)
{
    PyObject *bufobj, *keymap, *bufs, *qstobj, *istobj, *slotsobj, *entries, *ts;
    Py_ssize_t pos, limit, end;
    long long max_size;
    if (!PyArg_ParseTuple(args, "OnnnLO!O!OOOOO:run", &bufobj, &pos, &limit, &end, &max_size, &PyDict_Type,
                          &keymap, &PyList_Type, &bufs, &qstobj, &istobj, &slotsobj, &entries, &ts))
        return NULL;
    if (rmq_ready("rebuild") < 0)
        return NULL;
    if (!cfg.ready) {
        PyErr_SetString(PyExc_RuntimeError, "rmqcore.rebuild.configure() was not called");
        return NULL;
    }
    const int with_index = istobj != Py_None;
    if (with_index && (!PyByteArray_CheckExact(entries) || (ts != Py_None && !PyByteArray_CheckExact(ts)))) {
        PyErr_SetString(PyExc_TypeError, "run: entries and ts must be bytearrays");
        return NULL;
    }
    Py_buffer b = {0}, qsb = {0}, isb = {0}, slb = {0};
    PyObject *result = NULL;
    RebuildRun *r = PyMem_Calloc(1, sizeof *r);
    if (r == NULL)
        return PyErr_NoMemory();
    int is_loaded = 0;
    if (PyObject_GetBuffer(bufobj, &b, PyBUF_SIMPLE) < 0)
        goto done;
    if (PyObject_GetBuffer(qstobj, &qsb, PyBUF_WRITABLE) < 0)
        goto done;
    if (with_index && (PyObject_GetBuffer(istobj, &isb, PyBUF_WRITABLE) < 0 ||
                       PyObject_GetBuffer(slotsobj, &slb, PyBUF_WRITABLE) < 0))
        goto done;
    if (limit > end)
        limit = end;
    if (end > b.len || pos < 0 || end < 0)
        limit = pos;                                    /* nonsense bounds: consume nothing */
    r->keymap = keymap;
    r->bufs = bufs;
    r->entries = entries;
    r->ts = ts;
    r->with_index = with_index;
    r->qs_all = (int64_t *)qsb.buf;
    r->nslots = qsb.len / (Py_ssize_t)(sizeof(int64_t) * QS_N);
    if (r->nslots > PyList_GET_SIZE(bufs))
        r->nslots = PyList_GET_SIZE(bufs);
    if (with_index) {
        if (isb.len < (Py_ssize_t)sizeof(r->is)) {
            PyErr_SetString(PyExc_ValueError, "run: index state too short");
            goto done;
        }
        memcpy(r->is, isb.buf, sizeof(r->is));
        is_loaded = 1;
        r->slots = (int32_t *)slb.buf;
        int64_t *is = r->is;
        /* usable only when the file exists, has its first entry, and its numbers fit an int32 slot table */
        if (is[IS_SLOTS] <= 0 || is[IS_SLOTS] > INT32_MAX || is[IS_SLOTS] * 4 != slb.len || is[IS_NUM] > INT32_MAX ||
            is[IS_COUNT] < 2)
            is[IS_MODE] = 0;
    }
    for (int i = 0; i < QCACHE; i++)
        r->cache[i].len = -1;
    RmqWalk w = {.buf = b.buf, .len = b.len, .pos = pos, .limit = limit, .end = end, .max_size = max_size,
                 .cap = PY_SSIZE_T_MAX, .magics = RMQ_V1 | RMQ_V2, .crc = RMQ_CRC_OFF, .hook = rebuild_unit,
                 .verb = r};
    if (rmq_walk(&w) < 0)
        goto done;
    if (with_index)
        memcpy(isb.buf, r->is, sizeof(r->is));
    result = Py_BuildValue("(nnnLLLn)", w.pos, w.count, r->ncq, (long long)r->last_ts, (long long)r->last_cq_ts,
                           (long long)r->max_end, r->added);
done:
    /* on an error after some units were committed the state arrays hold them; the caller raises anyway */
    if (is_loaded && result == NULL)
        memcpy(isb.buf, r->is, sizeof(r->is));
    PyMem_Free(r);
    if (b.obj != NULL)
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
    {"configure", (PyCFunction)(void (*)(void))configure, METH_VARARGS | METH_KEYWORDS, configure_doc},
    {"run", run, METH_VARARGS,
     "run(buf, pos, limit, end, max_size, keymap, bufs, qstate, istate, slots, entries, ts) -> "
     "(pos, messages, cq_units, last_ts, last_cq_ts, max_end, index_entries)"},
    {"java_hash_utf8", java_hash_utf8, METH_O, "Java String.hashCode of decoded UTF-8 (int32), None if invalid."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "rmqrebuild", "RocketMQ rebuild-index dispatch loop",
                                    -1, methods};

PyObject *rmq_rebuild_module(void)   /* one part of the rmqcore module (rmqcore.c) */ { return PyModule_Create(&module); }
