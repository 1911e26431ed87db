/* rmqdecode: records.Message objects for runs of common RocketMQ units, built in C.
 *
 * Drop-in for the per-unit Python work of SegmentScanner._walk's common case (records.decode_common):
 * messages(buf, pos, limit, end, base, file, max_size, check_crc, cap) decodes whole units from buf[pos:]
 * (each starting before limit, at most cap of them) that decode_common would accept -- v1/v2 magic, IPv4
 * hosts, every length consistent -- into Message objects carrying exactly the slot values decode_common sets,
 * and returns (new_pos, [Message, ...]). It stops at the first unit it would not accept; the scanner then
 * runs its Python path on that unit (which gives the precise reason, or decodes an IPv6 unit via construct).
 *
 * It is the decode hook of the core's one unit walker (rmq_walk, rmqcore.c), which frames each unit with the
 * layout rmqcore.configure() got from formats/rocketmq.py and computes the body CRC when asked. configure()
 * (by name, from mqtool/rocketmq/scan.py) gives the Message type and its slot descriptors (fetched from the
 * type's __dict__; values are stored through each descriptor's tp_descr_set, so no object layout is assumed)
 * and the "v1"/"v2" version strings.
 * Every length is checked against the buffer before a byte is read; the buffer is held through the buffer
 * protocol for the call only (the Message objects reference the buffer *object*, as the Python path does).
 * The GIL is held throughout (Python objects are built all along).
 */
#include "rmqunit.h"                 /* Python.h first; the core: layout, walker, body CRC */
#include "rmqcore.h"
#include <string.h>

/* Message slots, in the order configure() receives their names (a subset order fixed here, names checked
 * against the type's __slots__ in Python). */
enum { S_FILE, S_POSITION, S_OFFSET, S_SIZE, S_VERSION, S_BODY_CRC, S_QUEUE_ID, S_FLAG, S_QUEUE_OFFSET,
       S_PHYSICAL_OFFSET, S_SYS_FLAG, S_BORN_TS, S_BORN_HOST, S_STORE_TS, S_STORE_HOST, S_RECONSUME,
       S_PREPARED, S_BODY_START, S_BODY_LEN, S_TOPIC_RAW, S_PROPS_RAW, S_BUF, S_PAIRS, S_CRC_OK, NSLOTS };

static struct {
    int configured;
    PyTypeObject *type;                  /* records.Message */
    PyObject *descr[NSLOTS];             /* its slot descriptors */
    descrsetfunc set[NSLOTS];            /* Py_TYPE(descr[i])->tp_descr_set */
    PyObject *v1, *v2;                   /* the version strings */
    /* small caches of immutable values shared between consecutive messages (owned references) */
    unsigned char topic_raw[256]; Py_ssize_t topic_len; PyObject *topic;     /* bytes */
    unsigned char bhost_raw[8]; PyObject *bhost;                             /* (addr bytes, port) */
    unsigned char shost_raw[8]; PyObject *shost;
} S;

static inline long long field(const unsigned char *u, int f) { return rmq_field(u, f); }

typedef RmqUnit Unit;

/* (addr bytes, port) -- the host tuple decode_common stores -- reused while the 8 raw bytes repeat. New ref. */
static PyObject *host(const unsigned char *u, int faddr, int fport, unsigned char *raw, PyObject **cache)
{
    unsigned char key[8];
    memcpy(key, u + RMQ.off[faddr], 4);
    memcpy(key + 4, u + RMQ.off[fport], 4);
    if (*cache == NULL || memcmp(key, raw, 8) != 0) {
        PyObject *t = Py_BuildValue("(y#L)", (const char *)key, (Py_ssize_t)4, field(u, fport));
        if (t == NULL) return NULL;
        Py_XSETREF(*cache, t);
        memcpy(raw, key, 8);
    }
    Py_INCREF(*cache);
    return *cache;
}

/* The topic bytes, reused while they repeat (bytes are immutable). New ref. */
static PyObject *topic(const unsigned char *p, Py_ssize_t n)
{
    if (S.topic != NULL && S.topic_len == n && memcmp(S.topic_raw, p, (size_t)n) == 0) {
        Py_INCREF(S.topic);
        return S.topic;
    }
    PyObject *t = PyBytes_FromStringAndSize((const char *)p, n);
    if (t == NULL) return NULL;
    if (n <= (Py_ssize_t)sizeof S.topic_raw) {
        Py_XSETREF(S.topic, t);
        Py_INCREF(t);
        memcpy(S.topic_raw, p, (size_t)n);
        S.topic_len = n;
    }
    return t;
}

/* m.<slot> = v through the slot's descriptor; steals v (NULL: an error is already set). */
static int put(PyObject *m, int slot, PyObject *v)
{
    if (v == NULL) return -1;
    int r = S.set[slot](S.descr[slot], m, v);
    Py_DECREF(v);
    return r;
}

static int put_ll(PyObject *m, int slot, long long v) { return put(m, slot, PyLong_FromLongLong(v)); }

static int put_borrowed(PyObject *m, int slot, PyObject *v) { return S.set[slot](S.descr[slot], m, v); }

/* The Message of the unit at u (framed and, with check_crc, CRC-checked by the walker). New ref or NULL. */
static PyObject *message(PyObject *bufobj, const unsigned char *u, const Unit *x, long long base, PyObject *file)
{
    PyObject *m = S.type->tp_alloc(S.type, 0);
    if (m == NULL) return NULL;
    const Py_ssize_t pos = x->pos;
    const long long body_crc = field(u, F_BODYCRC);
    const int ok = x->crc_ok;                             /* -1: CRC not checked (crc_ok None) */
    if (put_ll(m, S_SIZE, x->total) < 0 || put_ll(m, S_BODY_CRC, body_crc) < 0
        || put_ll(m, S_QUEUE_ID, field(u, F_QUEUEID)) < 0 || put_ll(m, S_FLAG, field(u, F_FLAG)) < 0
        || put_ll(m, S_QUEUE_OFFSET, field(u, F_QOFF)) < 0 || put_ll(m, S_PHYSICAL_OFFSET, field(u, F_PHYS)) < 0
        || put_ll(m, S_SYS_FLAG, field(u, F_SYSFLAG)) < 0 || put_ll(m, S_BORN_TS, field(u, F_BORNTS)) < 0
        || put(m, S_BORN_HOST, host(u, F_BADDR, F_BPORT, S.bhost_raw, &S.bhost)) < 0
        || put_ll(m, S_STORE_TS, field(u, F_STORETS)) < 0
        || put(m, S_STORE_HOST, host(u, F_SADDR, F_SPORT, S.shost_raw, &S.shost)) < 0
        || put_ll(m, S_RECONSUME, field(u, F_RECONSUME)) < 0 || put_ll(m, S_PREPARED, field(u, F_PREPARED)) < 0
        || put_ll(m, S_BODY_START, (long long)pos + RMQ.fixed_size) < 0 || put_ll(m, S_BODY_LEN, x->body_len) < 0
        || put(m, S_TOPIC_RAW, topic(u + x->tp, x->tl)) < 0
        || put(m, S_PROPS_RAW, PyBytes_FromStringAndSize((const char *)u + x->pp, (Py_ssize_t)x->total - x->pp)) < 0
        || put_borrowed(m, S_FILE, file) < 0 || put_ll(m, S_POSITION, pos) < 0
        || put_ll(m, S_OFFSET, base + pos) < 0 || put_borrowed(m, S_VERSION, x->v2 ? S.v2 : S.v1) < 0
        || put_borrowed(m, S_BUF, bufobj) < 0 || put_borrowed(m, S_PAIRS, Py_None) < 0
        || put_borrowed(m, S_CRC_OK, ok < 0 ? Py_None : ok ? Py_True : Py_False) < 0)
        goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}

/* ---- the run ------------------------------------------------------------------------------------------ */

typedef struct { PyObject *bufobj, *file, *out; long long base; } DecodeRun;

/* The decode hook of rmq_walk(): the unit's Message appended to the list. */
static int decode_unit(RmqWalk *w, const unsigned char *u, RmqUnit *x)
{
    DecodeRun *d = w->verb;
    PyObject *m = message(d->bufobj, u, x, d->base, d->file);
    if (m == NULL) return -1;
    int r = PyList_Append(d->out, m);
    Py_DECREF(m);
    return r < 0 ? -1 : 1;
}

static PyObject *messages(PyObject *self, PyObject *args)
{
    PyObject *bufobj, *file;
    Py_ssize_t pos, limit, end, cap;
    long long base, max_size;
    int check_crc;
    if (!PyArg_ParseTuple(args, "OnnnLOLpn", &bufobj, &pos, &limit, &end, &base, &file, &max_size, &check_crc,
                          &cap))
        return NULL;
    if (rmq_ready("decode") < 0) return NULL;
    if (!S.configured) {
        PyErr_SetString(PyExc_RuntimeError, "rmqcore.decode.configure() was not called");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(bufobj, &view, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *result = NULL;
    DecodeRun d = {bufobj, file, PyList_New(0), base};
    if (d.out != NULL) {
        RmqWalk w = {.buf = view.buf, .len = view.len, .pos = pos, .limit = limit, .end = end,
                     .max_size = max_size, .cap = cap, .magics = RMQ_V1 | RMQ_V2,
                     .crc = check_crc ? RMQ_CRC_ON : RMQ_CRC_OFF, .hook = decode_unit, .verb = &d};
        if (rmq_walk(&w) == 0) result = Py_BuildValue("nO", w.pos, d.out);
    }
    Py_XDECREF(d.out);
    PyBuffer_Release(&view);
    return result;
}

/* ---- units that could cover a position (scan.SegmentScanner._covered) ---------------------------------- */

/* covering(buf, lo, p, max_size) -> [c]: every c in [lo, p) whose magic field holds the v1 or v2 code and whose
 * TOTALSIZE lies in [min size, max_size] and reaches past p. A prefilter: the caller decodes each candidate. */
static PyObject *covering(PyObject *self, PyObject *args)
{
    PyObject *bufobj;
    Py_ssize_t lo, p;
    long long max_size;
    if (!PyArg_ParseTuple(args, "OnnL", &bufobj, &lo, &p, &max_size))
        return NULL;
    if (rmq_ready("decode") < 0) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(bufobj, &view, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *b = view.buf;
    PyObject *out = PyList_New(0);
    const RmqLayout *L = &RMQ;
    Py_ssize_t mo = L->off[F_MAGIC], ms = L->size[F_MAGIC], to = L->off[F_TOTAL], ts = L->size[F_TOTAL];
    Py_ssize_t need = (mo + ms > to + ts ? mo + ms : to + ts);
    unsigned char first = (unsigned char)(((unsigned long long)L->magic_v1 >> (8 * (ms - 1))) & 0xff);
    unsigned char first2 = (unsigned char)(((unsigned long long)L->magic_v2 >> (8 * (ms - 1))) & 0xff);
    if (lo < 0) lo = 0;
    if (p > view.len) p = view.len;
    for (Py_ssize_t c = lo; out != NULL && c < p && c + need <= view.len; c++) {
        const unsigned char *m = b + c + mo;
        if (*m != first && *m != first2) {       /* jump to the next byte that can start a magic field */
            Py_ssize_t n = p - c;
            if (c + mo + n > view.len) n = view.len - (c + mo);
            if (n <= 0) break;
            const unsigned char *q = memchr(m, first, (size_t)n);
            const unsigned char *q2 = first2 == first ? NULL : memchr(m, first2, (size_t)n);
            if (q2 != NULL && (q == NULL || q2 < q)) q = q2;
            if (q == NULL) break;
            c = (q - b) - mo;
            if (c >= p || c + need > view.len) break;
        }
        long long magic = mq_rd_be(b + c + mo, (int)ms);
        if (magic != L->magic_v1 && magic != L->magic_v2) continue;
        long long total = mq_rd_be(b + c + to, (int)ts);
        if (total < L->min_size || total > max_size || c + total <= p) continue;
        PyObject *v = PyLong_FromSsize_t(c);
        if (v == NULL || PyList_Append(out, v) < 0) {
            Py_XDECREF(v);
            Py_CLEAR(out);
            break;
        }
        Py_DECREF(v);
    }
    PyBuffer_Release(&view);
    return out;
}

/* ---- configuration ------------------------------------------------------------------------------------ */

static PyObject *configure(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"message_type", "slots", "v1", "v2", NULL};
    PyObject *type, *slots, *v1, *v2;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "$O!O!UU:configure", kwlist, &PyType_Type, &type, &PyTuple_Type,
                                     &slots, &v1, &v2))
        return NULL;
    S.configured = 0;                    /* until every part below is in place */
    if (PyTuple_GET_SIZE(slots) != NSLOTS) {
        PyErr_Format(PyExc_ValueError, "need %d slot names", NSLOTS);
        return NULL;
    }
    /* the slot descriptors: each must be a data descriptor found in the type's own __dict__ */
    PyTypeObject *tp = (PyTypeObject *)type;
    if (tp->tp_alloc == NULL) {
        PyErr_SetString(PyExc_TypeError, "type has no tp_alloc");
        return NULL;
    }
    PyObject *d[NSLOTS];
    descrsetfunc set[NSLOTS];
    for (int i = 0; i < NSLOTS; i++) {
        PyObject *name = PyTuple_GET_ITEM(slots, i);
        d[i] = PyUnicode_Check(name) ? PyDict_GetItemWithError(tp->tp_dict, name) : NULL;
        if (d[i] == NULL) {
            if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "slot %d not in the type's __dict__", i);
            return NULL;
        }
        set[i] = Py_TYPE(d[i])->tp_descr_set;
        if (set[i] == NULL) return PyErr_Format(PyExc_TypeError, "slot %d is not a data descriptor", i);
    }
    for (int i = 0; i < NSLOTS; i++) {
        Py_INCREF(d[i]);
        Py_XSETREF(S.descr[i], d[i]);
        S.set[i] = set[i];
    }
    Py_INCREF(type); Py_XSETREF(S.type, tp);
    Py_INCREF(v1); Py_XSETREF(S.v1, v1);
    Py_INCREF(v2); Py_XSETREF(S.v2, v2);
    Py_CLEAR(S.topic); Py_CLEAR(S.bhost); Py_CLEAR(S.shost);
    S.configured = 1;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"configure", (PyCFunction)(void (*)(void))configure, METH_VARARGS | METH_KEYWORDS,
     "configure(*, message_type, slots, v1, v2): the Message type, its slot names in the order this part sets "
     "them, and the version strings (the layout is rmqcore.configure()'s)."},
    {"messages", messages, METH_VARARGS,
     "messages(buf, pos, limit, end, base, file, max_size, check_crc, cap) -> (new_pos, [Message]): the "
     "Message objects of the common units from pos (each starting before limit, at most cap)."},
    {"covering", covering, METH_VARARGS,
     "covering(buf, lo, p, max_size) -> [c]: positions in [lo, p) with a message magic code and a TOTALSIZE "
     "(min size..max_size) reaching past p."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "rmqdecode", "RocketMQ Message objects in C", -1,
                                    methods};

PyObject *rmq_decode_module(void)   /* one part of the rmqcore module (rmqcore.c) */ { return PyModule_Create(&module); }
