/* rmqrebuild: the common case of RocketMQ's dispatch loop (rebuild-index) in C, in two steps.
 *
 * Python (mqtool/rocketmq/rebuild/) owns every piece of state and dispatches whatever this helper declines.
 * The helper is the rebuild hook of the core's one unit walker (rmq_walk, rmqunit.h), which frames each unit
 * with the layout rmqcore.configure() got from formats/rocketmq.py; the consumequeue unit and index entry
 * layouts come by field name through this part's configure(). A unit's dispatch splits cleanly in two:
 *   - what it *says* depends only on its bytes: parse() (GIL released, in worker threads, over ranges of a
 *     segment) finds TAGS / KEYS / UNIQ_KEY in the properties exactly as dispatch.quick_props does, and
 *     records per unit its offsets, times, tags code (Java String.hashCode of TAGS), transaction class,
 *     a chunk-local queue number and the index key hashes (topic#UNIQ_KEY, topic#each KEYS token);
 *   - what it *does* depends on everything before: apply() (in commitlog order, GIL held) appends its
 *     consumequeue unit to the queue's bytearray and updates that queue's state (max physical offset, write
 *     position) in an int64 array Python owns, and puts its keys into the current index file (the slot chain
 *     in the slot array, the entries appended to the file's bytearray, the header fields in an int64 array:
 *     IndexFileBuilder.put_keys).
 * Python dispatches a unit instead ("declines") when there is any doubt about the bytes (bad magic or lengths,
 * IPv6 hosts), for the schedule topic, multi-dispatch properties, empty property values, a topic/tags/keys
 * value that is not clean UTF-8 (Java hashes the UTF-16 units of the decoded text; clean UTF-8, astral
 * characters included, is hashed here), more keys than a record holds (parse marks these), and for a queue
 * not registered yet or one whose next unit would not simply be appended (skip, gap, repeat, file full), an
 * index file that is new or full or would be filled by this message (apply stops there). Every length is
 * checked against the unit and the buffer before it is read; no pointer into any buffer is kept past a call.
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
    RmqNames names;            /* TAGS, KEYS, UNIQ_KEY, the multi-dispatch name (quick_props) */
} cfg;

#define wr mq_wr_be          /* mqcore.h */

/* Java String.hashCode step over ASCII bytes (one UTF-16 unit per byte). */
static inline uint32_t jhash(uint32_t h, const uint8_t *p, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++)
        h = h * 31u + p[i];
    return h;
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
    const char *const names[4] = {cfg.s[S_TAGS], cfg.s[S_KEYS], cfg.s[S_UNIQ], cfg.s[S_MULTI]};
    const Py_ssize_t lens[4] = {cfg.slen[S_TAGS], cfg.slen[S_KEYS], cfg.slen[S_UNIQ], cfg.slen[S_MULTI]};
    rmq_names_init(&cfg.names, 4, names, lens, (uint8_t)cfg.s[S_NVSEP][0]);
    cfg.ready = 1;
    Py_RETURN_NONE;
}

/* ---- properties (dispatch.quick_props over bytes) ------------------------------------------------ */

typedef RmqProp Value;          /* rmqunit.h: n < 0 absent */

/* Fill tags/keys/uniq with the last pair of each (rmq_props, empty values kept). Returns 0 when the message
 * needs the full parse (a multi-dispatch property, or an empty value: an earlier pair may win), 1 otherwise. */
static int quick_props(const uint8_t *p, Py_ssize_t n, Value *v)
{
    Value r[4];
    rmq_props(p, n, (uint8_t)cfg.s[S_PROPSEP][0], &cfg.names, RMQ_PROPS_KEEP_EMPTY, r);
    if (r[3].n >= 0)
        return 0;
    for (int i = 0; i < 3; i++) {
        if (r[i].n == 0)
            return 0;
        v[i] = r[i];
    }
    return 1;
}

/* Append n bytes to a bytearray; pointer to the new bytes, NULL with an exception set.
 * A bytearray grown a unit at a time reallocates by 1/8 (CPython's bytearray_resize): a 6 MB consumequeue
 * file would be copied ~50 MB over in ~100 reallocations. Room is made instead by as much again as the array
 * holds (at most 1 MiB more at a time, at least a page): an upsize that large is given exactly, and the
 * resize back to the size wanted (at least half of it) only sets the size, so the room stays. */
static uint8_t *grow(PyObject *ba, Py_ssize_t n)
{
    const Py_ssize_t old = PyByteArray_GET_SIZE(ba), want = old + n;
    if (want >= ((PyByteArrayObject *)ba)->ob_alloc) {
        Py_ssize_t more = old < (1 << 20) ? old : (1 << 20);
        if (more < 4096)
            more = 4096;
        if (more < n)
            more = n;
        if (PyByteArray_Resize(ba, old + more) < 0)
            return NULL;
    }
    if (PyByteArray_Resize(ba, want) < 0)
        return NULL;
    return (uint8_t *)PyByteArray_AS_STRING(ba) + old;
}

/* ---- the two-step lane: parse (stateless, GIL released, any thread) + apply (state, in commitlog order) ----
 *
 * A unit's dispatch splits cleanly (see the top of this file): what it *says* depends only on its bytes,
 * what it *does* on everything before it.
 *
 *   parse(buf, start, limit, end, max_size, with_index) -> chunk    (releases the GIL: workers run it in
 *       parallel over ranges of a segment) walks the units that start in [start, limit) and writes one fixed
 *       record per unit (position, offsets, times, tags code, a chunk-local queue number, the key hashes).
 *       A unit whose dispatch is not the common case (the declines that need no state:
 *       schedule topic, multi-dispatch, empty values, text that is not clean UTF-8, too many keys) gets a
 *       record that only marks it (apply() stops there and Python dispatches it; the chunk goes on). It stops
 *       (and the chunk says where and why) at a unit the walker cannot frame, or when the chunk's queue table
 *       is full.
 *   apply(buf, chunk, cursor, limit, gslots, keymap, bufs, qstate, istate, slots, entries, ts) -> ...
 *       applies the records from `cursor` in order to the state Python shares, with the state checks
 *       (a queue not registered, skip / gap / repeat / file full, no index file or one that is full or this
 *       message would fill: it stops there and Python dispatches that unit), prefetching the slot of the keys
 *       a few records ahead (the slot table is large; its loads are the chain's cost).
 *   find_boundary(buf, base, start, stop, end, max_size) -> position or -1: the first position in
 *       [start, stop) where a unit frames and its PHYSICALOFFSET is base + position (where a worker's range
 *       may start). A chunk is used only where the commitlog walk arrives exactly at its start, so a wrong
 *       guess costs time, never bytes.
 */

#include <sys/mman.h>

enum { PF_CQ = 1, PF_RB = 2, PF_PY = 4 };               /* record flags: consumequeue unit; rollback;
                                                           * Python dispatches it */
enum { CH_LIMIT, CH_FRAME, CH_DECLINE, CH_FULL, CH_ERROR };  /* why a chunk ended */
enum { AP_EXHAUSTED, AP_LIMIT, AP_DECLINE, AP_MISS };  /* why apply() stopped */
#define CH_MAGIC 0x524d5152434b3031LL                   /* "RMQRCK01" */
#define QT_SIZE 1024                                    /* queue table slots per chunk (open addressing) */
#define QT_MAX 512                                      /* distinct queues per chunk */

typedef struct {
    int64_t pos, phys, ts, qoff;
    int32_t total, tags, key0;
    uint16_t queue, nkeys;
    uint8_t flags, pad[7];
} Rec;

typedef struct { int64_t tpos; int32_t tl, qid; } QKey;

typedef struct { int64_t magic, n, nh, nq, start, stop, why, limit; } ChunkHead;

#ifndef PF_DIST
#define PF_DIST 8192            /* bytes the parse prefetches ahead of the unit it reads (every cache line) */
#endif

typedef struct {
    const uint8_t *buf;
    Py_ssize_t pf, pf_end;      /* next byte to prefetch; where the range's bytes end */
    int with_index;
    Rec *recs;
    uint32_t *h;
    Py_ssize_t n, cap, nh, hcap;
    QKey q[QT_MAX];
    int nq;
    int16_t table[QT_SIZE];
    int full, oom;
} ParseRun;

/* The chunk-local number of the queue (topic bytes at tp, queueId), -1 when the table is full. */
static int parse_queue(ParseRun *p, const uint8_t *topic, Py_ssize_t tpos, Py_ssize_t tl, int32_t qid)
{
    uint32_t h = jhash((uint32_t)qid * 2654435761u, topic, tl);
    for (uint32_t i = (h ^ (h >> 10)) & (QT_SIZE - 1);; i = (i + 1) & (QT_SIZE - 1)) {
        int16_t k = p->table[i];
        if (k < 0) {
            if (p->nq >= QT_MAX)
                return -1;
            p->q[p->nq] = (QKey){tpos, (int32_t)tl, qid};
            p->table[i] = (int16_t)p->nq;
            return p->nq++;
        }
        const QKey *e = &p->q[k];
        if (e->qid == qid && e->tl == tl && memcmp(p->buf + e->tpos, topic, (size_t)tl) == 0)
            return k;
    }
}

/* Room for one more record and nkeys hashes; NULL (oom set) when memory runs out. */
static Rec *new_rec(ParseRun *p, int nkeys)
{
    if (p->n == p->cap) {
        Py_ssize_t cap = p->cap ? 2 * p->cap : 1024;
        Rec *r = realloc(p->recs, (size_t)cap * sizeof *r);
        if (r == NULL) {
            p->oom = 1;
            return NULL;
        }
        p->recs = r;
        p->cap = cap;
    }
    if (p->nh + nkeys > p->hcap) {
        Py_ssize_t cap = p->hcap ? 2 * p->hcap : 2048;
        while (cap < p->nh + nkeys)
            cap *= 2;
        uint32_t *h = realloc(p->h, (size_t)cap * sizeof *h);
        if (h == NULL) {
            p->oom = 1;
            return NULL;
        }
        p->h = h;
        p->hcap = cap;
    }
    Rec *r = &p->recs[p->n++];
    memset(r, 0, sizeof *r);
    return r;
}

/* A framed unit whose dispatch the records cannot say (schedule topic, multi-dispatch, empty values, text
 * that is not clean UTF-8, too many keys, odd offsets): a record that only marks it, so apply() stops there
 * for Python to dispatch it, and the chunk goes on after it. 1, or 0 when memory runs out. */
static int python_rec(ParseRun *p, RmqUnit *x)
{
    Rec *r = new_rec(p, 0);
    if (r == NULL)
        return 0;
    r->pos = x->pos;
    r->total = (int32_t)x->total;
    r->flags = PF_PY;
    r->key0 = (int32_t)p->nh;
    return 1;
}

/* One framed unit to a record (or a record that hands it to Python); 0 ends the chunk before it (the queue
 * table is full, or memory ran out). No Python object is touched: the GIL is not held. */
static int parse_unit(RmqWalk *w, const unsigned char *u, RmqUnit *x)
{
    ParseRun *p = w->verb;
    const int64_t total = x->total, tl = x->tl;
    const uint8_t *topic = u + x->tp, *props = u + x->pp;
    Value v[3];
    /* The walk is a chain of dependent loads (a unit's TOTALSIZE says where the next starts) that the
     * hardware cannot run ahead of: stream every cache line a few pages ahead instead, so the headers and
     * tails it reads are in cache when it gets there. */
    Py_ssize_t want = x->pos + (Py_ssize_t)total + PF_DIST;
    if (want > p->pf_end)
        want = p->pf_end;
    for (; p->pf < want; p->pf += 64)
        __builtin_prefetch(p->buf + p->pf, 0, 0);
    if (total > INT32_MAX)
        return 0;
    if (tl == cfg.slen[S_SCHEDULE] && memcmp(topic, cfg.s[S_SCHEDULE], (size_t)tl) == 0)
        return python_rec(p, x);
    if (!quick_props(props, total - x->pp, v))
        return python_rec(p, x);
    if ((v[0].n > 0 && !mq_utf8_ok(v[0].p, v[0].n)) || (v[1].n > 0 && !mq_utf8_ok(v[1].p, v[1].n)) ||
        (v[2].n > 0 && !mq_utf8_ok(v[2].p, v[2].n)))
        return python_rec(p, x);
    int64_t qid = rmq_field(u, F_QUEUEID), phys = rmq_field(u, F_PHYS);
    if (phys < 0 || phys > INT64_MAX - total || qid < INT32_MIN || qid > INT32_MAX)
        return python_rec(p, x);
    int64_t tt = x->sys_flag & cfg.tx_mask;
    int q = parse_queue(p, topic, x->pos + x->tp, (Py_ssize_t)tl, (int32_t)qid);
    if (q < 0) {
        p->full = 1;
        return 0;
    }
    int32_t hs[MAXKEYS];
    int nkeys = 0;
    if (p->with_index) {
        uint32_t hp = 0;
        if (!rmq_utf16_hash(&hp, topic, tl) ||
            !rmq_utf16_hash(&hp, (const uint8_t *)cfg.s[S_JOIN], cfg.slen[S_JOIN]))
            return python_rec(p, x);    /* the topic is not clean UTF-8: Python hashes its decoded form */
        nkeys = rmq_index_hashes(hp, v[2].n > 0 ? v[2].p : NULL, v[2].n > 0 ? v[2].n : 0,
                                 v[1].n > 0 ? v[1].p : NULL, v[1].n > 0 ? v[1].n : 0,
                                 (uint8_t)cfg.s[S_KEYSEP][0], hs, MAXKEYS);
        if (nkeys < 0)
            return python_rec(p, x);    /* more keys than a record holds */
    }
    Rec *r = new_rec(p, nkeys);
    if (r == NULL)
        return 0;
    r->pos = x->pos;
    r->phys = phys;
    r->ts = rmq_field(u, F_STORETS);
    r->qoff = rmq_field(u, F_QOFF);
    r->total = (int32_t)total;
    if (v[0].n > 0) {
        uint32_t th = 0;
        rmq_utf16_hash(&th, v[0].p, v[0].n);            /* validated above */
        r->tags = (int32_t)th;
    }
    r->queue = (uint16_t)q;
    r->flags = (uint8_t)(((tt == cfg.tx_not || tt == cfg.tx_commit) ? PF_CQ : 0) | (tt == cfg.tx_rb ? PF_RB : 0));
    r->key0 = (int32_t)p->nh;
    r->nkeys = (uint16_t)nkeys;
    memcpy(p->h + p->nh, hs, (size_t)nkeys * sizeof *hs);
    p->nh += nkeys;
    return 1;
}

/* Only for a read-only file map (MADV_DONTNEED on anonymous memory would zero it): populate the pages of
 * [from, to) in one call (cheaper than a fault per page), or
 * release the whole pages inside it once read (MADV_DONTNEED on a read-only file map only unmaps them: the
 * page cache keeps them and a later access faults them back in; this keeps the walk's resident memory to
 * the ranges being parsed, as mqtool/pages.py does for the Python walk). Ignored where refused (not a map:
 * EINVAL/ENOMEM; a kernel without MADV_POPULATE_READ). */
static void pages_advise(const uint8_t *buf, Py_ssize_t from, Py_ssize_t to, int release)
{
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)(buf + from), b = (uintptr_t)(buf + to);
    if (to <= from)
        return;
    if (release) {
        a = (a + pg - 1) & ~(pg - 1);            /* whole pages only: the neighbours may still be read */
        b &= ~(pg - 1);
        if (b > a)
            (void)madvise((void *)a, (size_t)(b - a), MADV_DONTNEED);
        return;
    }
#ifdef MADV_POPULATE_READ
    a &= ~(pg - 1);
    (void)madvise((void *)a, (size_t)(b - a), MADV_POPULATE_READ);
#endif
}

PyDoc_STRVAR(parse_doc,
"parse(buf, start, limit, end, max_size, with_index, file_map=False) -> chunk (bytes)\n\n"
"The dispatch records of the units that start in [start, limit) and end by end (see the comment above\n"
"parse_unit in rmqrebuild.c), up to the first unit the records cannot say; the GIL is released meanwhile.\n"
"file_map: buf is a read-only file map (mmap.ACCESS_READ) whose pages of the range are populated first\n"
"and unmapped after (see pages_advise); never for other memory (MADV_DONTNEED would discard it).");

static PyObject *parse(PyObject *self, PyObject *args)
{
    PyObject *bufobj;
    Py_ssize_t start, limit, end;
    long long max_size;
    int with_index, file_map = 0;
    if (!PyArg_ParseTuple(args, "OnnnLp|p:parse", &bufobj, &start, &limit, &end, &max_size, &with_index, &file_map))
        return NULL;
    if (rmq_ready("rebuild") < 0)
        return NULL;
    if (!cfg.ready) {
        PyErr_SetString(PyExc_RuntimeError, "rmqcore.rebuild.configure() was not called");
        return NULL;
    }
    Py_buffer b;
    if (PyObject_GetBuffer(bufobj, &b, PyBUF_SIMPLE) < 0)
        return NULL;
    ParseRun *p = PyMem_RawCalloc(1, sizeof *p);
    if (p == NULL) {
        PyBuffer_Release(&b);
        return PyErr_NoMemory();
    }
    p->buf = b.buf;
    p->with_index = with_index;
    p->pf = start;
    p->pf_end = end > b.len ? b.len : end;
    memset(p->table, 0xff, sizeof p->table);
    if (end > b.len)
        end = b.len;
    if (limit > end)
        limit = end;
    if (start < 0 || start > end)
        limit = start;                                  /* nonsense bounds: consume nothing */
    RmqWalk w = {.buf = b.buf, .len = b.len, .pos = start, .limit = limit, .end = end, .max_size = max_size,
                 .cap = PY_SSIZE_T_MAX, .magics = RMQ_V1 | RMQ_V2, .crc = RMQ_CRC_OFF, .hook = parse_unit,
                 .verb = p};
    Py_BEGIN_ALLOW_THREADS
    const Py_ssize_t upto = limit < end - 65536 ? limit + 65536 : end;     /* (the last unit runs on) */
    if (file_map && limit > start)
        pages_advise(b.buf, start, upto, 0);
    rmq_walk(&w);                                       /* CRC off: cannot fail */
    if (file_map && limit > start)
        pages_advise(b.buf, start, w.pos < upto ? w.pos : upto, 1);
    Py_END_ALLOW_THREADS
    PyObject *out = NULL;
    if (p->oom) {
        PyErr_NoMemory();
        goto done;
    }
    ChunkHead head = {CH_MAGIC, p->n, p->nh, p->nq, start, w.pos, CH_LIMIT, limit};
    if (w.pos >= limit)                 /* (w.stop keeps the last frame's note when the loop ran out) */
        head.why = CH_LIMIT;
    else if (w.stop == RMQ_STOP_VERB)
        head.why = p->full ? CH_FULL : CH_DECLINE;
    else
        head.why = CH_FRAME;
    Py_ssize_t hbytes = (p->nh * (Py_ssize_t)sizeof(uint32_t) + 7) & ~(Py_ssize_t)7;
    Py_ssize_t size = (Py_ssize_t)sizeof head + p->n * (Py_ssize_t)sizeof(Rec) + hbytes +
                      p->nq * (Py_ssize_t)sizeof(QKey);
    out = PyBytes_FromStringAndSize(NULL, size);
    if (out == NULL)
        goto done;
    char *o = PyBytes_AS_STRING(out);
    memset(o, 0, (size_t)size);
    memcpy(o, &head, sizeof head);
    o += sizeof head;
    if (p->n)
        memcpy(o, p->recs, (size_t)p->n * sizeof(Rec));
    o += p->n * (Py_ssize_t)sizeof(Rec);
    if (p->nh)
        memcpy(o, p->h, (size_t)p->nh * sizeof(uint32_t));
    o += hbytes;
    if (p->nq)
        memcpy(o, p->q, (size_t)p->nq * sizeof(QKey));
done:
    free(p->recs);
    free(p->h);
    PyMem_RawFree(p);
    PyBuffer_Release(&b);
    return out;
}

/* The parts of a chunk, checked against its length; -1 with ValueError set when it is not one. */
typedef struct { const ChunkHead *head; const Rec *recs; const uint32_t *h; const QKey *q; } Chunk;

static int chunk_view(const uint8_t *c, Py_ssize_t len, Py_ssize_t buflen, Chunk *out)
{
    if (len < (Py_ssize_t)sizeof(ChunkHead))
        goto bad;
    const ChunkHead *head = (const ChunkHead *)c;
    if (head->magic != CH_MAGIC || head->n < 0 || head->nh < 0 || head->nq < 0 || head->nq > QT_MAX ||
        head->n > len || head->nh > len)
        goto bad;
    Py_ssize_t hbytes = (head->nh * (Py_ssize_t)sizeof(uint32_t) + 7) & ~(Py_ssize_t)7;
    if ((Py_ssize_t)sizeof *head + head->n * (Py_ssize_t)sizeof(Rec) + hbytes + head->nq * (Py_ssize_t)sizeof(QKey)
        != len)
        goto bad;
    out->head = head;
    out->recs = (const Rec *)(c + sizeof *head);
    out->h = (const uint32_t *)((const uint8_t *)out->recs + head->n * sizeof(Rec));
    out->q = (const QKey *)((const uint8_t *)out->h + hbytes);
    for (Py_ssize_t i = 0; i < head->nq; i++)
        if (out->q[i].tpos < 0 || out->q[i].tl < 0 || out->q[i].tpos > buflen - out->q[i].tl)
            goto bad;
    return 0;
bad:
    PyErr_SetString(PyExc_ValueError, "apply: not a chunk from parse()");
    return -1;
}

PyDoc_STRVAR(apply_doc,
"apply(buf, chunk, cursor, at, limit, gslots, keymap, bufs, qstate, istate, slots, entries, ts)\n"
"    -> (cursor, pos, messages, cq_units, last_ts, last_cq_ts, max_end, index_entries, why)\n\n"
"Apply the chunk's records from the unit at `at` (the cursor moves past the records before it) to the units\n"
"starting before limit, to the state Python shares (rebuild/native_lane.SharedState); gslots (array 'q', one per chunk queue, -1\n"
"unknown) caches the queue slots of keymap. pos: the unit where it stopped (the chunk's end once exhausted);\n"
"why: 0 exhausted, 1 limit, 2 Python must dispatch the unit at pos, 3 `at` is no unit of this chunk.");

static PyObject *apply(PyObject *self, PyObject *args)
{
    PyObject *bufobj, *chunkobj, *gslobj, *keymap, *bufs, *qstobj, *istobj, *slotsobj, *entries, *ts;
    Py_ssize_t cursor, at, limit;
    if (!PyArg_ParseTuple(args, "OSnnnOO!O!OOOOO:apply", &bufobj, &chunkobj, &cursor, &at, &limit, &gslobj, &PyDict_Type,
                          &keymap, &PyList_Type, &bufs, &qstobj, &istobj, &slotsobj, &entries, &ts))
        return NULL;
    if (!cfg.ready) {
        PyErr_SetString(PyExc_RuntimeError, "rmqcore.rebuild.configure() was not called");
        return NULL;
    }
    const int with_index = istobj != Py_None;
    if (with_index && (!PyByteArray_CheckExact(entries) || (ts != Py_None && !PyByteArray_CheckExact(ts)))) {
        PyErr_SetString(PyExc_TypeError, "apply: entries and ts must be bytearrays");
        return NULL;
    }
    Py_buffer b = {0}, gsb = {0}, qsb = {0}, isb = {0}, slb = {0};
    PyObject *result = NULL;
    Chunk c;
    int64_t is[IS_N];
    int is_loaded = 0, why = AP_EXHAUSTED;
    Py_ssize_t ncq = 0, added = 0, done_n = 0;
    int64_t last_ts = 0, last_cq_ts = 0, max_end = 0;
    if (PyObject_GetBuffer(bufobj, &b, PyBUF_SIMPLE) < 0 || PyObject_GetBuffer(gslobj, &gsb, PyBUF_WRITABLE) < 0 ||
        PyObject_GetBuffer(qstobj, &qsb, PyBUF_WRITABLE) < 0)
        goto done;
    if (with_index && (PyObject_GetBuffer(istobj, &isb, PyBUF_WRITABLE) < 0 ||
                       PyObject_GetBuffer(slotsobj, &slb, PyBUF_WRITABLE) < 0))
        goto done;
    if (chunk_view((const uint8_t *)PyBytes_AS_STRING(chunkobj), PyBytes_GET_SIZE(chunkobj), b.len, &c) < 0)
        goto done;
    const Py_ssize_t n = c.head->n, nq = c.head->nq;
    if (gsb.len != nq * (Py_ssize_t)sizeof(int64_t) || cursor < 0 || cursor > n) {
        PyErr_SetString(PyExc_ValueError, "apply: gslots / cursor do not fit the chunk");
        goto done;
    }
    int64_t *gslots = gsb.buf, *qs_all = qsb.buf;
    Py_ssize_t nslots = qsb.len / (Py_ssize_t)(sizeof(int64_t) * QS_N);
    if (nslots > PyList_GET_SIZE(bufs))
        nslots = PyList_GET_SIZE(bufs);
    int32_t *slots = NULL;
    int64_t slot_num = 0;
    if (with_index) {
        if (isb.len < (Py_ssize_t)sizeof is) {
            PyErr_SetString(PyExc_ValueError, "apply: index state too short");
            goto done;
        }
        memcpy(is, isb.buf, sizeof is);
        is_loaded = 1;
        slots = (int32_t *)slb.buf;
        if (is[IS_SLOTS] <= 0 || is[IS_SLOTS] > INT32_MAX || is[IS_SLOTS] * 4 != slb.len || is[IS_NUM] > INT32_MAX ||
            is[IS_COUNT] < 2)
            is[IS_MODE] = 0;
        slot_num = is[IS_SLOTS];
    }
    while (cursor < n && c.recs[cursor].pos < at)      /* units Python dispatched since the last call */
        cursor++;
    if ((cursor < n && c.recs[cursor].pos != at) || (cursor == n && c.head->stop != at)) {
        why = AP_MISS;                  /* the walk is not at a unit of this chunk */
        goto out;
    }
    enum { AHEAD = 8 };
    if (with_index && is[IS_MODE])             /* start the slot loads of the first records */
        for (Py_ssize_t j = cursor; j < n && j < cursor + AHEAD; j++)
            for (int k = 0; k < c.recs[j].nkeys && c.recs[j].key0 + k < c.head->nh; k++)
                __builtin_prefetch(&slots[c.h[c.recs[j].key0 + k] % slot_num], 1);
    for (; cursor < n; cursor++) {
        const Rec *rc = &c.recs[cursor];
        if (rc->pos >= limit) {
            why = AP_LIMIT;
            break;
        }
        if (rc->flags & PF_PY) {
            why = AP_DECLINE;            /* a unit the records cannot say */
            break;
        }
        if (rc->queue >= nq || rc->key0 < 0 || rc->key0 > c.head->nh - rc->nkeys || rc->total <= 0) {
            PyErr_SetString(PyExc_ValueError, "apply: not a chunk from parse()");
            goto done;
        }
        const int64_t phys = rc->phys, total = rc->total, store_ts = rc->ts, qoff = rc->qoff;
        const int64_t end = (int64_t)((uint64_t)phys + (uint64_t)total);     /* a Java long: a hostile one wraps */
        /* consumequeue: decide */
        int64_t *qs = NULL;
        PyObject *qbuf = NULL;
        if (rc->flags & PF_CQ) {
            int64_t slot = gslots[rc->queue];
            if (slot < 0) {
                const QKey *k = &c.q[rc->queue];
                PyObject *key = PyBytes_FromStringAndSize(NULL, k->tl + 4);
                if (key == NULL)
                    goto done;
                memcpy(PyBytes_AS_STRING(key), (const uint8_t *)b.buf + k->tpos, (size_t)k->tl);
                wr((uint8_t *)PyBytes_AS_STRING(key) + k->tl, 4, k->qid);
                PyObject *val = PyDict_GetItemWithError(keymap, key);      /* borrowed */
                Py_DECREF(key);
                if (val == NULL && PyErr_Occurred())
                    goto done;
                if (val != NULL) {
                    slot = PyLong_AsSsize_t(val);
                    if (slot == -1 && PyErr_Occurred())
                        goto done;
                    gslots[rc->queue] = slot;
                }
            }
            if (slot < 0 || slot >= nslots) {
                why = AP_DECLINE;        /* a queue Python has not registered yet */
                break;
            }
            qs = qs_all + slot * QS_N;
            qbuf = PyList_GET_ITEM(bufs, slot);
            if (!PyByteArray_CheckExact(qbuf) || end <= qs[QS_MAXPHYS] || qs[QS_WRITE] < 0 ||
                qs[QS_WRITE] >= qs[QS_FILE_END] || (qoff != 0 && qoff != qs[QS_WRITE])) {
                why = AP_DECLINE;        /* skip / first unit / file full / gap / repeat: Python's QueueBuilder */
                break;
            }
        }
        /* index: decide */
        Py_ssize_t nkeys = 0;
        if (with_index) {
            if (!is[IS_MODE] || is[IS_COUNT] >= is[IS_NUM]) {
                why = AP_DECLINE;        /* no file yet, a fresh one, or a full one to roll: Python */
                break;
            }
            if (!(phys < is[IS_END_PHY] || (rc->flags & PF_RB))) {
                nkeys = rc->nkeys;
                if (nkeys > is[IS_NUM] - is[IS_COUNT]) {
                    why = AP_DECLINE;    /* this message fills the file: Python rolls it */
                    break;
                }
            }
            if (is[IS_MODE] && cursor + AHEAD < n) {    /* the slot loads of a record a few ahead */
                const Rec *ra = &c.recs[cursor + AHEAD];
                for (int k = 0; k < ra->nkeys && ra->key0 + k < c.head->nh; k++)
                    __builtin_prefetch(&slots[c.h[ra->key0 + k] % slot_num], 1);
            }
        }
        /* commit */
        if (qs != NULL) {
            uint8_t *o = grow(qbuf, cfg.unit_size);
            if (o == NULL)
                goto done;
            memset(o, 0, (size_t)cfg.unit_size);
            wr(o + cfg.unit[U_OFF].off, cfg.unit[U_OFF].size, phys);
            wr(o + cfg.unit[U_SIZE].off, cfg.unit[U_SIZE].size, total);
            wr(o + cfg.unit[U_TAGS].off, cfg.unit[U_TAGS].size, rc->tags);
            qs[QS_MAXPHYS] = end;
            qs[QS_WRITE] += 1;
            qs[QS_UNITS] += 1;
            ncq++;
            last_cq_ts = store_ts;
        }
        if (nkeys > 0) {
            const uint32_t *hs = c.h + rc->key0;
            int64_t count = is[IS_COUNT], begin = is[IS_BEGIN_TS], td = 0, new_slots = 0;
            if (begin > 0 && store_ts > begin) {
                td = (store_ts - begin) / 1000;
                if (td > INT32_MAX)
                    td = INT32_MAX;
            }
            uint8_t *o = grow(entries, cfg.entry_size * nkeys);
            if (o == NULL)
                goto done;
            memset(o, 0, (size_t)(cfg.entry_size * nkeys));
            for (Py_ssize_t i = 0; i < nkeys; i++, o += cfg.entry_size) {
                int64_t slot = (int64_t)hs[i] % slot_num;
                int64_t sv = slots[slot];
                if (sv <= 0 || sv > count) {
                    sv = 0;
                    new_slots++;
                }
                wr(o + cfg.entry[E_HASH].off, cfg.entry[E_HASH].size, (int64_t)hs[i]);
                wr(o + cfg.entry[E_PHY].off, cfg.entry[E_PHY].size, phys);
                wr(o + cfg.entry[E_TD].off, cfg.entry[E_TD].size, td);
                wr(o + cfg.entry[E_PREV].off, cfg.entry[E_PREV].size, sv);
                slots[slot] = (int32_t)count;
                count++;
            }
            if (ts != Py_None) {
                uint8_t *tw = grow(ts, (Py_ssize_t)sizeof(int64_t) * nkeys);
                if (tw == NULL)
                    goto done;
                for (Py_ssize_t i = 0; i < nkeys; i++)
                    memcpy(tw + i * sizeof(int64_t), &store_ts, sizeof(int64_t));
            }
            is[IS_HSC] += new_slots;
            is[IS_COUNT] = count;
            is[IS_END_PHY] = phys;
            is[IS_END_TS] = store_ts;
            added += nkeys;
        }
        last_ts = store_ts;
        if (phys + total > max_end)
            max_end = phys + total;
        done_n++;
    }
out:
    {
        Py_ssize_t pos = why == AP_MISS ? at : cursor < n ? (Py_ssize_t)c.recs[cursor].pos : (Py_ssize_t)c.head->stop;
        result = Py_BuildValue("(nnnnLLLni)", cursor, pos, done_n, ncq, (long long)last_ts, (long long)last_cq_ts,
                               (long long)max_end, added, why);
    }
done:
    if (is_loaded)                  /* what was committed stays committed, also on an error */
        memcpy(isb.buf, is, sizeof is);
    if (b.obj != NULL)
        PyBuffer_Release(&b);
    if (gsb.obj != NULL)
        PyBuffer_Release(&gsb);
    if (qsb.obj != NULL)
        PyBuffer_Release(&qsb);
    if (isb.obj != NULL)
        PyBuffer_Release(&isb);
    if (slb.obj != NULL)
        PyBuffer_Release(&slb);
    return result;
}

PyDoc_STRVAR(find_boundary_doc,
"find_boundary(buf, base, start, stop, end, max_size) -> position or -1\n\n"
"The first position p in [start, stop) where a unit frames (ending by end) and its PHYSICALOFFSET is base + p.");

static PyObject *find_boundary(PyObject *self, PyObject *args)
{
    PyObject *bufobj;
    long long base, max_size;
    Py_ssize_t start, stop, end, found = -1;
    if (!PyArg_ParseTuple(args, "OLnnnL:find_boundary", &bufobj, &base, &start, &stop, &end, &max_size))
        return NULL;
    if (rmq_ready("rebuild") < 0)
        return NULL;
    Py_buffer b;
    if (PyObject_GetBuffer(bufobj, &b, PyBUF_SIMPLE) < 0)
        return NULL;
    if (end > b.len)
        end = b.len;
    if (stop > end)
        stop = end;
    const Py_ssize_t mo = RMQ.off[F_MAGIC];
    const int ms = (int)RMQ.size[F_MAGIC];
    RmqWalk w = {.buf = b.buf, .len = b.len, .end = end, .max_size = max_size, .magics = RMQ_V1 | RMQ_V2};
    const uint8_t *buf = b.buf;
    Py_BEGIN_ALLOW_THREADS
    /* both magic codes start with the same byte (DA A3 20 A7 / AB): memchr skips to the candidates */
    const int skip = ((RMQ.magic_v1 ^ RMQ.magic_v2) >> (8 * (ms - 1)) & 0xff) == 0;
    const uint8_t first = (uint8_t)(RMQ.magic_v1 >> (8 * (ms - 1)));
    const Py_ssize_t lim = stop < end - RMQ.fixed_size + 1 ? stop : end - RMQ.fixed_size + 1;  /* last start + 1 */
    for (Py_ssize_t p = start < 0 ? 0 : start; p < lim; p++) {
        if (skip) {
            const uint8_t *q = memchr(buf + p + mo, first, (size_t)(lim - p));
            if (q == NULL)
                break;
            p = q - buf - mo;
        }
        long long magic = mq_rd_be(buf + p + mo, ms);      /* the cheap test first */
        if (magic != RMQ.magic_v1 && magic != RMQ.magic_v2)
            continue;
        RmqUnit x;
        if (rmq_frame(&w, buf + p, end - p, &x) && rmq_field(buf + p, F_PHYS) == base + p) {
            found = p;
            break;
        }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&b);
    return PyLong_FromSsize_t(found);
}


PyDoc_STRVAR(count_outside_doc,
"count_outside_be32(buf, lo, hi) -> int\n\n"
"How many of the big-endian signed int32 values in buf (its length rounded down to 4) lie outside [lo, hi]\n"
"(an index file's slot values that are no entry number: indexfiles._slots_out_of_range).");

static PyObject *count_outside_be32(PyObject *self, PyObject *args)
{
    Py_buffer b;
    long long lo, hi;
    if (!PyArg_ParseTuple(args, "y*LL:count_outside_be32", &b, &lo, &hi))
        return NULL;
    const uint8_t *p = b.buf;
    Py_ssize_t n = b.len / 4, bad = 0;
    Py_BEGIN_ALLOW_THREADS
    if (lo <= hi && lo >= INT32_MIN && hi <= INT32_MAX) {
        /* one unsigned compare a value, no branch (the loop vectorises): v - lo > hi - lo, in 64 bits */
        const uint64_t span = (uint64_t)(hi - lo);
        for (Py_ssize_t i = 0; i < n; i++) {
            uint32_t raw;
            memcpy(&raw, p + 4 * i, 4);
            const int32_t v = (int32_t)(PY_BIG_ENDIAN ? raw : __builtin_bswap32(raw));
            bad += (uint64_t)((int64_t)v - lo) > span;
        }
    } else {
        for (Py_ssize_t i = 0; i < n; i++) {
            int64_t v = mq_rd_be(p + 4 * i, 4);
            bad += v < lo || v > hi;
        }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&b);
    return PyLong_FromSsize_t(bad);
}

/* Java String.hashCode of the text UTF-8 bytes decode to, as a signed int32; None when the helper would
 * decline them (test hook for the hash above). */
static PyObject *java_hash_utf8(PyObject *self, PyObject *arg)
{
    Py_buffer b;
    if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0)
        return NULL;
    uint32_t h = 0;
    int ok = rmq_utf16_hash(&h, (const uint8_t *)b.buf, b.len);
    PyBuffer_Release(&b);
    if (!ok)
        Py_RETURN_NONE;
    return PyLong_FromLong((int32_t)h);
}

/* The values rmq_props (rmqunit.h) finds for `names` (a tuple of at most 8 bytes objects) in the properties
 * `data` with the configured separators: a tuple of bytes, None where absent (test hook: the splitter of
 * rebuild's dispatch with skip_empty false, of verify's cross-check table with it true). */
static PyObject *split_props(PyObject *self, PyObject *args)
{
    Py_buffer b;
    PyObject *names, *out = NULL;
    int skip_empty;
    if (!PyArg_ParseTuple(args, "y*O!p:split_props", &b, &PyTuple_Type, &names, &skip_empty))
        return NULL;
    RmqProp v[RMQ_NAMES_MAX];
    RmqNames ns;
    if (!cfg.ready) {
        PyErr_SetString(PyExc_ValueError, "split_props: configure() first");
        goto done;
    }
    if (rmq_names_from(names, RMQ_NAMES_MAX, (uint8_t)cfg.s[S_NVSEP][0], &ns) < 0) goto done;
    rmq_props(b.buf, b.len, (uint8_t)cfg.s[S_PROPSEP][0], &ns, skip_empty, v);
    out = rmq_values_tuple(v, &ns);
done:
    PyBuffer_Release(&b);
    return out;
}

static PyMethodDef methods[] = {
    {"configure", (PyCFunction)(void (*)(void))configure, METH_VARARGS | METH_KEYWORDS, configure_doc},
    {"parse", parse, METH_VARARGS, parse_doc},
    {"apply", apply, METH_VARARGS, apply_doc},
    {"find_boundary", find_boundary, METH_VARARGS, find_boundary_doc},
    {"count_outside_be32", count_outside_be32, METH_VARARGS, count_outside_doc},
    {"split_props", split_props, METH_VARARGS, "split_props(data, names, skip_empty) -> values (test hook)."},
    {"java_hash_utf8", java_hash_utf8, METH_O, "Java String.hashCode of decoded UTF-8 (int32), None if invalid."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "rmqrebuild", "RocketMQ rebuild-index dispatch loop",
                                    -1, methods};

PyObject *rmq_rebuild_module(void)   /* one part of the rmqcore module (rmqcore.c) */ { return PyModule_Create(&module); }
