/* rmqunit.h: the RocketMQ core every part of rmqcore shares -- the layout, the framing rule, the body CRC and
 * the one unit walker (defined in rmqcore.c).
 *
 * The layout (each field's offset and size by name, the tail's length-field widths, the magic codes, the
 * minimum size, the IPv6 host flags) is handed over once by rmqcore.configure() from mqtool/rocketmq/layout.py,
 * which derives it from formats/rocketmq.py; configure() refuses a layout whose fingerprint is not the one this
 * code was written for (RMQ_LAYOUT_FINGERPRINT in rmqcore.c), and every part then stays off.
 *
 * The walker (rmq_walk) frames each unit with the tail rule, stops at a BLANK unit, at a unit it cannot frame, at
 * the limit or the cap, computes the body CRC when the verb wants it, and hands every framed unit to the verb's
 * hook (verify checks, dump rows / NDJSON, rebuild dispatch, Message objects), which consumes it or ends the run.
 */
#ifndef RMQUNIT_H
#define RMQUNIT_H
#include "mqcore.h"             /* Python.h first; byte order, UTF-8, JSON strings, CRC-32 */

/* Fixed-part fields, by the names configure() receives them under (layout.FIXED_NAMES). */
enum { F_TOTAL, F_MAGIC, F_BODYCRC, F_QUEUEID, F_FLAG, F_QOFF, F_PHYS, F_SYSFLAG, F_BORNTS, F_BADDR, F_BPORT,
       F_STORETS, F_SADDR, F_SPORT, F_RECONSUME, F_PREPARED, F_BODYLEN, NFIELDS };

typedef struct {
    int configured;
    Py_ssize_t off[NFIELDS], size[NFIELDS], fixed_size;
    int tl_size[2], pl_size;         /* TOPICLENGTH width of v1 / v2; PROPERTIESLENGTH width */
    long long magic_v1, magic_v2, blank_magic, min_size, v6_flags;
    PyObject *crc32;                 /* a callable equal to zlib.crc32 (strong ref), or NULL: slicing-by-8 */
} RmqLayout;

extern RmqLayout RMQ;               /* rmqcore.c: set by rmqcore.configure() */

/* A framed unit: positions are relative to the unit's first byte. */
typedef struct {
    Py_ssize_t pos;                  /* where the unit starts in the buffer */
    long long total, body_len, sys_flag;
    int v2;
    Py_ssize_t tp, tl, pp;           /* topic start and length; properties start (they end at total) */
    int crc_ok;                      /* 1 / 0 when the walk computed it (RMQ_CRC_ON / _MUST), else -1 */
} RmqUnit;

static inline long long rmq_field(const unsigned char *u, int f)
{
    return mq_rd_be(u + RMQ.off[f], (int)RMQ.size[f]);   /* sizes checked by configure() */
}

/* The part called on a run: 0, or -1 with a RuntimeError set when rmqcore.configure() was not called (or
 * refused the layout). */
static inline int rmq_ready(const char *part)
{
    if (RMQ.configured) return 0;
    PyErr_Format(PyExc_RuntimeError, "rmqcore.%s: rmqcore.configure() was not called or refused the layout", part);
    return -1;
}

/* ---- the walker ---------------------------------------------------------------------------------------- */

enum { RMQ_V1 = 1, RMQ_V2 = 2 };                                  /* magics a walk takes */
enum { RMQ_CRC_OFF, RMQ_CRC_ON, RMQ_CRC_MUST };                   /* body CRC: skip / compute / stop if wrong */
enum { RMQ_STOP_LIMIT, RMQ_STOP_CAP, RMQ_STOP_BLANK, RMQ_STOP_FRAME, RMQ_STOP_CRC, RMQ_STOP_VERB };

typedef struct RmqWalk RmqWalk;
/* A verb's hook: 1 the unit is consumed, 0 the run ends before it (nothing of it kept), -1 error set. */
typedef int (*RmqHook)(RmqWalk *w, const unsigned char *u, RmqUnit *x);

struct RmqWalk {
    const unsigned char *buf;
    Py_ssize_t len;                  /* bytes in buf (end is capped to it) */
    Py_ssize_t pos, limit, end;      /* units start in [pos, limit) and end by end; pos is where the run ended */
    long long max_size;              /* TOTALSIZE above it: not framed */
    Py_ssize_t cap, count;           /* at most cap units; count consumed */
    int magics;                      /* RMQ_V1 | RMQ_V2 */
    long long decline_flags;         /* sysFlag bits that end the run (the IPv6 host flags always do) */
    int crc;                         /* RMQ_CRC_* */
    RmqHook hook;
    void *verb;                      /* the verb's state */
    int stop;                        /* RMQ_STOP_*: why the run ended */
};

/* Walk units from w->pos. 0 (w->pos, w->count, w->stop set), or -1 with an exception set (w->pos and w->count
 * are those of the units consumed before the error). */
int rmq_walk(RmqWalk *w);

/* crc32(p[0:n]) & 0x7FFFFFFF with the configured CRC (a callable, or the slicing-by-8 table). 0 or -1. */
int rmq_body_crc(const unsigned char *p, Py_ssize_t n, long long *out);

#endif
