/* mqtool/_native/rmqverify.c: the RocketMQ `verify commitlog` fast lane as one C loop.
 *
 * A drop-in for the pure-Python loop in mqtool/rocketmq/verify.py::_fast_lane (which stays, and is the
 * fallback when this module is not built or MQTOOL_NATIVE=0). It walks message units over [pos, limit) of a
 * mapped segment and consumes a unit only when the full verify path would report nothing for it and would
 * update its state identically; at the first unit it does not fully handle it stops and returns, and the
 * scanner hands that unit to the full path. Declining is always safe, so every doubt declines.
 *
 * It is the verify hook of the core's one unit walker (rmq_walk, rmqcore.c): the walker frames each unit with
 * the layout rmqcore.configure() got from formats/rocketmq.py and checks its body CRC (the configured ISA-L
 * callable, or the built-in slicing-by-8); this part adds the verify checks and the queue state. Its own
 * options come by name through configure(): the versions it takes, the sysFlag bits that decline, the
 * "__CRC32#" tag and its tail length, the INNER_MULTI_DISPATCH name and the plausible born-time window.
 * Equivalence with the Python lane: tests/test_rocketmq_native_verify.py.
 *
 * Memory safety: every length is checked against the buffer before a byte it implies is read; the buffer is
 * taken with the buffer protocol (PyBUF_SIMPLE) and released on every path; no pointer outlives the call.
 */
#include "rmqunit.h"             /* Python.h first; the core: layout, walker, body CRC */
#include "rmqcore.h"

/* ---- the verify part's options (set by configure(), from the schema and verify.py) ------------------------ */

static struct {
    int configured;
    int magics;                /* RMQ_V1 | RMQ_V2: the versions the lane takes */
    int64_t decline_mask;      /* sysFlag bits whose units take the full path */
    int64_t born_before, born_after;  /* plausible born time: [store - born_before, store + born_after] */
    Py_ssize_t crc_tail;       /* "__CRC32#" counts only in the last crc_tail bytes of the properties */
    char crc_tag[32];
    Py_ssize_t crc_tag_len;
    char multi[64];
    Py_ssize_t multi_len;
} cfg;

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

/* ---- the lane: the verify hook of rmq_walk() -------------------------------------------------------------- */

typedef struct {
    QTab q;
    int64_t shift, last_ts;
    PyObject *expected;
    int known_only;
    Py_ssize_t cached;                     /* entry of the previous unit (runs of one queue) */
} VerifyRun;

/* A unit the walker framed (v1, no declining sysFlag bit, body CRC right): consumed when the full verify path
 * would report nothing for it and update its state identically; else 0 (the full path takes it). */
static int verify_unit(RmqWalk *w, const unsigned char *u, RmqUnit *x)
{
    VerifyRun *v = w->verb;
    int64_t delta, born_gap;
    if (__builtin_sub_overflow(rmq_field(u, F_STORETS), rmq_field(u, F_BORNTS), &born_gap)
        || born_gap > cfg.born_before || born_gap < -cfg.born_after)
        return 0;                                   /* an implausible born time: the full path reports it */
    if (__builtin_sub_overflow(rmq_field(u, F_PHYS), (int64_t)x->pos, &delta) || delta != v->shift)
        return 0;
    const uint8_t *props = u + x->pp;
    const Py_ssize_t pl = (Py_ssize_t)x->total - x->pp;
    if (contains(props, pl, cfg.multi, cfg.multi_len)) return 0;
    Py_ssize_t tail = pl < cfg.crc_tail ? pl : cfg.crc_tail;
    if (contains(props + pl - tail, tail, cfg.crc_tag, cfg.crc_tag_len)) return 0;
    if (!mq_utf8_ok(props, pl)) return 0;

    /* queue state */
    int64_t qid = rmq_field(u, F_QUEUEID), qoff = rmq_field(u, F_QOFF);
    if (qoff == INT64_MAX) return 0;                /* qoff + 1 would not fit: let Python do it */
    const uint8_t *topic = u + x->tp;
    const Py_ssize_t tl = x->tl;
    QTab *q = &v->q;
    Py_ssize_t ei = -1;
    if (v->cached >= 0) {
        const QEnt *e = &q->ents[v->cached];
        if (e->qid == qid && e->tlen == tl && memcmp(e->topic, topic, (size_t)tl) == 0) ei = v->cached;
    }
    uint64_t h = 0;
    if (ei < 0) {
        h = q_hash(topic, tl, qid);
        ei = q_find(q, topic, tl, qid, h);
    }
    if (ei < 0) {                                   /* first unit of this queue in this call */
        PyObject *name = PyUnicode_DecodeUTF8((const char *)topic, tl, "strict");
        if (name == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) return -1;
            PyErr_Clear();
            return 0;
        }
        PyObject *key = Py_BuildValue("(NL)", name, (long long)qid);
        if (key == NULL) return -1;
        if (v->known_only) {
            int has = PyDict_Contains(v->expected, key);
            if (has <= 0) { Py_DECREF(key); return has < 0 ? -1 : 0; }
        }
        PyObject *exp = PyDict_GetItemWithError(v->expected, key);   /* borrowed */
        int64_t e64 = qoff;                         /* no expectation yet: any queue offset is right */
        if (exp != NULL) {
            int fits = as_i64(exp, &e64);
            if (fits <= 0) { Py_DECREF(key); return fits < 0 ? -1 : 0; }
        } else if (PyErr_Occurred()) {
            Py_DECREF(key);
            return -1;
        }
        if ((ei = q_add(q, topic, tl, qid, h, key, e64)) < 0) return -1;
    }
    v->cached = ei;
    if (q->ents[ei].next != qoff) return 0;
    q->ents[ei].next = qoff + 1;
    int64_t ts = rmq_field(u, F_STORETS);
    if (ts > v->last_ts) v->last_ts = ts;
    return 1;
}

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
    if (rmq_ready("verify") < 0) return NULL;
    if (!cfg.configured) {
        PyErr_SetString(PyExc_RuntimeError, "rmqcore.verify.configure() was not called");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(bufobj, &view, PyBUF_SIMPLE) < 0) return NULL;
    VerifyRun v = {.expected = expected, .known_only = known_only, .cached = -1};
    int64_t max_size;
    int r;

    /* Inputs we cannot represent exactly: decline the whole call (the full path handles the units). */
    if ((r = as_i64(lastts_o, &v.last_ts)) <= 0) goto decline_or_error;
    if ((r = as_i64(shift_o, &v.shift)) <= 0) goto decline_or_error;
    if ((r = as_i64(maxsize_o, &max_size)) < 0) goto error;
    if (r == 0) {                                      /* beyond int64: none is too big, or all are */
        int sign = 0;
        (void)PyLong_AsLongLongAndOverflow(maxsize_o, &sign);
        if (sign < 0) goto decline;
        max_size = INT64_MAX;
    }
    if (pos < 0 || end < 0 || end > view.len) goto decline;
    RmqWalk w = {.buf = view.buf, .len = view.len, .pos = pos, .limit = limit, .end = end, .max_size = max_size,
                 .cap = PY_SSIZE_T_MAX, .magics = cfg.magics, .decline_flags = cfg.decline_mask,
                 .crc = RMQ_CRC_MUST, .hook = verify_unit, .verb = &v};
    if (rmq_walk(&w) < 0) goto error;
    if (q_write_back(&v.q, expected, dispatched) < 0) goto error;
    q_free(&v.q);
    PyBuffer_Release(&view);
    return Py_BuildValue("nnL", w.pos, w.count, (long long)v.last_ts);

decline_or_error:
    if (r < 0) goto error;
decline:
    q_free(&v.q);
    PyBuffer_Release(&view);
    return Py_BuildValue("nnO", pos, (Py_ssize_t)0, lastts_o);
error:
    q_free(&v.q);
    PyBuffer_Release(&view);
    return NULL;
}

/* ---- configuration and test hooks ---------------------------------------------------------------------- */

PyDoc_STRVAR(configure_doc,
"configure(*, versions, decline_flags, crc_tail, crc_tag, multi_dispatch, born_before, born_after)\n\n"
"The lane's own options (the layout and the CRC-32 are rmqcore.configure()'s): versions: the magic codes the\n"
"lane takes (a tuple of the layout's magic_v1 / magic_v2); decline_flags: sysFlag bits whose units take the full\n"
"path; crc_tail / crc_tag: a \"__CRC32#\" tag in the last crc_tail bytes of the properties declines; multi_dispatch:\n"
"the property name that declines; born_before / born_after (ms): how far a born time may lie before / after the\n"
"store time.");

static PyObject *configure(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"versions", "decline_flags", "crc_tail", "crc_tag", "multi_dispatch", "born_before",
                             "born_after", NULL};
    PyObject *versions;
    Py_ssize_t crc_tail;
    long long mask, born_before, born_after;
    Py_buffer tag, multi;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "$O!Lny*y*LL:configure", kwlist, &PyTuple_Type, &versions, &mask,
                                     &crc_tail, &tag, &multi, &born_before, &born_after))
        return NULL;
    const char *why = NULL;
    int magics = 0;
    if (rmq_ready("verify") < 0) goto fail;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(versions); i++) {
        long long m = PyLong_AsLongLong(PyTuple_GET_ITEM(versions, i));
        if (m == -1 && PyErr_Occurred()) goto fail;
        magics |= m == RMQ.magic_v1 ? RMQ_V1 : m == RMQ.magic_v2 ? RMQ_V2 : 0;
        if (m != RMQ.magic_v1 && m != RMQ.magic_v2) why = "versions: not a magic code of the layout";
    }
    if (why == NULL && (crc_tail < 0 || tag.len >= (Py_ssize_t)sizeof cfg.crc_tag
                        || multi.len >= (Py_ssize_t)sizeof cfg.multi || born_before < 0 || born_after < 0))
        why = "bad sizes";
    if (why != NULL) {
        PyErr_SetString(PyExc_ValueError, why);
        goto fail;
    }
    cfg.magics = magics;
    cfg.decline_mask = mask;
    cfg.born_before = born_before;
    cfg.born_after = born_after;
    cfg.crc_tail = crc_tail;
    memcpy(cfg.crc_tag, tag.buf, (size_t)tag.len);
    cfg.crc_tag_len = tag.len;
    memcpy(cfg.multi, multi.buf, (size_t)multi.len);
    cfg.multi_len = multi.len;
    cfg.configured = 1;
    PyBuffer_Release(&tag);
    PyBuffer_Release(&multi);
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
    c = rmq_crc32_s8(value, b.buf, b.len);    /* the core's table (rmqcore.c) */
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&b);
    return PyLong_FromUnsignedLong(c);
}

/* utf8_valid(data): what the lane thinks of bytes (tests compare it with bytes.decode('utf-8')). */
static PyObject *py_utf8_valid(PyObject *self, PyObject *arg)
{
    Py_buffer b;
    if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0) return NULL;
    int ok = mq_utf8_ok(b.buf, b.len);
    PyBuffer_Release(&b);
    return PyBool_FromLong(ok);
}

static PyMethodDef methods[] = {
    {"configure", (PyCFunction)(void (*)(void))configure, METH_VARARGS | METH_KEYWORDS, configure_doc},
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
    return PyModule_Create(&module);
}
