/* mqtool/_native/rmqverify.c: the RocketMQ `verify commitlog` fast lane as one C loop.
 *
 * A drop-in for the pure-Python loop in mqtool/rocketmq/verify.py::_fast_lane (which stays, and is the
 * fallback when this module is not built or MQTOOL_NATIVE=0). It walks message units over [pos, limit) of a
 * mapped segment and consumes a unit only when the full verify path would report nothing for it and would
 * update its state identically; at the first unit it does not fully handle it stops and returns, and the
 * scanner hands that unit to the full path. Declining is always safe, so every doubt declines.
 *
 * No layout is written here: configure() receives, computed in Python from formats/rocketmq.py at import time,
 * the offset and size of each header field the loop reads, the fixed-part size, the sizes of the TOPICLENGTH
 * and PROPERTIESLENGTH fields, the v1 magic, the minimum unit size, the sysFlag bits that decline, the
 * "__CRC32#" tag and its tail length, the INNER_MULTI_DISPATCH name and the CRC-32 callable (or None: then the
 * built-in slicing-by-8 CRC-32 below is used). Equivalence with the Python lane: tests/test_native_verify.py.
 *
 * Memory safety: every length is checked against the buffer before a byte it implies is read; the buffer is
 * taken with the buffer protocol (PyBUF_SIMPLE) and released on every path; no pointer outlives the call.
 */
#include "mqcore.h"             /* Python.h first; byte order, UTF-8, CRC-32 */
#include "rmqcore.h"

/* ---- configuration (set once by configure(), from the schema) ------------------------------------------- */

enum { F_TOTAL, F_MAGIC, F_BODYCRC, F_QUEUEID, F_QUEUEOFF, F_PHYS, F_SYSFLAG, F_BORNTS, F_STORETS, F_BODYLEN,
       NFIELDS };

typedef struct {
    int configured;
    Py_ssize_t off[NFIELDS];   /* byte offset of each field inside the fixed part */
    int size[NFIELDS];         /* 1, 2, 4 or 8 bytes, big-endian, signed */
    Py_ssize_t fixed;          /* size of the fixed part (BODY starts here when BODYLENGTH is its last field) */
    int tl_size, pl_size;      /* TOPICLENGTH, PROPERTIESLENGTH sizes (signed big-endian) */
    int64_t magic, min_size, decline_mask;
    int64_t born_before, born_after;  /* plausible born time: [store - born_before, store + born_after] */
    Py_ssize_t crc_tail;       /* "__CRC32#" counts only in the last crc_tail bytes of the properties */
    char crc_tag[32];
    Py_ssize_t crc_tag_len;
    char multi[64];
    Py_ssize_t multi_len;
    PyObject *crc;             /* CRC-32 callable (strong ref) or NULL: built-in slicing-by-8 */
} Config;

static Config cfg;

/* ---- small helpers ---------------------------------------------------------------------------------------- */

#define rd_be mq_rd_be
#define utf8_ok mq_utf8_ok

/* Python's `needle in haystack` for bytes. */
static int contains(const uint8_t *h, Py_ssize_t hn, const char *nd, Py_ssize_t nn)
{
    if (nn == 0) return 1;
    if (hn < nn) return 0;
    const uint8_t *p = h, *last = h + (hn - nn);
    while (p <= last) {
        p = memchr(p, (unsigned char)nd[0], (size_t)(last - p) + 1);
        if (p == NULL) return 0;
        if (memcmp(p, nd, (size_t)nn) == 0) return 1;
        p++;
    }
    return 0;
}

/* Body CRC & 0x7FFFFFFF into *out (the callable configure() got, else the table loop); -1 with an exception
 * set when the callable failed. */
static int body_crc(const uint8_t *p, Py_ssize_t n, int64_t *out)
{
    uint32_t c;
    if (cfg.crc == NULL)
        c = mq_crc32_s8(0, p, n);
    else if (mq_crc32_call(cfg.crc, p, n, &c) < 0)
        return -1;
    *out = (int64_t)(c & 0x7FFFFFFFu);
    return 0;
}

/* ---- per-call queue table: (topic bytes, queue id) -> key tuple and next expected queue offset ---------- */

typedef struct {
    const uint8_t *topic;   /* into the caller's buffer: valid during this call only */
    Py_ssize_t tlen;
    int64_t qid;
    uint64_t hash;
    PyObject *key;          /* (topic str, queue id int), owned */
    int64_t next;           /* next expected queue offset (always set: see q_add) */
} QEnt;

typedef struct {
    QEnt *ents;             /* in insertion order (the order the Python lane writes the state back in) */
    Py_ssize_t n, cap;
    int32_t *slots;         /* open addressing: index into ents, or -1 */
    Py_ssize_t nslots;      /* power of two, >= 2 * cap */
} QTab;

static uint64_t q_hash(const uint8_t *t, Py_ssize_t n, int64_t qid)
{
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)qid;
    for (Py_ssize_t i = 0; i < n; i++) h = (h ^ t[i]) * 1099511628211ULL;
    return h ^ (h >> 29);
}

static void q_free(QTab *q)
{
    for (Py_ssize_t i = 0; i < q->n; i++) Py_XDECREF(q->ents[i].key);
    PyMem_Free(q->ents);
    PyMem_Free(q->slots);
    q->ents = NULL;
    q->slots = NULL;
    q->n = q->cap = q->nslots = 0;
}

static Py_ssize_t q_find(const QTab *q, const uint8_t *t, Py_ssize_t n, int64_t qid, uint64_t h)
{
    if (q->nslots == 0) return -1;
    for (Py_ssize_t s = (Py_ssize_t)(h & (uint64_t)(q->nslots - 1));; s = (s + 1) & (q->nslots - 1)) {
        int32_t i = q->slots[s];
        if (i < 0) return -1;
        const QEnt *e = &q->ents[i];
        if (e->hash == h && e->qid == qid && e->tlen == n && memcmp(e->topic, t, (size_t)n) == 0) return i;
    }
}

/* Append an entry (takes the reference to key); -1 on memory error (key released). */
static Py_ssize_t q_add(QTab *q, const uint8_t *t, Py_ssize_t n, int64_t qid, uint64_t h, PyObject *key,
                        int64_t next)
{
    if (q->n == q->cap) {
        Py_ssize_t cap = q->cap ? q->cap * 2 : 64;
        QEnt *ne = PyMem_Realloc(q->ents, (size_t)cap * sizeof(QEnt));
        int32_t *ns = PyMem_Malloc((size_t)cap * 2 * sizeof(int32_t));
        if (ne == NULL || ns == NULL || cap > INT32_MAX / 2) {
            if (ne != NULL) q->ents = ne;
            PyMem_Free(ns);
            Py_DECREF(key);
            PyErr_NoMemory();
            return -1;
        }
        q->ents = ne;
        q->cap = cap;
        PyMem_Free(q->slots);
        q->slots = ns;
        q->nslots = cap * 2;
        for (Py_ssize_t s = 0; s < q->nslots; s++) q->slots[s] = -1;
        for (Py_ssize_t i = 0; i < q->n; i++) {           /* rehash */
            Py_ssize_t s = (Py_ssize_t)(q->ents[i].hash & (uint64_t)(q->nslots - 1));
            while (q->slots[s] >= 0) s = (s + 1) & (q->nslots - 1);
            q->slots[s] = (int32_t)i;
        }
    }
    Py_ssize_t s = (Py_ssize_t)(h & (uint64_t)(q->nslots - 1));
    while (q->slots[s] >= 0) s = (s + 1) & (q->nslots - 1);
    q->slots[s] = (int32_t)q->n;
    q->ents[q->n] = (QEnt){t, n, qid, h, key, next};
    return q->n++;
}

/* The Python lane's write-back: expected_next[key] = nxt; dispatched[key] = nxt if nxt > dispatched.get(key, 0). */
static int q_write_back(const QTab *q, PyObject *expected, PyObject *dispatched)
{
    PyObject *zero = PyLong_FromLong(0);
    if (zero == NULL) return -1;
    for (Py_ssize_t i = 0; i < q->n; i++) {
        PyObject *nxt = PyLong_FromLongLong(q->ents[i].next);
        if (nxt == NULL) goto fail;
        if (PyDict_SetItem(expected, q->ents[i].key, nxt) < 0) { Py_DECREF(nxt); goto fail; }
        PyObject *d = PyDict_GetItemWithError(dispatched, q->ents[i].key);   /* borrowed */
        if (d == NULL && PyErr_Occurred()) { Py_DECREF(nxt); goto fail; }
        int gt = PyObject_RichCompareBool(nxt, d ? d : zero, Py_GT);
        if (gt < 0 || (gt && PyDict_SetItem(dispatched, q->ents[i].key, nxt) < 0)) { Py_DECREF(nxt); goto fail; }
        Py_DECREF(nxt);
    }
    Py_DECREF(zero);
    return 0;
fail:
    Py_DECREF(zero);
    return -1;
}

/* Python int -> int64; 1 when it fits, 0 when it does not (no exception), -1 on error. */
static int as_i64(PyObject *o, int64_t *out)
{
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (overflow) return 0;
    *out = (int64_t)v;
    return 1;
}

/* ---- the lane ------------------------------------------------------------------------------------------------ */

PyDoc_STRVAR(scan_doc,
"scan(buf, pos, limit, end, shift, max_size, last_ts, expected_next, dispatched_next, known_queues_only)\n"
"-> (new_pos, count, last_ts)\n\n"
"The verify fast lane over the units starting in [pos, limit) of buf[:end] (see verify._fast_lane).\n"
"shift: PHYSICALOFFSET - position of every clean unit; the two dicts are updated as the Python lane does.");

static PyObject *scan(PyObject *self, PyObject *args)
{
    PyObject *bufobj, *shift_o, *maxsize_o, *lastts_o, *expected, *dispatched;
    Py_ssize_t pos, limit, end;
    int known_only;
    if (!PyArg_ParseTuple(args, "OnnnOOOO!O!p", &bufobj, &pos, &limit, &end, &shift_o, &maxsize_o, &lastts_o,
                          &PyDict_Type, &expected, &PyDict_Type, &dispatched, &known_only))
        return NULL;
    if (!cfg.configured) {
        PyErr_SetString(PyExc_RuntimeError, "rmqverify.configure() was not called");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(bufobj, &view, PyBUF_SIMPLE) < 0) return NULL;
    const uint8_t *buf = view.buf;
    const Py_ssize_t start = pos;
    QTab q = {0};
    int64_t shift, max_size, last_ts;
    Py_ssize_t n = 0;
    int r;

    /* Inputs we cannot represent exactly: decline the whole call (the full path handles the units). */
    if ((r = as_i64(lastts_o, &last_ts)) <= 0) goto decline_or_error;
    if ((r = as_i64(shift_o, &shift)) <= 0) goto decline_or_error;
    if ((r = as_i64(maxsize_o, &max_size)) < 0) goto error;
    if (r == 0) {                                      /* beyond int64: none is too big, or all are */
        int sign = 0;
        (void)PyLong_AsLongLongAndOverflow(maxsize_o, &sign);
        if (sign < 0) goto decline;
        max_size = INT64_MAX;
    }
    if (pos < 0 || end < 0 || end > view.len) goto decline;
    if (limit > end - cfg.fixed + 1) limit = end - cfg.fixed + 1;   /* pos < limit: a whole fixed part is there */

    Py_ssize_t cached = -1;                            /* entry of the previous unit (runs of one queue) */
    while (pos < limit) {
        const uint8_t *u = buf + pos;
        int64_t total = rd_be(u + cfg.off[F_TOTAL], cfg.size[F_TOTAL]);
        int64_t magic = rd_be(u + cfg.off[F_MAGIC], cfg.size[F_MAGIC]);
        int64_t sys_flag = rd_be(u + cfg.off[F_SYSFLAG], cfg.size[F_SYSFLAG]);
        int64_t blen = rd_be(u + cfg.off[F_BODYLEN], cfg.size[F_BODYLEN]);
        int64_t phys = rd_be(u + cfg.off[F_PHYS], cfg.size[F_PHYS]);
        int64_t delta, born_gap;
        if (__builtin_sub_overflow(rd_be(u + cfg.off[F_STORETS], cfg.size[F_STORETS]),
                                   rd_be(u + cfg.off[F_BORNTS], cfg.size[F_BORNTS]), &born_gap)
            || born_gap > cfg.born_before || born_gap < -cfg.born_after)
            break;                                      /* an implausible born time: the full path reports it */
        if (magic != cfg.magic || total < cfg.min_size || total > max_size || total > end - pos
            || (sys_flag & cfg.decline_mask) || blen < 0 || blen > total
            || __builtin_sub_overflow(phys, (int64_t)pos, &delta) || delta != shift)
            break;
        const Py_ssize_t stop = pos + (Py_ssize_t)total;            /* <= end */
        const Py_ssize_t p = pos + cfg.fixed + (Py_ssize_t)blen;    /* TOPICLENGTH */
        if (p + cfg.tl_size + cfg.pl_size > stop) break;
        int64_t tl = rd_be(buf + p, cfg.tl_size);
        if (tl < 0 || p + cfg.tl_size + tl + cfg.pl_size > stop) break;
        const Py_ssize_t tp = p + cfg.tl_size;                        /* first topic byte */
        const Py_ssize_t pp = tp + (Py_ssize_t)tl + cfg.pl_size;      /* first properties byte */
        int64_t pl = rd_be(buf + pp - cfg.pl_size, cfg.pl_size);
        if (pl < 0 || pp + pl != stop) break;
        const uint8_t *props = buf + pp;
        if (contains(props, (Py_ssize_t)pl, cfg.multi, cfg.multi_len)) break;
        Py_ssize_t tail = pl < cfg.crc_tail ? (Py_ssize_t)pl : cfg.crc_tail;
        if (contains(props + pl - tail, tail, cfg.crc_tag, cfg.crc_tag_len)) break;
        if (!utf8_ok(props, (Py_ssize_t)pl)) break;
        int64_t crc;
        if (body_crc(buf + pos + cfg.fixed, (Py_ssize_t)blen, &crc) < 0) goto error;
        if (crc != rd_be(u + cfg.off[F_BODYCRC], cfg.size[F_BODYCRC])) break;

        /* queue state */
        int64_t qid = rd_be(u + cfg.off[F_QUEUEID], cfg.size[F_QUEUEID]);
        int64_t qoff = rd_be(u + cfg.off[F_QUEUEOFF], cfg.size[F_QUEUEOFF]);
        if (qoff == INT64_MAX) break;                   /* qoff + 1 would not fit: let Python do it */
        const uint8_t *topic = buf + tp;
        Py_ssize_t ei = -1;
        if (cached >= 0) {
            const QEnt *e = &q.ents[cached];
            if (e->qid == qid && e->tlen == tl && memcmp(e->topic, topic, (size_t)tl) == 0) ei = cached;
        }
        uint64_t h = 0;
        if (ei < 0) {
            h = q_hash(topic, (Py_ssize_t)tl, qid);
            ei = q_find(&q, topic, (Py_ssize_t)tl, qid, h);
        }
        if (ei < 0) {                                   /* first unit of this queue in this call */
            PyObject *name = PyUnicode_DecodeUTF8((const char *)topic, (Py_ssize_t)tl, "strict");
            if (name == NULL) {
                if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) goto error;
                PyErr_Clear();
                break;
            }
            PyObject *key = Py_BuildValue("(NL)", name, (long long)qid);
            if (key == NULL) goto error;
            if (known_only) {
                int has = PyDict_Contains(expected, key);
                if (has <= 0) { Py_DECREF(key); if (has < 0) goto error; break; }
            }
            PyObject *exp = PyDict_GetItemWithError(expected, key);   /* borrowed */
            int64_t e64 = qoff;                         /* no expectation yet: any queue offset is right */
            if (exp != NULL) {
                int fits = as_i64(exp, &e64);
                if (fits <= 0) { Py_DECREF(key); if (fits < 0) goto error; break; }
            } else if (PyErr_Occurred()) {
                Py_DECREF(key);
                goto error;
            }
            if ((ei = q_add(&q, topic, (Py_ssize_t)tl, qid, h, key, e64)) < 0) goto error;
        }
        cached = ei;
        if (q.ents[ei].next != qoff) break;
        q.ents[ei].next = qoff + 1;
        int64_t ts = rd_be(u + cfg.off[F_STORETS], cfg.size[F_STORETS]);
        if (ts > last_ts) last_ts = ts;
        n++;
        pos = stop;
    }
    if (q_write_back(&q, expected, dispatched) < 0) goto error;
    q_free(&q);
    PyBuffer_Release(&view);
    return Py_BuildValue("nnL", n ? pos : start, n, (long long)last_ts);

decline_or_error:
    if (r < 0) goto error;
decline:
    q_free(&q);
    PyBuffer_Release(&view);
    return Py_BuildValue("nnO", start, (Py_ssize_t)0, lastts_o);
error:
    q_free(&q);
    PyBuffer_Release(&view);
    return NULL;
}

/* ---- configuration and test hooks ---------------------------------------------------------------------- */

PyDoc_STRVAR(configure_doc,
"configure(fields, fixed, topic_len_size, props_len_size, magic, min_size, decline_mask, crc_tail, crc_tag,\n"
"          multi_dispatch, crc32, born_before, born_after)\n\n"
"fields: ((offset, size), ...) of TOTALSIZE, MAGICCODE, BODYCRC, QUEUEID, QUEUEOFFSET, PHYSICALOFFSET, SYSFLAG,\n"
"BORNTIMESTAMP, STORETIMESTAMP, BODYLENGTH in the fixed part (signed big-endian, 1/2/4/8 bytes), all derived\n"
"from the schema. born_before / born_after (ms): how far a born time may lie before / after the store time.\n"
"crc32: a callable equal to zlib.crc32, or None for the built-in slicing-by-8.");

static int ok_size(long s) { return s == 1 || s == 2 || s == 4 || s == 8; }

static PyObject *configure(PyObject *self, PyObject *args)
{
    PyObject *fields, *crc;
    Py_ssize_t fixed, crc_tail;
    int tl_size, pl_size;
    long long magic, min_size, mask, born_before, born_after;
    Py_buffer tag, multi;
    if (!PyArg_ParseTuple(args, "O!niiLLLny*y*OLL", &PyTuple_Type, &fields, &fixed, &tl_size, &pl_size, &magic,
                          &min_size, &mask, &crc_tail, &tag, &multi, &crc, &born_before, &born_after))
        return NULL;
    Config c = {0};
    const char *why = NULL;
    if (PyTuple_GET_SIZE(fields) != NFIELDS) why = "fields: 10 (offset, size) pairs expected";
    for (int i = 0; why == NULL && i < NFIELDS; i++) {
        long off, size;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(fields, i), "ll", &off, &size)) goto fail;
        if (!ok_size(size) || off < 0 || off + size > fixed) why = "field outside the fixed part, or odd size";
        c.off[i] = off;
        c.size[i] = (int)size;
    }
    if (why == NULL && (fixed <= 0 || !ok_size(tl_size) || !ok_size(pl_size) || min_size < fixed
                        || crc_tail < 0 || tag.len >= (Py_ssize_t)sizeof c.crc_tag
                        || multi.len >= (Py_ssize_t)sizeof c.multi || born_before < 0 || born_after < 0))
        why = "bad sizes";
    if (why == NULL && crc != Py_None && !PyCallable_Check(crc)) why = "crc32 must be callable or None";
    if (why != NULL) {
        PyErr_SetString(PyExc_ValueError, why);
        goto fail;
    }
    c.fixed = fixed;
    c.tl_size = tl_size;
    c.pl_size = pl_size;
    c.magic = magic;
    c.min_size = min_size;
    c.decline_mask = mask;
    c.born_before = born_before;
    c.born_after = born_after;
    c.crc_tail = crc_tail;
    memcpy(c.crc_tag, tag.buf, (size_t)tag.len);
    c.crc_tag_len = tag.len;
    memcpy(c.multi, multi.buf, (size_t)multi.len);
    c.multi_len = multi.len;
    c.crc = crc == Py_None ? NULL : Py_NewRef(crc);
    c.configured = 1;
    PyBuffer_Release(&tag);
    PyBuffer_Release(&multi);
    PyObject *old = cfg.crc;
    cfg = c;
    Py_XDECREF(old);
    Py_RETURN_NONE;
fail:
    PyBuffer_Release(&tag);
    PyBuffer_Release(&multi);
    return NULL;
}

/* crc32(data, value=0): the built-in slicing-by-8 CRC-32 (tests compare it with zlib.crc32). */
static PyObject *py_crc32(PyObject *self, PyObject *args)
{
    Py_buffer b;
    unsigned int value = 0;
    if (!PyArg_ParseTuple(args, "y*|I", &b, &value)) return NULL;
    uint32_t c;
    Py_BEGIN_ALLOW_THREADS                   /* plain bytes, no Python object touched */
    c = mq_crc32_s8(value, b.buf, b.len);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&b);
    return PyLong_FromUnsignedLong(c);
}

/* utf8_valid(data): what the lane thinks of bytes (tests compare it with bytes.decode('utf-8')). */
static PyObject *py_utf8_valid(PyObject *self, PyObject *arg)
{
    Py_buffer b;
    if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0) return NULL;
    int ok = utf8_ok(b.buf, b.len);
    PyBuffer_Release(&b);
    return PyBool_FromLong(ok);
}

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS, configure_doc},
    {"scan", scan, METH_VARARGS, scan_doc},
    {"crc32", py_crc32, METH_VARARGS, "Built-in slicing-by-8 CRC-32 (zlib polynomial): crc32(data, value=0)."},
    {"utf8_valid", py_utf8_valid, METH_O, "True when bytes.decode('utf-8') would succeed."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "rmqverify", "RocketMQ verify commitlog fast lane (see mqtool/rocketmq/verify.py)", -1,
    methods,
};

PyObject *rmq_verify_module(void)   /* one part of the rmqcore module (rmqcore.c) */
{
    mq_crc32_init();
    return PyModule_Create(&module);
}
