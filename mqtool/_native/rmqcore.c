/* mqtool._native.rmqcore: the one compiled RocketMQ module.
 *
 * This file holds what every part shares: the layout (rmqcore.configure(), by field name, refused unless its
 * fingerprint is the one this code was written for), the body CRC, and the one unit walker, rmq_walk(). The
 * parts -- verify (rmqverify.c), rebuild (rmqrebuild.c), dump (rmqdump.c, rmqjson.c) and decode (rmqdecode.c)
 * -- are attributes of this module; each is a hook rmq_walk() calls per framed unit, plus the part's own
 * named options (its configure()). See rmqunit.h.
 */
#include "rmqunit.h"
#include "rmqcore.h"

RmqLayout RMQ;

/* The fingerprint of the layout this code was written for: FNV-1a (64 bit) over the canonical text of what
 * configure() receives (see layout_text()). A schema change that moves, resizes, adds or removes a field, or
 * changes a framing constant, gives another fingerprint: configure() then refuses and mqtool runs its Python
 * readers. After such a change, check the parts against the new layout (tests/test_rocketmq_native_*.py) and
 * put the fingerprint configure()'s error names here. */
#define RMQ_LAYOUT_FINGERPRINT "6f580997dd20b655"

/* The layout's field names, in the order of the F_* enum (rmqunit.h). */
static const char *const FIELD_NAMES[NFIELDS] = {
    "TOTALSIZE", "MAGICCODE", "BODYCRC", "QUEUEID", "FLAG", "QUEUEOFFSET", "PHYSICALOFFSET", "SYSFLAG",
    "BORNTIMESTAMP", "BORNHOST.addr", "BORNHOST.port", "STORETIMESTAMP", "STOREHOSTADDRESS.addr",
    "STOREHOSTADDRESS.port", "RECONSUMETIMES", "PREPAREDTRANSACTIONOFFSET", "BODYLENGTH"};

/* ---- body CRC ---------------------------------------------------------------------------------------------- */

int rmq_body_crc(const unsigned char *p, Py_ssize_t n, long long *out)
{
    uint32_t c;
    if (RMQ.crc32 == NULL)
        c = mq_crc32_s8(0, p, n);
    else if (mq_crc32_call(RMQ.crc32, p, n, &c) < 0)
        return -1;
    *out = (long long)(c & 0x7FFFFFFFu);
    return 0;
}

/* ---- the walker -------------------------------------------------------------------------------------------- */

/* Frame the unit at u (avail bytes left in the buffer) as records.decode_common / layout.frame_tail do: a magic
 * the walk takes, TOTALSIZE within [min size, avail, max_size], no declining sysFlag bit, BODYLENGTH >= 0, and
 * the topic and properties lengths (signed) ending exactly at TOTALSIZE. The integer checks come before any
 * byte past the fixed part is read; each later read is at an index proven < total <= avail. 1 framed, else 0
 * with w->stop set. */
static inline int frame(RmqWalk *w, const unsigned char *u, Py_ssize_t avail, RmqUnit *x)
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

int rmq_walk(RmqWalk *w)
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
        if (!frame(w, u, end - w->pos, &x)) break;
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
    if (w->stop == RMQ_STOP_FRAME && w->pos >= w->limit) w->stop = RMQ_STOP_LIMIT;
    return 0;
}

/* ---- configure ------------------------------------------------------------------------------------------- */

/* The canonical text the fingerprint is taken over: "NAME=offset+size;" per field (F_* order), then the
 * framing constants. Written to buf (size n); its length, or -1 when it does not fit. */
static int layout_text(char *buf, size_t n, const RmqLayout *L)
{
    size_t at = 0;
    for (int i = 0; i < NFIELDS; i++) {
        int k = PyOS_snprintf(buf + at, n - at, "%s=%zd+%zd;", FIELD_NAMES[i], L->off[i], L->size[i]);
        if (k < 0 || (size_t)k >= n - at) return -1;
        at += (size_t)k;
    }
    int k = PyOS_snprintf(buf + at, n - at, "tl_v1=%d;tl_v2=%d;pl=%d;v1=%lld;v2=%lld;blank=%lld;min=%lld;v6=%lld",
                          L->tl_size[0], L->tl_size[1], L->pl_size, L->magic_v1, L->magic_v2, L->blank_magic,
                          L->min_size, L->v6_flags);
    if (k < 0 || (size_t)k >= n - at) return -1;
    return (int)(at + (size_t)k);
}

static void fingerprint(const RmqLayout *L, char out[17])
{
    char text[2048];
    int n = layout_text(text, sizeof text, L);
    uint64_t h = 1469598103934665603ULL;
    for (int i = 0; i < n; i++) h = (h ^ (unsigned char)text[i]) * 1099511628211ULL;
    PyOS_snprintf(out, 17, "%016llx", (unsigned long long)h);
}

static int ok_width(int s) { return s == 1 || s == 2 || s == 4; }

PyDoc_STRVAR(configure_doc,
"configure(layout, *, tl_v1, tl_v2, pl_size, magic_v1, magic_v2, blank_magic, min_size, v6_flags, crc32)\n\n"
"layout: {field name: (offset, size)} of every field of the fixed part (layout.FIXED_NAMES); the widths of\n"
"TOPICLENGTH (v1, v2) and PROPERTIESLENGTH; the magic codes, the minimum unit size, the IPv6 host flags; crc32:\n"
"a callable equal to zlib.crc32, or None for the built-in slicing-by-8. All from formats/rocketmq.py through\n"
"mqtool/rocketmq/layout.py. Raises ValueError (and every part stays off) unless the layout's fingerprint is\n"
"LAYOUT_FINGERPRINT, the one this code was written for.");

static PyObject *configure(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"layout", "tl_v1", "tl_v2", "pl_size", "magic_v1", "magic_v2", "blank_magic",
                             "min_size", "v6_flags", "crc32", NULL};
    PyObject *fields, *crc;
    RmqLayout c = {0};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!$iiiLLLLLO:configure", kwlist, &PyDict_Type, &fields,
                                     &c.tl_size[0], &c.tl_size[1], &c.pl_size, &c.magic_v1, &c.magic_v2,
                                     &c.blank_magic, &c.min_size, &c.v6_flags, &crc))
        return NULL;
    PyObject *old = RMQ.crc32;
    RMQ.configured = 0;                                     /* off until this layout is in place */
    RMQ.crc32 = NULL;
    Py_XDECREF(old);
    if (PyDict_GET_SIZE(fields) != NFIELDS) {
        PyErr_Format(PyExc_ValueError, "configure: layout has %zd fields, not the %d rmqcore reads",
                     PyDict_GET_SIZE(fields), NFIELDS);
        return NULL;
    }
    for (int i = 0; i < NFIELDS; i++) {
        PyObject *pair = PyDict_GetItemString(fields, FIELD_NAMES[i]);
        Py_ssize_t off, size;
        if (pair == NULL) return PyErr_Format(PyExc_ValueError, "configure: layout has no field %s", FIELD_NAMES[i]);
        if (!PyArg_ParseTuple(pair, "nn", &off, &size)) return NULL;
        int four = (i == F_BADDR || i == F_SADDR || i == F_BPORT || i == F_SPORT);   /* IPv4 hosts: 4+4 bytes */
        if (off < 0 || off > 4096 || (four ? size != 4 : (size != 4 && size != 8)))
            return PyErr_Format(PyExc_ValueError, "configure: field %s: unsupported offset/size %zd/%zd",
                                FIELD_NAMES[i], off, size);
        c.off[i] = off;
        c.size[i] = size;
        if (off + size > c.fixed_size) c.fixed_size = off + size;
    }
    if (!ok_width(c.tl_size[0]) || !ok_width(c.tl_size[1]) || !ok_width(c.pl_size) || c.min_size < c.fixed_size) {
        PyErr_SetString(PyExc_ValueError, "configure: bad length-field widths or minimum size");
        return NULL;
    }
    if (crc != Py_None && !PyCallable_Check(crc)) {
        PyErr_SetString(PyExc_TypeError, "configure: crc32 must be callable or None");
        return NULL;
    }
    char fp[17];
    fingerprint(&c, fp);
    if (strcmp(fp, RMQ_LAYOUT_FINGERPRINT) != 0)
        return PyErr_Format(PyExc_ValueError, "configure: layout fingerprint %s is not %s, the layout rmqcore "
                            "was written for", fp, RMQ_LAYOUT_FINGERPRINT);
    c.crc32 = crc == Py_None ? NULL : Py_NewRef(crc);
    c.configured = 1;
    RMQ = c;
    Py_RETURN_NONE;
}

/* layout_fingerprint(layout, **framing): the fingerprint configure() would compute (no check, no state). */
static PyObject *layout_fingerprint(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"layout", "tl_v1", "tl_v2", "pl_size", "magic_v1", "magic_v2", "blank_magic",
                             "min_size", "v6_flags", NULL};
    PyObject *fields;
    RmqLayout c = {0};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!$iiiLLLLL:layout_fingerprint", kwlist, &PyDict_Type, &fields,
                                     &c.tl_size[0], &c.tl_size[1], &c.pl_size, &c.magic_v1, &c.magic_v2,
                                     &c.blank_magic, &c.min_size, &c.v6_flags))
        return NULL;
    for (int i = 0; i < NFIELDS; i++) {
        PyObject *pair = PyDict_GetItemString(fields, FIELD_NAMES[i]);
        if (pair != NULL && !PyArg_ParseTuple(pair, "nn", &c.off[i], &c.size[i])) return NULL;
        if (pair == NULL) c.off[i] = c.size[i] = -1;
    }
    char fp[17];
    fingerprint(&c, fp);
    return PyUnicode_FromString(fp);
}

static PyMethodDef methods[] = {
    {"configure", (PyCFunction)(void (*)(void))configure, METH_VARARGS | METH_KEYWORDS, configure_doc},
    {"layout_fingerprint", (PyCFunction)(void (*)(void))layout_fingerprint, METH_VARARGS | METH_KEYWORDS,
     "layout_fingerprint(layout, **framing) -> str: the fingerprint configure() checks."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "rmqcore", "RocketMQ compiled core: one unit walker; verify, rebuild, dump and decode parts",
    -1, methods,
};

PyMODINIT_FUNC PyInit_rmqcore(void)
{
    mq_crc32_init();
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddStringConstant(m, "LAYOUT_FINGERPRINT", RMQ_LAYOUT_FINGERPRINT) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    static const char *names[] = {"verify", "rebuild", "dump", "decode"};
    PyObject *(*makers[])(void) = {rmq_verify_module, rmq_rebuild_module, rmq_dump_module, rmq_decode_module};
    for (int i = 0; i < 4; i++) {
        PyObject *part = makers[i]();
        if (part == NULL || PyModule_AddObject(m, names[i], part) < 0) {
            Py_XDECREF(part);
            Py_DECREF(m);
            return NULL;
        }
    }
    return m;
}
