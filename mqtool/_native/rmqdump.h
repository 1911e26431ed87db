/* Shared by rmqdump.c (row dicts) and rmqjson.c (NDJSON lines): the layout and names configure() receives,
 * and the framing rule of the common unit. See rmqdump.c for the whole story. */
#ifndef RMQDUMP_H
#define RMQDUMP_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* Fixed-part fields, in the order configure() receives their (offset, size) pairs. */
enum { F_TOTAL, F_MAGIC, F_BODYCRC, F_QUEUEID, F_FLAG, F_QOFF, F_PHYS, F_SYSFLAG, F_BORNTS, F_BADDR, F_BPORT,
       F_STORETS, F_SADDR, F_SPORT, F_RECONSUME, F_PREPARED, F_BODYLEN, NFIELDS };

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
    Py_ssize_t off[NFIELDS], size[NFIELDS], fixed_size;
    long long magic_v1, magic_v2, min_size, v6_flags, compressed_flag, comp_mask, comp_shift, txn_mask;
    unsigned char prop_sep, nv_sep;
    PyObject *keys[NKEYS];           /* interned row keys */
    PyObject *template;              /* dict: every NROWKEYS key -> None, in order (copied per row) */
    PyObject *kind, *v1, *v2;        /* "message", "v1", "v2" */
    PyObject *txn_names;             /* tuple indexed by sys_flag & txn_mask */
    PyObject *comp_names;            /* tuple indexed by (sys_flag & comp_mask) >> comp_shift */
    PyObject *prop_keys, *prop_tags, *prop_uniq, *key_sep;   /* "KEYS", "TAGS", "UNIQ_KEY", " " */
    PyObject *crc32;                 /* callable(buffer) -> int, equal to zlib.crc32 */
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

/* Shared argument check of the two row builders: configure() was called and body_mode is one we know. */
static inline int call_ready(int body_mode)
{
    if (!S.configured) {
        PyErr_SetString(PyExc_RuntimeError, "rmqdump.configure() was not called");
        return 0;
    }
    if (body_mode < 0 || body_mode > 3) {
        PyErr_SetString(PyExc_ValueError, "body_mode must be 0..3");
        return 0;
    }
    return 1;
}

/* Big-endian signed integer of 4 or 8 bytes (configure() accepts no other size). */
static inline long long be(const unsigned char *p, Py_ssize_t size)
{
    uint64_t v = 0;
    for (Py_ssize_t i = 0; i < size; i++) v = (v << 8) | p[i];
    if (size == 4) return (long long)(int32_t)(uint32_t)v;
    return (long long)(int64_t)v;
}


/* A unit framed by rmq_frame(): positions are relative to the unit's first byte. */
typedef struct {
    long long total, body_len, sys_flag;
    int v2;
    Py_ssize_t tp, tl, pp;           /* topic start and length; properties start (they end at total) */
} Unit;

/* Whether the unit at u (avail bytes left in the buffer) is one records.decode_common accepts -- v1/v2 magic,
 * IPv4 hosts, every length consistent -- and, with a body to render (body_mode != 0), not compressed.
 * The integer checks come before anything past the fixed part is read. */
static inline int rmq_frame(const unsigned char *u, Py_ssize_t avail, long long max_size, int body_mode, Unit *x)
{
    if (avail < S.fixed_size) return 0;
    long long total = be(u + S.off[F_TOTAL], S.size[F_TOTAL]);
    long long magic = be(u + S.off[F_MAGIC], S.size[F_MAGIC]);
    long long sys_flag = be(u + S.off[F_SYSFLAG], S.size[F_SYSFLAG]);
    long long body_len = be(u + S.off[F_BODYLEN], S.size[F_BODYLEN]);
    int v2 = magic == S.magic_v2;
    if (!(magic == S.magic_v1 || v2) || total < S.min_size || total > avail || total > max_size
        || (sys_flag & S.v6_flags) || body_len < 0 || S.fixed_size + body_len + 3 > total)
        return 0;
    if (body_mode != 0 && (sys_flag & S.compressed_flag))
        return 0;                                         /* bodies to decompress: the Python path */
    Py_ssize_t p = S.fixed_size + (Py_ssize_t)body_len;   /* p + 3 <= total */
    Py_ssize_t tl, tp;
    if (v2) { tl = ((Py_ssize_t)u[p] << 8) | u[p + 1]; tp = p + 2; if (tl >= 0x8000) return 0; }
    else { tl = u[p]; tp = p + 1; if (tl >= 0x80) return 0; }
    Py_ssize_t pp = tp + tl + 2;
    if (pp > total) return 0;
    Py_ssize_t pl = ((Py_ssize_t)u[pp - 2] << 8) | u[pp - 1];
    if (pl >= 0x8000 || pp + pl != total) return 0;
    x->total = total; x->body_len = body_len; x->sys_flag = sys_flag; x->v2 = v2;
    x->tp = tp; x->tl = tl; x->pp = pp;
    return 1;
}

/* crc_ok of a unit: mqtool.fastcrc.crc32(body) & 0x7FFFFFFF == BODYCRC. 1, 0, or -1 (error set). */
int rmq_crc_ok(const unsigned char *body, long long body_len, long long body_crc);
/* The JSON lane (rmqjson.c). */
PyObject *rmq_json_rows(PyObject *self, PyObject *args);
/* JSON renderings for configure() (rmqjson.c); 0 or -1 (error set). */
int rmq_json_configure(PyObject *names);

#endif
