/* mqtool._native.rmqcore: the one compiled RocketMQ module.
 *
 * This file holds what every part shares: the layout (rmqcore.configure(), by field name, refused unless its
 * fingerprint is the one this code was written for) and the body CRC; the one unit walker, rmq_walk(), is in
 * rmqunit.h. The
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

uint32_t rmq_crc32_s8(uint32_t value, const unsigned char *p, Py_ssize_t n)
{
    return mq_crc32(value, p, n);      /* carry-less multiplication where the CPU has it, else the table */
}

int rmq_body_crc(const unsigned char *p, Py_ssize_t n, long long *out)
{
    uint32_t c;
    if (RMQ.crc32 == NULL)
        c = mq_crc32(0, p, n);
    else if (mq_crc32_call(RMQ.crc32, p, n, &c) < 0)
        return -1;
    *out = (long long)(c & 0x7FFFFFFFu);
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
