/* rmqunit.h: what the RocketMQ helpers that decode whole message units share (rmqdump, rmqdecode).
 *
 * The fixed-part layout (field offsets and sizes handed over by configure() from records.FIXED, the struct
 * derived from formats.rocketmq.MessageV1, plus the magic codes, minimum size and IPv6 flags of
 * formats/rocketmq.py), the acceptance rule of records.decode_common, and the body-CRC call-back. Header-only
 * (static functions): each helper module compiles its own copy.
 */
#ifndef RMQUNIT_H
#define RMQUNIT_H
#include "mqcore.h"             /* Python.h first; byte order, UTF-8, JSON strings, CRC-32 */

/* Fixed-part fields, in the order configure() receives their (offset, size) pairs (records.FIXED_NAMES). */
enum { F_TOTAL, F_MAGIC, F_BODYCRC, F_QUEUEID, F_FLAG, F_QOFF, F_PHYS, F_SYSFLAG, F_BORNTS, F_BADDR, F_BPORT,
       F_STORETS, F_SADDR, F_SPORT, F_RECONSUME, F_PREPARED, F_BODYLEN, NFIELDS };

typedef struct {
    Py_ssize_t off[NFIELDS], size[NFIELDS], fixed_size;
    long long magic_v1, magic_v2, min_size, v6_flags;
} RmqLayout;

/* A unit accepted by rmq_accept(): positions are relative to the unit's first byte. */
typedef struct {
    long long total, body_len, sys_flag;
    int v2;
    Py_ssize_t tp, tl, pp;           /* topic start and length; properties start (they end at total) */
} RmqUnit;

static inline long long rmq_field(const RmqLayout *L, const unsigned char *u, int f)
{
    return mq_rd_be(u + L->off[f], (int)L->size[f]);   /* sizes 4 or 8 (rmq_layout_fields) */
}

/* Exactly records.decode_common's acceptance rule for the unit at u with avail bytes left in the buffer (avail
 * already capped to the real buffer): v1/v2 magic, TOTALSIZE within [min size, avail, max_size], IPv4 hosts,
 * BODYLENGTH >= 0, topic and properties lengths ending exactly at TOTALSIZE. The integer checks come before any
 * byte past the fixed part is read; each later read is at an index proven < total <= avail. */
static inline int rmq_accept(const RmqLayout *L, const unsigned char *u, Py_ssize_t avail, long long max_size,
                             RmqUnit *x)
{
    if (avail < L->fixed_size) return 0;
    long long total = rmq_field(L, u, F_TOTAL), magic = rmq_field(L, u, F_MAGIC);
    long long sys_flag = rmq_field(L, u, F_SYSFLAG), body_len = rmq_field(L, u, F_BODYLEN);
    int v2 = magic == L->magic_v2;
    if (!(magic == L->magic_v1 || v2) || total < L->min_size || total > avail || total > max_size
        || (sys_flag & L->v6_flags) || body_len < 0 || L->fixed_size + body_len + 3 > total)
        return 0;
    Py_ssize_t p = L->fixed_size + (Py_ssize_t)body_len;   /* p + 3 <= total */
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

/* Read the NFIELDS (offset, size) pairs configure() was given into L (sizes 4 or 8; the IPv4 host address and
 * port fields exactly 4) and set L->fixed_size. 0, or -1 with an exception set. */
static inline int rmq_layout_fields(RmqLayout *L, PyObject *fields)
{
    Py_ssize_t fixed = 0;
    for (int i = 0; i < NFIELDS; i++) {
        Py_ssize_t off, size;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(fields, i), "nn", &off, &size)) return -1;
        int four = (i == F_BADDR || i == F_SADDR || i == F_BPORT || i == F_SPORT);   /* IPv4 hosts: 4+4 bytes */
        if (off < 0 || (four ? size != 4 : (size != 4 && size != 8))) {
            PyErr_Format(PyExc_ValueError, "field %d: unsupported offset/size %zd/%zd", i, off, size);
            return -1;
        }
        L->off[i] = off;
        L->size[i] = size;
        if (off + size > fixed) fixed = off + size;
    }
    L->fixed_size = fixed;
    return 0;
}

/* crc32(body) & 0x7FFFFFFF == body_crc, with crc32 a callable equal to zlib.crc32 (mqtool.fastcrc.crc32) run
 * on a read-only memoryview of the body that is released at once. 1, 0, or -1 (error set). */
static inline int rmq_crc_ok_with(PyObject *crc32, const unsigned char *body, long long body_len, long long body_crc)
{
    uint32_t c;
    if (mq_crc32_call(crc32, body, (Py_ssize_t)body_len, &c) < 0) return -1;
    return (long long)(c & 0x7FFFFFFF) == body_crc;
}

#endif
