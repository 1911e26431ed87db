/* Shared by rmqdump.c (row dicts) and rmqjson.c (NDJSON lines): the layout and names configure() receives,
 * and the framing rule of the common unit. See rmqdump.c for the whole story. */
#ifndef RMQDUMP_H
#define RMQDUMP_H
#include "rmqunit.h"                 /* Python.h first; the core: layout, walker, body CRC */
#include <string.h>

/* Row keys, in the order configure() receives them (the order of Message.to_row's dict). */
enum { K_KIND, K_FILE, K_POSITION, K_OFFSET, K_SIZE, K_MAGIC, K_BODY_CRC, K_CRC_OK, K_QUEUE_ID, K_FLAG,
       K_QUEUE_OFFSET, K_PHYSICAL_OFFSET, K_SYS_FLAG, K_TRANSACTION, K_BORN_TS, K_BORN_HOST, K_STORE_TS,
       K_STORE_HOST, K_RECONSUME, K_PREPARED, K_TOPIC, K_PROPERTIES, K_KEYS, K_TAGS, K_UNIQ_KEY, K_MSG_ID,
       K_BODY_SIZE, K_COMPRESSION, K_PROPERTY_PAIRS, K_BODY, NKEYS };
#define NROWKEYS K_PROPERTY_PAIRS    /* keys every row has; the last two are added when they apply */

#define NCACHE 16                    /* property names remembered (they repeat from message to message) */
#define MAXNAME 64

typedef struct {
    int configured;
    Py_ssize_t last_nprops;          /* property count of the last message (to size the next dict) */
    long long compressed_flag, comp_mask, comp_shift, txn_mask;
    unsigned char prop_sep, nv_sep;
    PyObject *keys[NKEYS];           /* interned row keys */
    PyObject *template;              /* dict: every NROWKEYS key -> None, in order (copied per row) */
    PyObject *kind, *v1, *v2;        /* "message", "v1", "v2" */
    PyObject *txn_names;             /* tuple indexed by sys_flag & txn_mask */
    PyObject *comp_names;            /* tuple indexed by (sys_flag & comp_mask) >> comp_shift */
    PyObject *prop_keys, *prop_tags, *prop_uniq, *key_sep;   /* "KEYS", "TAGS", "UNIQ_KEY", " " */
    /* small caches: the last topic and hosts, and recent property names (owned references) */
    unsigned char topic_raw[256]; Py_ssize_t topic_len; PyObject *topic;
    unsigned char bhost_raw[8]; PyObject *bhost;
    unsigned char shost_raw[8]; PyObject *shost;
    unsigned char name_raw[NCACHE][MAXNAME]; Py_ssize_t name_len[NCACHE]; PyObject *name[NCACHE]; int name_next;
    /* JSON renderings (rmqjson.c): "key": prefixes, and the values of the name tables */
    char *jkey[NKEYS]; Py_ssize_t jkey_len[NKEYS];
    PyObject *jkind, *jv1, *jv2, *jtxn, *jcomp;       /* bytes, bytes, bytes, tuple of bytes, tuple of bytes */
    const char *tags_u8, *uniq_u8, *keys_u8; Py_ssize_t tags_n, uniq_n, keys_n; unsigned char key_sep_c;
} State;

extern State S;

/* Shared argument check of the two row builders: the core and configure() were called, body_mode is known. */
static inline int call_ready(int body_mode)
{
    if (rmq_ready("dump") < 0) return 0;
    if (!S.configured) {
        PyErr_SetString(PyExc_RuntimeError, "rmqcore.dump.configure() was not called");
        return 0;
    }
    if (body_mode < 0 || body_mode > 3) {
        PyErr_SetString(PyExc_ValueError, "body_mode must be 0..3");
        return 0;
    }
    return 1;
}

typedef RmqUnit Unit;

/* What a dump row needs of a unit the walker framed (records.decode_common's rule): a body to render
 * (body_mode != 0) not compressed (those bodies are decompressed by the Python path), and text (topic,
 * properties, a body rendered as text) that is valid UTF-8: other bytes are given losslessly (base64 with an
 * encoding marker) by the Python path. */
static inline int rmq_dump_ok(const unsigned char *u, const Unit *x, int body_mode)
{
    if (body_mode != 0 && (x->sys_flag & S.compressed_flag)) return 0;
    return mq_utf8_ok(u + x->tp, x->tl) && mq_utf8_ok(u + x->pp, (Py_ssize_t)x->total - x->pp)
        && (body_mode != 1 || mq_utf8_ok(u + RMQ.fixed_size, (Py_ssize_t)x->body_len));
}

/* The properties p[0:n] split as records.property_dict does (segments at prop_sep, each at its first nv_sep, a
 * pair kept when name and value are both non-empty), as pointers into p. */
#define MAXPAIRS 64
typedef struct {
    const unsigned char *np[MAXPAIRS], *vp[MAXPAIRS];
    Py_ssize_t nn[MAXPAIRS], vn[MAXPAIRS];
    int n;
} Pairs;

/* The index of property `name` among the kept pairs, or -1. */
static inline int find_pair(const Pairs *P, const char *name, Py_ssize_t len)
{
    for (int i = 0; i < P->n; i++)
        if (P->nn[i] == len && P->np[i][0] == (unsigned char)name[0] && memcmp(P->np[i], name, (size_t)len) == 0)
            return i;                                    /* (names are never empty: a first byte to compare) */
    return -1;
}

/* 1: every pair in *P, no name repeated; 0: a name repeats or there are more than MAXPAIRS pairs (the row
 * then takes the dict path, which keeps every pair). */
static inline int rmq_pairs(const unsigned char *p, Py_ssize_t n, Pairs *P)
{
    P->n = 0;
    for (Py_ssize_t i = 0; i <= n;) {
        const unsigned char *seg = p + i;
        const unsigned char *sep = memchr(seg, S.prop_sep, (size_t)(n - i));
        Py_ssize_t len = sep ? (Py_ssize_t)(sep - seg) : n - i;
        const unsigned char *nv = memchr(seg, S.nv_sep, (size_t)len);
        if (nv != NULL && nv > seg && nv < seg + len - 1) {
            Py_ssize_t l = (Py_ssize_t)(nv - seg);
            if (P->n == MAXPAIRS || find_pair(P, (const char *)seg, l) >= 0) return 0;
            P->np[P->n] = seg; P->nn[P->n] = l; P->vp[P->n] = nv + 1; P->vn[P->n] = len - l - 1;
            P->n++;
        }
        i += len + 1;
    }
    return 1;
}

/* The NDJSON lines (rmqjson.c): a growing buffer, and the line of one unit appended to it (1 written, 0 left to
 * the other paths with nothing written, -1 error set). */
typedef struct {
    char *p; Py_ssize_t n, cap;
    PyObject *ba;                    /* NULL: p is PyMem memory; else p is this bytearray's storage (cap its size) */
} JB;
int rmq_json_unit(JB *b, const unsigned char *u, const Unit *x, long long base, PyObject *file_json, int body_mode,
                  const unsigned char *buf_end);
/* JSON renderings for configure() (rmqjson.c): kind_json, v1_json, v2_json, txn_json, comp_json; 0 or -1. */
int rmq_json_configure(PyObject *const js[5]);

#endif
