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
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

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

/* ---- per-call queue table: (topic bytes, queue id) -> key tuple and next expected queue offset ---------- */

typedef struct {
    uint8_t *topic;         /* a copy, owned (the walk may read through a buffer it refills: scan's fd) */
    Py_ssize_t tlen;
    int64_t qid;
    uint64_t hash;
    PyObject *key;          /* (topic str, queue id int), owned */
    int64_t next;           /* next expected queue offset (always set: see q_add) */
    int64_t end;            /* global offset where the last unit consumed ends; -1: none consumed */
    struct XCache {         /* what xref_note found for this queue in this call's table (see there) */
        Py_ssize_t qi;      /* its queue in the Xref, or -1 not looked up yet */
        uint32_t hp;        /* hash of topic + join text (index keys) */
        int hp_ok;
    } cache;
} QEnt;

typedef struct {
    QEnt *ents;             /* in insertion order (the order the Python lane writes the state back in) */
    Py_ssize_t n, cap;
    int32_t *slots;         /* open addressing: index into ents, or -1 */
    Py_ssize_t nslots;      /* power of two, >= 2 * cap */
} QTab;

static uint64_t q_hash(const uint8_t *t, Py_ssize_t n, int64_t qid)
{   /* eight bytes a step (a hash of this process's tables only: nothing outside sees it) */
    const uint64_t K = 0x9E3779B97F4A7C15ULL;
    uint64_t h = ((uint64_t)qid ^ ((uint64_t)n << 32)) * K, w;
    for (; n >= 8; t += 8, n -= 8) {
        memcpy(&w, t, 8);
        h = (h ^ w) * K;
        h ^= h >> 31;
    }
    if (n > 0) {                        /* (in a register: bytes stored one by one and loaded as a word stall) */
        w = 0;
        for (Py_ssize_t i = 0; i < n; i++) w |= (uint64_t)t[i] << (8 * i);
        h = (h ^ w) * K;
    }
    return h ^ (h >> 29);
}

static void q_free(QTab *q)
{
    for (Py_ssize_t i = 0; i < q->n; i++) {
        Py_XDECREF(q->ents[i].key);
        PyMem_RawFree(q->ents[i].topic);
    }
    PyMem_RawFree(q->ents);
    PyMem_RawFree(q->slots);
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
        QEnt *ne = PyMem_RawRealloc(q->ents, (size_t)cap * sizeof(QEnt));
        int32_t *ns = PyMem_RawMalloc((size_t)cap * 2 * sizeof(int32_t));
        if (ne == NULL || ns == NULL || cap > INT32_MAX / 2) {
            if (ne != NULL) q->ents = ne;
            PyMem_RawFree(ns);
            Py_DECREF(key);
            PyErr_NoMemory();
            return -1;
        }
        q->ents = ne;
        q->cap = cap;
        PyMem_RawFree(q->slots);
        q->slots = ns;
        q->nslots = cap * 2;
        for (Py_ssize_t s = 0; s < q->nslots; s++) q->slots[s] = -1;
        for (Py_ssize_t i = 0; i < q->n; i++) {           /* rehash */
            Py_ssize_t s = (Py_ssize_t)(q->ents[i].hash & (uint64_t)(q->nslots - 1));
            while (q->slots[s] >= 0) s = (s + 1) & (q->nslots - 1);
            q->slots[s] = (int32_t)i;
        }
    }
    uint8_t *tc = PyMem_RawMalloc((size_t)n + 1);
    if (tc == NULL) {
        Py_DECREF(key);
        PyErr_NoMemory();
        return -1;
    }
    memcpy(tc, t, (size_t)n);
    Py_ssize_t s = (Py_ssize_t)(h & (uint64_t)(q->nslots - 1));
    while (q->slots[s] >= 0) s = (s + 1) & (q->nslots - 1);
    q->slots[s] = (int32_t)q->n;
    q->ents[q->n] = (QEnt){tc, n, qid, h, key, next, -1, {-1, 0, 0}};
    return q->n++;
}

/* The Python lane's write-back: expected_next[key] = nxt; dispatched[key] = nxt if nxt > dispatched.get(key, 0);
 * queue_end[key] = where the queue's last unit consumed ends (queue_end may be NULL). */
static int q_write_back(const QTab *q, PyObject *expected, PyObject *dispatched, PyObject *queue_end)
{
    PyObject *zero = PyLong_FromLong(0);
    if (zero == NULL) return -1;
    for (Py_ssize_t i = 0; i < q->n; i++) {
        if (queue_end != NULL && q->ents[i].end >= 0) {
            PyObject *e = PyLong_FromLongLong(q->ents[i].end);
            if (e == NULL || PyDict_SetItem(queue_end, q->ents[i].key, e) < 0) { Py_XDECREF(e); goto fail; }
            Py_DECREF(e);
        }
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

/* ---- the cross-reference: what the commitlog pass learned about each message --------------------------------
 *
 * The consumequeue and index checks (mqtool/rocketmq/verify/consumequeue.py, index.py) decode the message every
 * unit / entry points at. While the commitlog pass walks the messages anyway, an Xref keeps, per message it walks,
 * what those checks compare: per queue the consumequeue unit the message makes (offset, size, tagsCode by the
 * dispatch rule; indexed by queue offset), and per message with index keys its offset, store time and key
 * hashes. cq_check() / index_check() then say whether a consumequeue file / an index file is clean (every check
 * of the Python loop would pass: the same findings, none) using only that table; anything they cannot prove
 * clean (a unit or entry the table does not describe exactly, any doubt) makes them return None, and the Python
 * check runs on that file as before. Declining is always safe: the table only ever holds facts, never guesses.
 *
 * A message is described only when its topic and the values used (TAGS, KEYS, UNIQ_KEY) are clean UTF-8 (then
 * Python's replace-decoding changes nothing) and its topic is not the schedule topic (whose tagsCode is a
 * delivery time: Python). */

enum { XU_OFF, XU_SIZE, XU_TAGS, XU_N };
enum { XE_HASH, XE_PHY, XE_TD, XE_PREV, XE_N };
enum { XS_PROPSEP, XS_NVSEP, XS_KEYSEP, XS_TAGS, XS_KEYS, XS_UNIQ, XS_SCHEDULE, XS_JOIN, XS_N };
#define XMAXSTR 64
#define XMAXKEYS 256
#define XMAXPAD 1024                   /* queue-offset gap filled with unknown units; a larger one poisons */
#define XPADFREE (1 << 16)             /* unknown units allowed beyond one per known unit (memory bound) */
#define XMAXSLOTS (1 << 26)            /* index_check's per-bucket array is used up to this many slots */

static struct {
    int ready;
    int uoff[XU_N], usize[XU_N], eoff[XE_N], esize[XE_N];
    Py_ssize_t unit, entry, header, slot;
    int64_t blank_size;
    char s[XS_N][XMAXSTR];
    Py_ssize_t slen[XS_N];
    RmqNames names;                /* TAGS, KEYS, UNIQ_KEY (xprops, the lane) */
    int64_t budget;                /* heap bytes of every table together before arrays spill (< 0: no limit) */
    char spill_dir[4096];          /* where the spill file is made ("": nowhere, no limit) */
} xc = {.budget = -1};

typedef struct {
    size_t maplen;                 /* 0: a heap block (PyMem_Raw); else a map of maplen bytes of the spill file */
    int64_t foff;                  /* its place in the file */
    int64_t span;                  /* file offsets it may grow to in place, from foff */
    uint32_t gen;                  /* the file it is in (a forked child opens its own) */
} XSpill;

typedef struct XQueue {
    uint8_t *topic;
    Py_ssize_t tlen;
    int64_t qid;
    uint64_t hash;
    int64_t base;                  /* queue offset of units[0] */
    uint8_t *units;                /* expected units (xc.unit bytes each); an all-zero one is unknown */
    Py_ssize_t n, cap;
    XSpill us;                     /* where units lives (memory or the spill file) */
    int poisoned;                  /* queue offsets went back or jumped far: no claim about this queue */
    const struct XQueue **seg;     /* then the same queue's units in later ranges' tables (Xref.part), in order: */
    Py_ssize_t nseg, segcap;       /*   seg[k]->base .. + seg[k]->n, after units and each other; between: unknown */
} XQueue;

typedef struct Xref {
    PyObject_HEAD
    XQueue *q;
    Py_ssize_t nq, qcap;
    int32_t *qslots;
    Py_ssize_t nqslots;
    int64_t *off, *ts;             /* messages with index keys, in commitlog order */
    uint32_t *kstart;
    uint16_t *nk;
    Py_ssize_t nrec, rcap;
    int32_t *h;                    /* their key hashes */
    Py_ssize_t nh, hcap;
    XSpill offs, tss, kss, nks, hs;    /* where off, ts, kstart, nk, h live */
    Py_ssize_t noted;              /* bytes noted since the spilled pages were last unmapped */
    int unsorted;                  /* offsets did not increase: index_check declines */
    Py_ssize_t known, padded;      /* units noted, unknown units filled in (padded <= known + XPADFREE) */
    struct Xref **part;            /* later ranges' tables merged by reference (merge(table)), in commitlog order:
                                    * their message records follow X's own, their queues' units are X's queues'
                                    * seg; each a bare struct (not a Python object) owning its arrays */
    Py_ssize_t npart, partcap;
    Py_ssize_t rpart;              /* 1 + the index of the last part with message records, 0 when none has */
    int busy;                      /* a scan() fills it without the GIL: its methods refuse until it is done */
    int readers;                   /* index_check() calls reading it without the GIL: nothing may change it */
} Xref;

/* 0, or -1 with RuntimeError when a call that changes X may not run now: a scan() fills it or index_check()
 * calls read it without the GIL (other threads). */
static int xref_idle(Xref *X);
static int xref_writable(Xref *X)
{
    if (xref_idle(X) < 0) return -1;
    if (!X->readers) return 0;
    PyErr_SetString(PyExc_RuntimeError, "Xref: index checks are reading this table (another thread)");
    return -1;
}

/* 0, or -1 with RuntimeError when a scan() running without the GIL (another thread) is filling X. */
static int xref_idle(Xref *X)
{
    if (!X->busy) return 0;
    PyErr_SetString(PyExc_RuntimeError, "Xref: a scan is filling this table (another thread)");
    return -1;
}

/* Room for `need` items of `item` bytes in *p (capacity *cap, doubled as it grows): 0, or -1 (memory). */
static int xgrow(void *p, Py_ssize_t *cap, Py_ssize_t need, size_t item)
{
    void **pp = (void **)p;
    if (need <= *cap) return 0;
    Py_ssize_t c = *cap ? *cap : 256;
    while (c < need) c *= 2;
    void *np = PyMem_RawRealloc(*pp, (size_t)c * item);
    if (np == NULL) return -1;
    *pp = np;
    *cap = c;
    return 0;
}

/* ---- the table's memory bound: past a budget its arrays live in a temp file --------------------------------
 *
 * The table grows with the message count (~20 bytes a unit, ~22 + 4 per key a keyed message, allocated by
 * doubling), so past a budget (xref_spill(budget=...): heap bytes of every table of the process together) an
 * array that grows moves to a private temp file (made in spill_dir, unlinked at once), mapped shared: what is
 * written there lives in the page cache, and the pages are unmapped behind the writer and the readers
 * (MADV_DONTNEED keeps a shared file map's contents), so what stays resident is bounded whatever the store
 * holds. Each spilled array has its own stretch of the (sparse) file, XSLOT bytes apart, so it grows in place:
 * the file is extended behind it and the map with mremap, nothing copied. The arrays keep their pointers and
 * their contents: the checks read them as before, and their answers do not change. A stretch is reserved on disk
 * (fallocate) before it is mapped, so a full disk fails a grow, never a write through the map; where the file
 * cannot be made or grown, the array stays in (or comes back to) memory: the budget is then exceeded, no check
 * is ever weakened. */

#define XSLOT ((int64_t)1 << 30)   /* file offsets between two spilled arrays (more: the array moves on) */
#define XRELEASE (16 << 20)        /* a spilled table's pages are unmapped every this many bytes noted / read */

static struct {
    pthread_mutex_t mu;
    int fd;                        /* the spill file, -1 not open */
    uint32_t gen;
    int64_t end;                   /* file offset of the next stretch */
    Py_ssize_t live;               /* spilled arrays alive (none: the file is emptied) */
} xs = {PTHREAD_MUTEX_INITIALIZER, -1, 1, 0, 0};

static int64_t xheap;              /* heap bytes of every table's spillable arrays (atomic: tables fill on threads) */

static void xs_after_fork(void)    /* a forked child: the parent's file stays the parent's (its maps stay valid) */
{
    pthread_mutex_init(&xs.mu, NULL);
    if (xs.fd >= 0) close(xs.fd);
    xs.fd = -1;
    xs.gen++;
    xs.end = 0;
    xs.live = 0;
}

/* The spill file's descriptor (opened on first use; the caller holds xs.mu), or -1. */
static int xs_file(void)
{
    if (xs.fd >= 0) return xs.fd;
    if (xc.spill_dir[0] == 0) return -1;
    int fd = -1;
#ifdef O_TMPFILE
    fd = open(xc.spill_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
#endif
    if (fd < 0) {                  /* no O_TMPFILE here: a fresh private name, removed at once */
        char path[sizeof xc.spill_dir + 64];
        for (int tries = 0; fd < 0 && tries < 16; tries++) {
            snprintf(path, sizeof path, "%s/.mqtool-tmp-xref-%ld-%u-%d", xc.spill_dir, (long)getpid(),
                     (unsigned)rand(), tries);
            fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        }
        if (fd < 0) return -1;
        unlink(path);
    }
    xs.fd = fd;
    return fd;
}

/* A spilled array of `len` (page-rounded) bytes in a fresh stretch of the file, into *sp: its map, or NULL. */
static void *xs_map(size_t len, XSpill *sp)
{
    void *p = NULL;
    pthread_mutex_lock(&xs.mu);
    int fd = xs_file();
    const int64_t span = ((int64_t)len + XSLOT - 1) / XSLOT * XSLOT;
    if (fd >= 0 && posix_fallocate(fd, (off_t)xs.end, (off_t)len) == 0) {
        p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)xs.end);
        if (p == MAP_FAILED) {
            p = NULL;
        } else {
            (void)madvise(p, len, MADV_RANDOM);     /* a page is written first: no read-ahead of the stretch */
            *sp = (XSpill){len, xs.end, span, xs.gen};
            xs.end += span;
            xs.live++;
        }
    }
    pthread_mutex_unlock(&xs.mu);
    return p;
}

/* Grow a spilled array's map in place to `len` (page-rounded) bytes: the new map, or NULL (then unchanged). */
static void *xs_extend(void *p, size_t len, XSpill *sp)
{
    if ((int64_t)len > sp->span || sp->gen != xs.gen || xs.fd < 0
        || posix_fallocate(xs.fd, (off_t)(sp->foff + (int64_t)sp->maplen), (off_t)(len - sp->maplen)) != 0)
        return NULL;
    void *np = mremap(p, sp->maplen, len, MREMAP_MAYMOVE);
    if (np == MAP_FAILED) return NULL;
    sp->maplen = len;
    return np;
}

/* Unmap a spilled array and give its disk space back (the file is emptied when no array lives in it). */
static void xs_unmap(void *p, XSpill *sp)
{
    munmap(p, sp->maplen);
    pthread_mutex_lock(&xs.mu);
    if (sp->gen == xs.gen && xs.fd >= 0) {
        if (--xs.live == 0) {
            xs.end = 0;
            if (ftruncate(xs.fd, 0) != 0) { /* keeps its blocks until the process ends */ }
        } else {
#if defined(FALLOC_FL_PUNCH_HOLE) && defined(FALLOC_FL_KEEP_SIZE)
            (void)fallocate(xs.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)sp->foff, (off_t)sp->span);
#endif
        }
    }
    pthread_mutex_unlock(&xs.mu);
    *sp = (XSpill){0, 0, 0, 0};
}

/* Unmap the resident pages of a spilled array (its contents stay in the file); nothing for a heap block. */
static void xs_release(void *p, const XSpill *sp)
{
    if (p != NULL && sp->maplen)
        (void)madvise(p, sp->maplen, MADV_DONTNEED);
}

/* xgrow for a spillable array: in memory while every table's heap arrays stay within the budget, else (and
 * once there, always) in the spill file. 0, or -1 (out of memory; no exception set). */
static int xgrow_s(void *p, Py_ssize_t *cap, Py_ssize_t need, size_t item, XSpill *sp)
{
    void **pp = (void **)p;
    if (need <= *cap) return 0;
    Py_ssize_t c = *cap ? *cap : 256;
    while (c < need) c *= 2;
    const size_t oldb = (size_t)*cap * item, newb = (size_t)c * item;
    if (!sp->maplen && (xc.budget < 0 || xc.spill_dir[0] == 0
                        || __atomic_load_n(&xheap, __ATOMIC_RELAXED) + (int64_t)(newb - oldb) <= xc.budget)) {
        void *np = PyMem_RawRealloc(*pp, newb);
        if (np == NULL) return -1;
        __atomic_add_fetch(&xheap, (int64_t)(newb - oldb), __ATOMIC_RELAXED);
        *pp = np;
        *cap = c;
        return 0;
    }
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), len = (newb + page - 1) / page * page;
    void *np = NULL;
    if (sp->maplen) {              /* in place (the common case: nothing copied) */
        pthread_mutex_lock(&xs.mu);
        np = xs_extend(*pp, len, sp);
        pthread_mutex_unlock(&xs.mu);
        if (np != NULL) {
            *pp = np;
            *cap = c;
            return 0;
        }
    }
    XSpill ns;
    np = xs_map(len, &ns);
    if (np == NULL) {              /* no spill file (or no room in it): in memory after all */
        size_t grew = newb - oldb;
        if (!sp->maplen) {
            np = PyMem_RawRealloc(*pp, newb);
            if (np == NULL) return -1;
        } else {
            if ((np = PyMem_RawMalloc(newb)) == NULL) return -1;
            memcpy(np, *pp, oldb);
            xs_unmap(*pp, sp);
            grew = newb;
        }
        __atomic_add_fetch(&xheap, (int64_t)grew, __ATOMIC_RELAXED);
        *pp = np;
        *cap = c;
        return 0;
    }
    for (size_t at = 0; at < oldb; at += XRELEASE) {     /* copied a stretch at a time, each unmapped after */
        const size_t m = oldb - at < XRELEASE ? oldb - at : XRELEASE;
        memcpy((uint8_t *)np + at, (const uint8_t *)*pp + at, m);
        (void)madvise((uint8_t *)np + at, (m + page - 1) / page * page, MADV_DONTNEED);
    }
    if (sp->maplen) {
        xs_unmap(*pp, sp);
    } else {
        PyMem_RawFree(*pp);
        __atomic_sub_fetch(&xheap, (int64_t)oldb, __ATOMIC_RELAXED);
    }
    *sp = ns;
    *pp = np;
    *cap = c;
    return 0;
}

/* Free a spillable array (heap block or spilled map). */
static void xfree_s(void *p, Py_ssize_t cap, size_t item, XSpill *sp)
{
    if (p == NULL) return;
    if (sp->maplen) {
        xs_unmap(p, sp);
    } else {
        PyMem_RawFree(p);
        __atomic_sub_fetch(&xheap, (int64_t)((size_t)cap * item), __ATOMIC_RELAXED);
    }
}

static void xref_clear(Xref *X);

/* Free X's parts (merged by reference) and their list. */
static void xparts_free(Xref *X)
{
    for (Py_ssize_t k = 0; k < X->npart; k++) {
        xref_clear(X->part[k]);
        PyMem_RawFree(X->part[k]);
    }
    PyMem_RawFree(X->part);
    X->part = NULL;
    X->npart = X->partcap = X->rpart = 0;
}

static void xref_clear(Xref *X)
{
    for (Py_ssize_t i = 0; i < X->nq; i++) {
        PyMem_RawFree(X->q[i].topic);
        xfree_s(X->q[i].units, X->q[i].cap, (size_t)xc.unit, &X->q[i].us);
        PyMem_RawFree(X->q[i].seg);
    }
    xparts_free(X);
    PyMem_RawFree(X->q); PyMem_RawFree(X->qslots);
    xfree_s(X->off, X->rcap, 8, &X->offs); xfree_s(X->ts, X->rcap, 8, &X->tss);
    xfree_s(X->kstart, X->rcap, 4, &X->kss); xfree_s(X->nk, X->rcap, 2, &X->nks); xfree_s(X->h, X->hcap, 4, &X->hs);
    X->q = NULL; X->qslots = NULL; X->off = X->ts = NULL; X->kstart = NULL; X->nk = NULL; X->h = NULL;
    X->nq = X->qcap = X->nqslots = X->nrec = X->rcap = X->nh = X->hcap = 0;
    X->unsorted = 0;
    X->known = X->padded = 0;
    X->noted = 0;
}

/* Unmap the resident pages of X's spilled arrays (their contents stay in the spill file). */
static void xref_release(Xref *X)
{
    for (Py_ssize_t i = 0; i < X->nq; i++) xs_release(X->q[i].units, &X->q[i].us);
    xs_release(X->off, &X->offs); xs_release(X->ts, &X->tss); xs_release(X->kstart, &X->kss);
    xs_release(X->nk, &X->nks); xs_release(X->h, &X->hs);
    for (Py_ssize_t k = 0; k < X->npart; k++) xref_release(X->part[k]);
    X->noted = 0;
}

static void xref_dealloc(Xref *X)
{
    xref_clear(X);
    Py_TYPE(X)->tp_free((PyObject *)X);
}

/* The queue (topic bytes, qid): its index, -1 if absent and !create, -2 on memory error. */
static Py_ssize_t xq_find(Xref *X, const uint8_t *t, Py_ssize_t n, int64_t qid, int create)
{
    uint64_t h = q_hash(t, n, qid);
    if (X->nqslots) {
        for (Py_ssize_t s = (Py_ssize_t)(h & (uint64_t)(X->nqslots - 1));; s = (s + 1) & (X->nqslots - 1)) {
            int32_t i = X->qslots[s];
            if (i < 0) break;
            const XQueue *e = &X->q[i];
            if (e->hash == h && e->qid == qid && e->tlen == n && memcmp(e->topic, t, (size_t)n) == 0) return i;
        }
    }
    if (!create) return -1;
    if (X->nq + 1 > X->nqslots / 2) {                       /* grow and rehash the slot table */
        Py_ssize_t ns = X->nqslots ? X->nqslots * 2 : 64;
        int32_t *sl = PyMem_RawMalloc((size_t)ns * sizeof(int32_t));
        if (sl == NULL || ns > INT32_MAX) { PyMem_RawFree(sl); return -2; }
        for (Py_ssize_t s = 0; s < ns; s++) sl[s] = -1;
        for (Py_ssize_t i = 0; i < X->nq; i++) {
            Py_ssize_t s = (Py_ssize_t)(X->q[i].hash & (uint64_t)(ns - 1));
            while (sl[s] >= 0) s = (s + 1) & (ns - 1);
            sl[s] = (int32_t)i;
        }
        PyMem_RawFree(X->qslots);
        X->qslots = sl;
        X->nqslots = ns;
    }
    if (xgrow(&X->q, &X->qcap, X->nq + 1, sizeof(XQueue)) < 0) return -2;
    uint8_t *tc = PyMem_RawMalloc((size_t)n + 1);
    if (tc == NULL) return -2;
    memcpy(tc, t, (size_t)n);
    X->q[X->nq] = (XQueue){.topic = tc, .tlen = n, .qid = qid, .hash = h};
    Py_ssize_t s = (Py_ssize_t)(h & (uint64_t)(X->nqslots - 1));
    while (X->qslots[s] >= 0) s = (s + 1) & (X->nqslots - 1);
    X->qslots[s] = (int32_t)X->nq;
    return X->nq++;
}

/* records.Message.prop() of TAGS, KEYS, UNIQ_KEY over the raw properties: split on the property separator, the
 * name ends at the first name/value separator, a pair counts when name and value are non-empty, the last wins.
 * On bytes this is the str split: the separators are ASCII, which a UTF-8 decode keeps in place. */
static void xprops(const uint8_t *p, Py_ssize_t n, RmqProp v[3])
{   /* the last non-empty pair of each name (rmqunit.h rmq_props; rebuild keeps empty ones instead) */
    rmq_props(p, n, (uint8_t)xc.s[XS_PROPSEP][0], &xc.names, RMQ_PROPS_SKIP_EMPTY, v);
}

/* Room for nrec message records and nh key hashes: 0, or -1 (out of memory; no exception set: callers may
 * run without the GIL). */
static int xrec_room(Xref *X, Py_ssize_t nrec, Py_ssize_t nh)
{
    if (nrec <= X->rcap && nh <= X->hcap) return 0;                      /* (every message but a few) */
    Py_ssize_t c1 = X->rcap, c2 = X->rcap, c3 = X->rcap, c4 = X->rcap;   /* the four arrays grow alike */
    if (nh > (Py_ssize_t)UINT32_MAX || xgrow_s(&X->off, &c1, nrec, 8, &X->offs) < 0
        || xgrow_s(&X->ts, &c2, nrec, 8, &X->tss) < 0 || xgrow_s(&X->kstart, &c3, nrec, 4, &X->kss) < 0
        || xgrow_s(&X->nk, &c4, nrec, 2, &X->nks) < 0 || xgrow_s(&X->h, &X->hcap, nh, 4, &X->hs) < 0)
        return -1;
    X->rcap = c1;
    return 0;
}

/* Note the message at global offset `off`. 0 (noted, or nothing to note), -1 out of memory (no exception set:
 * the lane calls this without the GIL). utf8_checked: the caller knows the topic and the whole properties are
 * valid UTF-8 (the lane checked them). c: the lane's cache for this queue (its queue in X, the hash of topic +
 * join text: the same for every message of the queue), or NULL. found: the TAGS, KEYS and UNIQ_KEY values as
 * xprops gives them (the lane's one pass over the properties found them), or NULL. */
static int xref_note(Xref *X, int64_t off, int64_t size, const uint8_t *topic, Py_ssize_t tl, int64_t qid,
                     int64_t qoff, int64_t ts, const uint8_t *props, Py_ssize_t pl, int utf8_checked,
                     struct XCache *c, const RmqProp *found)
{
    if (!xc.ready || !(utf8_checked || mq_utf8_ok(topic, tl))) return 0;
    RmqProp own[3];
    const RmqProp *v = found;
    if (v == NULL) {
        xprops(props, pl, own);
        v = own;
    }
    /* consumequeue: the unit this message makes in its queue */
    if (!(tl == xc.slen[XS_SCHEDULE] && memcmp(topic, xc.s[XS_SCHEDULE], (size_t)tl) == 0)
        && (v[0].n < 0 || utf8_checked || mq_utf8_ok(v[0].p, v[0].n))) {
        Py_ssize_t qi = c != NULL && c->qi >= 0 ? c->qi : xq_find(X, topic, tl, qid, 1);
        if (qi == -2) return -1;
        if (c != NULL) c->qi = qi;
        XQueue *q = &X->q[qi];
        if (!q->poisoned) {
            if (q->n == 0) q->base = qoff;
            int64_t j = qoff - q->base;
            if (qoff < q->base || j < q->n || j - q->n > XMAXPAD || X->padded + (j - q->n) > X->known + XPADFREE) {
                q->poisoned = 1;                        /* not in order: no claim about this queue (no units, no base) */
                xfree_s(q->units, q->cap, (size_t)xc.unit, &q->us);
                q->units = NULL;
                q->n = q->cap = 0;
                q->base = 0;
            } else {
                if ((Py_ssize_t)j + 1 > q->cap
                    && xgrow_s(&q->units, &q->cap, (Py_ssize_t)j + 1, (size_t)xc.unit, &q->us) < 0)
                    return -1;
                uint8_t *u = q->units;
                memset(u + q->n * xc.unit, 0, (size_t)((j + 1 - q->n) * xc.unit));
                uint8_t *o = u + j * xc.unit;
                uint32_t th = 0;                        /* valid UTF-8 (checked above) */
                if (v[0].n > 0)
                    rmq_utf16_hash(&th, v[0].p, v[0].n);
                int64_t code = (int32_t)th;
                mq_wr_be(o + xc.uoff[XU_OFF], xc.usize[XU_OFF], off);
                mq_wr_be(o + xc.uoff[XU_SIZE], xc.usize[XU_SIZE], size);
                mq_wr_be(o + xc.uoff[XU_TAGS], xc.usize[XU_TAGS], code);
                X->padded += (Py_ssize_t)j - q->n;
                X->known++;
                q->n = (Py_ssize_t)j + 1;
                if ((X->noted += xc.unit) >= XRELEASE) xref_release(X);
            }
        }
    }
    /* index: topic#UNIQ_KEY, then topic#each KEYS token */
    if ((v[1].n < 0 && v[2].n < 0) || (!utf8_checked && ((v[1].n > 0 && !mq_utf8_ok(v[1].p, v[1].n))
                                                          || (v[2].n > 0 && !mq_utf8_ok(v[2].p, v[2].n)))))
        return 0;
    int32_t hs[XMAXKEYS];
    uint32_t hp = 0;                                    /* topic and join text: valid UTF-8 */
    if (c != NULL && c->hp_ok) {
        hp = c->hp;
    } else {
        rmq_utf16_hash(&hp, topic, tl);
        rmq_utf16_hash(&hp, (const uint8_t *)xc.s[XS_JOIN], xc.slen[XS_JOIN]);
        if (c != NULL) { c->hp = hp; c->hp_ok = 1; }
    }
    int nk = rmq_index_hashes(hp, v[2].n > 0 ? v[2].p : NULL, v[2].n, v[1].n > 0 ? v[1].p : NULL, v[1].n,
                              (uint8_t)xc.s[XS_KEYSEP][0], hs, XMAXKEYS);
    if (nk < 0) return 0;                               /* too many keys: no claim (Python checks) */
    if (nk == 0) return 0;
    if (X->nrec && off <= X->off[X->nrec - 1]) X->unsorted = 1;
    if ((X->nrec + 1 > X->rcap || X->nh + nk > X->hcap) && xrec_room(X, X->nrec + 1, X->nh + nk) < 0) return -1;
    for (int i = 0; i < nk; i++) X->h[X->nh + i] = hs[i];
    X->off[X->nrec] = off;
    X->ts[X->nrec] = ts;
    X->kstart[X->nrec] = (uint32_t)X->nh;
    X->nk[X->nrec] = (uint16_t)nk;
    X->nrec++;
    X->nh += nk;
    if ((X->noted += 22 + 4 * nk) >= XRELEASE) xref_release(X);
    return 0;
}

/* ---- Xref methods ----------------------------------------------------------------------------------------- */

static int xflat(Xref *X);

static PyObject *xref_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    if (!xc.ready) {
        PyErr_SetString(PyExc_RuntimeError, "rmqcore.verify.configure_xref() was not called");
        return NULL;
    }
    return type->tp_alloc(type, 0);                     /* zeroed: an empty table */
}

/* add(offset, size, topic_raw, queue_id, queue_offset, store_timestamp, props_raw): note a message the Python
 * path decoded (the same facts the lane notes). */
static PyObject *xref_add(Xref *X, PyObject *args)
{
    if (xref_writable(X) < 0 || xflat(X) < 0) return NULL;
    long long off, size, qid, qoff, ts;
    Py_buffer t, p;
    if (!PyArg_ParseTuple(args, "LLy*LLLy*", &off, &size, &t, &qid, &qoff, &ts, &p)) return NULL;
    int r = xref_note(X, off, size, t.buf, t.len, qid, qoff, ts, p.buf, p.len, 0, NULL, NULL);
    PyBuffer_Release(&t);
    PyBuffer_Release(&p);
    if (r < 0) return PyErr_NoMemory();
    Py_RETURN_NONE;
}

/* The tables holding X's message records, in commitlog order (X's own, then its parts'), those with records
 * only: a fresh array of *nv pointers (PyMem_RawFree it; *nv may be 0), or NULL with *nv -1 (out of memory).
 * Without the GIL. */
static const Xref **xviews(const Xref *X, Py_ssize_t *nv)
{
    *nv = 0;
    const Xref **v = PyMem_RawMalloc((size_t)(X->npart + 1) * sizeof *v);
    if (v == NULL) { *nv = -1; return NULL; }
    if (X->nrec) v[(*nv)++] = X;
    for (Py_ssize_t k = 0; k < X->npart; k++)
        if (X->part[k]->nrec) v[(*nv)++] = X->part[k];
    return v;
}

/* The message record at offset `off` among the views V (offsets increasing through them: X not unsorted),
 * searching from the cursor (*vi, *cur): its index in V[*vi] (the cursor moved there), or -1 when no message with
 * keys starts there. */
static Py_ssize_t xfind(const Xref *const *V, Py_ssize_t nv, int64_t off, Py_ssize_t *vi, Py_ssize_t *cur)
{
    if (nv <= 0) return -1;
    const Xref *R = V[*vi];
    Py_ssize_t c = *cur;
    if (c < R->nrec && R->off[c] == off) return c;
    if (c + 1 < R->nrec && R->off[c + 1] == off) return *cur = c + 1;
    if (c + 1 >= R->nrec && *vi + 1 < nv && V[*vi + 1]->off[0] == off) {
        ++*vi;
        return *cur = 0;
    }
    Py_ssize_t lo = 0, hi = nv;                         /* the first table whose last offset is not below off */
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (V[mid]->off[V[mid]->nrec - 1] < off) lo = mid + 1; else hi = mid;
    }
    if (lo == nv) return -1;
    R = V[lo];
    Py_ssize_t a = 0, b = R->nrec;
    while (a < b) {
        Py_ssize_t mid = a + (b - a) / 2;
        if (R->off[mid] < off) a = mid + 1; else b = mid;
    }
    if (a < R->nrec && R->off[a] == off) {
        *vi = lo;
        return *cur = a;
    }
    return -1;
}

/* The unit the messages noted make at queue offset qo of queue q (X's own units, then the parts' segments:
 * *sc a cursor into them), or NULL where nothing is known (an unknown unit, where one is zero-filled). */
static const uint8_t *xq_unit(const XQueue *q, int64_t qo, Py_ssize_t *sc)
{
    if (qo < q->base) return NULL;
    if (qo - q->base < q->n) return q->units + (qo - q->base) * xc.unit;
    if (q->nseg == 0) return NULL;
    Py_ssize_t s = *sc < q->nseg ? *sc : q->nseg - 1;
    if (q->seg[s]->base > qo) {                         /* (behind the cursor: search from the first) */
        Py_ssize_t lo = 0, hi = q->nseg;
        while (lo < hi) {
            Py_ssize_t mid = lo + (hi - lo) / 2;
            if (q->seg[mid]->base + q->seg[mid]->n <= qo) lo = mid + 1; else hi = mid;
        }
        s = lo;
    } else {
        while (s < q->nseg && q->seg[s]->base + q->seg[s]->n <= qo) s++;
    }
    *sc = s;
    if (s < q->nseg && q->seg[s]->base <= qo) return q->seg[s]->units + (qo - q->seg[s]->base) * xc.unit;
    return NULL;
}

/* Unmap the resident pages of q's spilled units, its own and its segments'. */
static void xq_release(const XQueue *q)
{
    xs_release(q->units, &q->us);
    for (Py_ssize_t s = 0; s < q->nseg; s++) xs_release(q->seg[s]->units, &q->seg[s]->us);
}

PyDoc_STRVAR(cq_check_doc,
"cq_check(buf, units, first_index, seen_real, topic, queue_id, data_end) -> (seen_real, last_index) | None\n\n"
"The units [0, units) of one consumequeue file (buf; unit i has queue offset first_index + i) of the queue\n"
"(topic bytes, queue_id), checked as consumequeue._verify_queue's unit loop does, against the messages noted:\n"
"the loop's state after them when it would report nothing for any of them, else None (run the Python loop).\n"
"data_end: where commitlog data ends, or None.");

/* The unit loop of cq_check: 1 (*seen_real and *last set), 0 it cannot prove the units clean. Reads only the
 * buffer and X (q: the queue's entry or NULL): runs without the GIL. */
static int cq_units(const XQueue *q, const uint8_t *buf, Py_ssize_t units, int64_t first, int *seen_real,
                    int has_end, int64_t data_end, int64_t *last_out)
{
    int64_t last = first - 1;
    int seen = *seen_real;
    Py_ssize_t sc = 0;
    for (Py_ssize_t i = 0; i < units; i++) {
        const uint8_t *u = buf + i * xc.unit;
        int64_t off = mq_rd_be(u + xc.uoff[XU_OFF], xc.usize[XU_OFF]);
        int64_t size = mq_rd_be(u + xc.uoff[XU_SIZE], xc.usize[XU_SIZE]);
        int64_t tags = mq_rd_be(u + xc.uoff[XU_TAGS], xc.usize[XU_TAGS]);
        int64_t qo = first + i;
        if (off == 0 && size == 0 && tags == 0) return 0;             /* a hole */
        last = qo;
        if (off == 0 && size == xc.blank_size && tags == 0) {
            if (seen) return 0;                                        /* blank fill after real units */
            continue;
        }
        seen = 1;
        if (off < 0 || size <= 0 || q == NULL || q->poisoned) return 0;
        if (has_end && (off > data_end - size)) return 0;              /* dangling (no overflow: size > 0) */
        const uint8_t *e = xq_unit(q, qo, &sc);
        if (e == NULL) return 0;                                       /* unknown */
        int64_t eoff = mq_rd_be(e + xc.uoff[XU_OFF], xc.usize[XU_OFF]);
        int64_t esize = mq_rd_be(e + xc.uoff[XU_SIZE], xc.usize[XU_SIZE]);
        int64_t etags = mq_rd_be(e + xc.uoff[XU_TAGS], xc.usize[XU_TAGS]);
        if (esize == 0 || eoff != off || esize != size) return 0;      /* unknown, or another message */
        if (etags != tags && !(tags <= -2147483649LL)) return 0;
    }
    *seen_real = seen;
    *last_out = last;
    return 1;
}

static PyObject *xref_cq_check(Xref *X, PyObject *args)
{
    if (xref_idle(X) < 0) return NULL;
    Py_buffer b, t;
    Py_ssize_t units;
    long long first, qid;
    int seen_real;
    PyObject *end_o;
    if (!PyArg_ParseTuple(args, "y*nLpy*LO", &b, &units, &first, &seen_real, &t, &qid, &end_o)) return NULL;
    PyObject *res = NULL;
    int64_t data_end = 0, last = 0;
    int has_end = end_o != Py_None, ok = 0;
    if (has_end && (data_end = PyLong_AsLongLong(end_o)) == -1 && PyErr_Occurred()) goto out;
    if (units >= 0 && units <= b.len / xc.unit) {
        Py_ssize_t qi = xq_find(X, t.buf, t.len, qid, 0);
        const XQueue *q = qi >= 0 ? &X->q[qi] : NULL;
        X->readers++;                     /* (the table is only read: scan() and merge() refuse meanwhile) */
        Py_BEGIN_ALLOW_THREADS            /* (the index entry checks' threads run meanwhile) */
        ok = cq_units(q, (const uint8_t *)b.buf, units, (int64_t)first, &seen_real, has_end, data_end, &last);
        if (q != NULL)
            xq_release(q);                /* a spilled queue: its pages read are unmapped */
        Py_END_ALLOW_THREADS
        X->readers--;
    }
    res = ok ? Py_BuildValue("(OL)", seen_real ? Py_True : Py_False, (long long)last) : Py_NewRef(Py_None);
out:
    PyBuffer_Release(&b);
    PyBuffer_Release(&t);
    return res;
}

static inline int64_t py_mod(int64_t a, int64_t m) { int64_t r = a % m; return r < 0 ? r + m : r; }

PyDoc_STRVAR(index_check_doc,
"index_check(buf, slot_num, entries, begin_timestamp, chains=None, drop=False) -> (nonempty_slots, min_off,\n"
"max_off, max_ts, unreached) | None\n\n"
"One index file (buf, slot_num slots, entries 1..entries) checked as index._verify_index_file's slot, entry and\n"
"chain loops do, against the messages noted: what those loops leave for the header checks when they would\n"
"report nothing but the slot count and the unreachable entries, else None (run the Python loops). chains: what\n"
"index_chains() gave for this buffer (its part is then not done again), or None. drop: buf is a read-only map\n"
"of a file, whose pages are unmapped behind the reader (what stays resident does not grow with the file).\n"
"first, last: check only the entries first..last (with chains given; two threads may check two parts of one\n"
"file): min_off, max_off and max_ts are then those of the part. Runs without the GIL.");

/* Where the entries of an index file (slots slots, entries 1..n) start in a buffer of len bytes, or -1 when that
 * layout does not fit it (then no claim). */
static Py_ssize_t idx_entries_at(Py_ssize_t len, Py_ssize_t slots, Py_ssize_t n)
{
    if (slots <= 0 || n < 0 || slots > (len - xc.header) / xc.slot) return -1;
    const Py_ssize_t ents = xc.header + slots * xc.slot;
    if (n + 1 > (len - ents) / xc.entry) return -1;
    return ents;
}

#define ENT(k, f) mq_rd_be(base + ents + (k) * xc.entry + xc.eoff[f], xc.esize[f])

/* A mapped index file (index_check / index_chains with drop) is read in order and its pages are unmapped behind
 * the reader every IDX_DROP bytes: a read-only file map keeps its contents (a page read again faults back in
 * from the page cache), and what stays resident does not grow with the file. */
#define IDX_DROP (8 << 20)

/* Unmap the whole pages of base[from, to) (a read-only file map). */
static void xdrop(const uint8_t *base, Py_ssize_t from, Py_ssize_t to)
{
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = ((uintptr_t)(base + from) + pg - 1) & ~(pg - 1), b = (uintptr_t)(base + to) & ~(pg - 1);
    if (b > a)
        (void)madvise((void *)a, (size_t)(b - a), MADV_DONTNEED);
}

/* Unmap the resident pages of X's spilled message records (X is only read meanwhile). */
static void xrecs_release(const Xref *X)
{
    xs_release(X->off, &X->offs); xs_release(X->ts, &X->tss); xs_release(X->kstart, &X->kss);
    xs_release(X->nk, &X->nks); xs_release(X->h, &X->hs);
    for (Py_ssize_t k = 0; k < X->npart; k++) xrecs_release(X->part[k]);
}

/* The entry loop of index_check against the messages noted: 1 (min / max offset, newest store time set), 0 it
 * cannot prove the entries clean, -1 out of memory. Reads only the buffer and X: runs without the GIL. */
static int idx_entries(const Xref *X, const uint8_t *base, Py_ssize_t ents, Py_ssize_t lo, Py_ssize_t n,
                       int64_t begin, int drop, int64_t *min_out, int64_t *max_out, int64_t *ts_out)
{   /* entries lo..n (1 <= lo: the whole file, or a part of it another thread does not check) */
    int64_t min_off = 0, max_off = 0, max_ts = 0, last_off = 0;
    Py_ssize_t cur = 0, rec = -1, vi = 0, nv;
    const Py_ssize_t every = IDX_DROP / xc.entry + 1;
    if (X->unsorted) return 0;
    const Xref **V = xviews(X, &nv), *R = NULL;
    if (nv < 0) return -1;
    int ok = 0;
    for (Py_ssize_t k = lo; k <= n; k++) {
        if (k % every == 0) {                           /* what is behind: the file's pages, spilled records */
            if (drop) xdrop(base, ents + (k - every) * xc.entry, ents + k * xc.entry);
            xrecs_release(X);
        }
        int64_t kh = ENT(k, XE_HASH), off = ENT(k, XE_PHY), td = ENT(k, XE_TD), prev = ENT(k, XE_PREV);
        if (prev < 0 || prev >= k) goto out;
        if (k == lo || off < min_off) min_off = off;
        if (k == lo || off > max_off) max_off = off;
        if (rec < 0 || off != last_off) {
            if ((rec = xfind(V, nv, off, &vi, &cur)) < 0) goto out;
            R = V[vi];
            last_off = off;
        }
        const int32_t *h = R->h + R->kstart[rec];
        int hit = 0;
        for (int j = 0; j < R->nk[rec]; j++) hit |= h[j] == kh;
        if (!hit) goto out;
        int64_t ts = R->ts[rec];
        if (k == lo || ts > max_ts) max_ts = ts;
        if (begin > 0 && k > 1) {
            int64_t d;
            if (__builtin_sub_overflow(ts, begin, &d)) goto out;
            int64_t exp = d < 0 ? 0 : d / 1000;
            if (exp != td) goto out;
        }
    }
    ok = 1;
out:
    PyMem_RawFree(V);
    if (!ok) return 0;
    *min_out = min_off;
    *max_out = max_off;
    *ts_out = max_ts;
    return 1;
}

/* The chain part of index_check (needs no message): 1 (slots in use, entries no slot reaches set), 0 the chain
 * walk would report something, -1 out of memory (nothing set). Reads only the buffer: runs without the GIL.
 *
 * The broker links each entry to the newest older entry of its bucket and points the slot at the newest: when
 * every prevIndex and slot is exactly that (one pass in entry order, then one over the slots), each bucket's
 * chain holds its own entries once each, in order, so the walk the Python loop does finds nothing, reaches every
 * entry, and the slots in use are the non-empty buckets. The entry pass touches its bucket's newest entry at
 * random: the buckets IDX_AHEAD entries on are computed first and prefetched. */
#define IDX_AHEAD 16

/* The whole pages of fresh zeroed memory [p, p + len) made present and writable in one call: the entry pass
 * reads a bucket before it writes it, which otherwise costs two faults per page (the shared zero page, then
 * the copy) -- ~10,000 for 5 M slots. Contents unchanged; ignored where refused (a kernel without it). */
static void populate_zeroed(void *p, size_t len)
{
#ifdef MADV_POPULATE_WRITE
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = ((uintptr_t)p + pg - 1) & ~(pg - 1), b = ((uintptr_t)p + len) & ~(pg - 1);
    if (b > a)
        (void)madvise((void *)a, (size_t)(b - a), MADV_POPULATE_WRITE);
#else
    (void)p;
    (void)len;
#endif
}

static int idx_chains(const uint8_t *base, Py_ssize_t ents, Py_ssize_t slots, Py_ssize_t n, int drop,
                      Py_ssize_t *nonempty_out, Py_ssize_t *unreached_out)
{
    Py_ssize_t nonempty = 0, unreached = 0;
    const Py_ssize_t every = IDX_DROP / xc.entry + 1, severy = IDX_DROP / xc.slot + 1;
    int32_t *newest = slots <= XMAXSLOTS ? PyMem_RawCalloc((size_t)slots, sizeof(int32_t)) : NULL;
    if (newest == NULL && slots <= XMAXSLOTS) return -1;
    if (newest != NULL)
        populate_zeroed(newest, (size_t)slots * sizeof(int32_t));
    int linked = n <= INT32_MAX && slots <= XMAXSLOTS;
    int64_t ring[IDX_AHEAD];                        /* bucket of entry k at ring[k % IDX_AHEAD] */
    for (Py_ssize_t k = 1; k <= n && k <= IDX_AHEAD && linked; k++) {
        ring[k % IDX_AHEAD] = py_mod(ENT(k, XE_HASH), slots);
        __builtin_prefetch(&newest[ring[k % IDX_AHEAD]], 1);
    }
    /* newest[] holds each bucket's newest entry as its slot would (4 bytes, big-endian): the slots are then
     * compared with it whole (memcmp), and the buckets in use were counted as their first entry came */
    Py_ssize_t used = 0;
    for (Py_ssize_t k = 1; k <= n && linked; k++) {
        int64_t s = ring[k % IDX_AHEAD];
        if (k + IDX_AHEAD <= n) {
            int64_t t = py_mod(ENT(k + IDX_AHEAD, XE_HASH), slots);
            ring[k % IDX_AHEAD] = t;
            __builtin_prefetch(&newest[t], 1);
        }
        linked = ENT(k, XE_PREV) == mq_rd_be((const uint8_t *)&newest[s], 4);
        used += newest[s] == 0;
        mq_wr_be((uint8_t *)&newest[s], 4, k);
        if (drop && k % every == 0)
            xdrop(base, ents + (k - every) * xc.entry, ents + k * xc.entry);
    }
    for (Py_ssize_t i = 0; i < slots && linked; i += severy) {
        const Py_ssize_t m = slots - i < severy ? slots - i : severy;
        linked = memcmp(base + xc.header + i * xc.slot, &newest[i], (size_t)m * 4) == 0;
        if (drop)
            xdrop(base, xc.header + i * xc.slot, xc.header + (i + m) * xc.slot);
    }
    nonempty = used;
    PyMem_RawFree(newest);
    if (!linked) {
        /* the walk itself, as the Python loop does it (slot values first: one out of range is a finding) */
        nonempty = 0;
        for (Py_ssize_t i = 0; i < slots; i++) {
            int64_t val = mq_rd_be(base + xc.header + i * xc.slot, (int)xc.slot);
            if (val) {
                nonempty++;
                if (val < 0 || val > n) return 0;
            }
        }
        uint8_t *seen = PyMem_RawCalloc((size_t)n + 1, 1);
        if (seen == NULL) return -1;
        Py_ssize_t walked = 0;
        for (Py_ssize_t i = 0; i < slots; i++) {
            int64_t c = mq_rd_be(base + xc.header + i * xc.slot, (int)xc.slot);
            if (c == 0) continue;
            if (c > 0 && c <= n && py_mod(ENT(c, XE_HASH), slots) != i) goto no;   /* bad slot */
            Py_ssize_t steps = 0;
            while (c > 0 && c <= n) {
                if (drop && ++walked % every == 0)
                    xdrop(base, 0, ents + (n + 1) * xc.entry);                      /* (read at random) */
                if (seen[c]) goto no;                                               /* cycle or shared tail */
                seen[c] = 1;
                if (py_mod(ENT(c, XE_HASH), slots) != i) goto no;                   /* wrong slot */
                c = ENT(c, XE_PREV);
                if (++steps > n) break;
            }
        }
        for (Py_ssize_t k = 1; k <= n; k++) unreached += !seen[k];
        PyMem_RawFree(seen);
        goto done;
no:
        PyMem_RawFree(seen);
        return 0;
    }
done:
    *nonempty_out = nonempty;
    *unreached_out = unreached;
    return 1;
}
#undef ENT

/* A precomputed chain result for index_check: 1 (values set), 0 the chains cannot be proven (False), -1 error. */
static int idx_given_chains(PyObject *o, Py_ssize_t *nonempty, Py_ssize_t *unreached)
{
    if (o == Py_False) return 0;
    if (!PyArg_ParseTuple(o, "nn;index_check: chains is (nonempty, unreached), False or None", nonempty, unreached))
        return -1;
    return 1;
}

static PyObject *xref_index_check(Xref *X, PyObject *args)
{
    if (xref_idle(X) < 0) return NULL;
    Py_buffer b;
    Py_ssize_t slots, n, nonempty = 0, unreached = 0;
    long long begin;
    PyObject *chains = Py_None;
    int drop = 0;
    Py_ssize_t first = 1, last = -1;
    if (!PyArg_ParseTuple(args, "y*nnL|Opnn", &b, &slots, &n, &begin, &chains, &drop, &first, &last)) return NULL;
    if (last < 0) last = n;
    const int part = first != 1 || last != n;
    if (part && (chains == Py_None || first < 1 || last > n || first > last)) {
        PyBuffer_Release(&b);
        PyErr_SetString(PyExc_ValueError, "index_check: a part needs the chains and 1 <= first <= last <= entries");
        return NULL;
    }
    int have = 0;
    if (chains != Py_None && (have = idx_given_chains(chains, &nonempty, &unreached)) <= 0) {
        PyBuffer_Release(&b);
        if (have < 0) return NULL;
        Py_RETURN_NONE;                                /* the chains would report something: the Python loops */
    }
    const Py_ssize_t ents = idx_entries_at(b.len, slots, n);
    int64_t min_off = 0, max_off = 0, max_ts = 0;
    int ok = 0;
    if (ents >= 0) {
        X->readers++;                                   /* (the table is only read: scan() and merge() refuse) */
        Py_BEGIN_ALLOW_THREADS
        ok = idx_entries(X, b.buf, ents, first, last, (int64_t)begin, drop, &min_off, &max_off, &max_ts);
        if (ok > 0 && !have)
            ok = idx_chains(b.buf, ents, slots, n, drop, &nonempty, &unreached);
        if (drop && part)
            xdrop(b.buf, ents + first * xc.entry, ents + (last + 1) * xc.entry);
        else if (drop)
            xdrop(b.buf, 0, b.len);
        xrecs_release(X);
        Py_END_ALLOW_THREADS
        X->readers--;
    }
    PyBuffer_Release(&b);
    if (ok < 0) return PyErr_NoMemory();
    if (!ok) Py_RETURN_NONE;
    if (n == 0)
        return Py_BuildValue("(nOOOn)", nonempty, Py_None, Py_None, Py_None, unreached);
    return Py_BuildValue("(nLLLn)", nonempty, (long long)min_off, (long long)max_off, (long long)max_ts, unreached);
}

PyDoc_STRVAR(index_chains_doc,
"index_chains(buf, slot_num, entries, drop=False) -> (nonempty_slots, unreached) | False | None\n\n"
"The chain part of Xref.index_check alone (it needs no message: it can run before the commitlog pass ends, on\n"
"another thread, without the GIL): False when the chain walk would report something, None when the layout does\n"
"not fit the buffer. Hand the result to index_check(..., chains) to skip that part there. drop: as there.");

static PyObject *py_index_chains(PyObject *self, PyObject *args)
{
    Py_buffer b;
    Py_ssize_t slots, n, nonempty = 0, unreached = 0;
    int drop = 0;
    if (!PyArg_ParseTuple(args, "y*nn|p:index_chains", &b, &slots, &n, &drop)) return NULL;
    if (!xc.ready) {
        PyBuffer_Release(&b);
        PyErr_SetString(PyExc_RuntimeError, "rmqcore.verify.configure_xref() was not called");
        return NULL;
    }
    const Py_ssize_t ents = idx_entries_at(b.len, slots, n);
    int ok = 0;
    if (ents >= 0) {
        Py_BEGIN_ALLOW_THREADS
        ok = idx_chains(b.buf, ents, slots, n, drop, &nonempty, &unreached);
        if (drop)
            xdrop(b.buf, 0, b.len);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&b);
    if (ok < 0) return PyErr_NoMemory();
    if (ents < 0) Py_RETURN_NONE;
    if (!ok) Py_RETURN_FALSE;
    return Py_BuildValue("(nn)", nonempty, unreached);
}

/* ---- export / merge: a range task's table travels to the parent as bytes ------------------------------------ */

#define XALIGN(n) (((n) + 7) & ~(Py_ssize_t)7)

static PyObject *xref_export(Xref *X, PyObject *noargs)
{
    if (xref_idle(X) < 0 || (X->npart && (xref_writable(X) < 0 || xflat(X) < 0))) return NULL;
    Py_ssize_t size = 5 * 8;
    for (Py_ssize_t i = 0; i < X->nq; i++) size += 5 * 8 + XALIGN(X->q[i].tlen) + XALIGN(X->q[i].n * xc.unit);
    size += X->nrec * (8 + 8) + XALIGN(X->nrec * 4) + XALIGN(X->nrec * 2) + XALIGN(X->nh * 4);
    PyObject *out = PyBytes_FromStringAndSize(NULL, size);
    if (out == NULL) return NULL;
    uint8_t *p = (uint8_t *)PyBytes_AS_STRING(out);
    memset(p, 0, (size_t)size);
#define PUT64(v) do { int64_t _v = (int64_t)(v); memcpy(p, &_v, 8); p += 8; } while (0)
#define PUTN(src, n) do { if ((n) != 0) memcpy(p, (src), (size_t)(n)); p += XALIGN(n); } while (0)
    PUT64(xc.unit); PUT64(X->nq); PUT64(X->nrec); PUT64(X->nh); PUT64(X->unsorted);
    for (Py_ssize_t i = 0; i < X->nq; i++) {
        const XQueue *q = &X->q[i];
        PUT64(q->tlen); PUT64(q->qid); PUT64(q->base); PUT64(q->n); PUT64(q->poisoned);
        PUTN(q->topic, q->tlen);
        PUTN(q->units, q->n * xc.unit);
    }
    PUTN(X->off, X->nrec * 8);
    PUTN(X->ts, X->nrec * 8);
    PUTN(X->kstart, X->nrec * 4);
    PUTN(X->nk, X->nrec * 2);
    PUTN(X->h, X->nh * 4);
#undef PUT64
#undef PUTN
    xref_release(X);                                   /* (a spilled table's pages, read for the copy) */
    return out;
}

/* merge(blob): append the table a later range exported (ranges merge in commitlog order). */
/* Append one queue of a later range (topic, qid, its first queue offset base, n units, poisoned there) to X's.
 * 0, or -1 out of memory (no exception set). */
static int xmerge_queue(Xref *X, const uint8_t *topic, Py_ssize_t tlen, int64_t qid, int64_t base, Py_ssize_t n,
                        int poisoned, const uint8_t *units)
{
    Py_ssize_t qi = xq_find(X, topic, tlen, qid, 1);
    if (qi == -2) return -1;
    XQueue *q = &X->q[qi];
    if (q->poisoned || poisoned || (q->n && (base < q->base + q->n || base - (q->base + q->n) > XMAXPAD
                                             || X->padded + (base - (q->base + q->n)) > X->known + n + XPADFREE))) {
        q->poisoned = 1;
        xfree_s(q->units, q->cap, (size_t)xc.unit, &q->us);
        q->units = NULL;
        q->n = q->cap = 0;
        q->base = 0;
        return 0;
    }
    if (n == 0) return 0;
    if (q->n == 0) q->base = base;
    Py_ssize_t j = (Py_ssize_t)(base - q->base);
    if (xgrow_s(&q->units, &q->cap, j + n, (size_t)xc.unit, &q->us) < 0) return -1;
    uint8_t *u = q->units;
    memset(u + q->n * xc.unit, 0, (size_t)((j - q->n) * xc.unit));
    memcpy(u + j * xc.unit, units, (size_t)(n * xc.unit));
    X->padded += j - q->n;              /* (the range's own unknown units count as known here: bounded there) */
    X->known += n;
    q->n = j + n;
    if ((X->noted += n * xc.unit) >= XRELEASE) xref_release(X);
    return 0;
}

/* Append a later range's message records (nrec offsets / times / key starts / key counts, nh hashes; the arrays
 * possibly unaligned). 0, -1 out of memory (no exception set), -2 too many hashes. */
static int xmerge_recs(Xref *X, Py_ssize_t nrec, Py_ssize_t nh, int unsorted, const uint8_t *offs,
                       const uint8_t *tss, const uint8_t *ks, const uint8_t *nks, const uint8_t *hs)
{
    if (X->nh + nh > UINT32_MAX) return -2;
    if (xrec_room(X, X->nrec + nrec, X->nh + nh) < 0) return -1;
    if (nrec) {
        int64_t first;
        memcpy(&first, offs, 8);
        if (unsorted || (X->nrec && first <= X->off[X->nrec - 1])) X->unsorted = 1;
    }
    memcpy(X->off + X->nrec, offs, (size_t)nrec * 8);
    memcpy(X->ts + X->nrec, tss, (size_t)nrec * 8);
    memcpy(X->nk + X->nrec, nks, (size_t)nrec * 2);
    for (Py_ssize_t i = 0; i < nrec; i++) {
        uint32_t k;
        memcpy(&k, ks + 4 * i, 4);
        if ((int64_t)k + X->nk[X->nrec + i] > nh) { X->unsorted = 1; k = 0; X->nk[X->nrec + i] = 0; }
        X->kstart[X->nrec + i] = k + (uint32_t)X->nh;
    }
    memcpy(X->h + X->nh, hs, (size_t)nh * 4);
    X->nrec += nrec;
    X->nh += nh;
    if ((X->noted += nrec * 22 + nh * 4) >= XRELEASE) xref_release(X);
    return 0;
}

static PyTypeObject XrefType;

/* The key hashes of X and its parts together. */
static Py_ssize_t xnh_all(const Xref *X)
{
    Py_ssize_t nh = X->nh;
    for (Py_ssize_t k = 0; k < X->npart; k++) nh += X->part[k]->nh;
    return nh;
}

/* X's parts copied into its own arrays (what merge() by copy would have made): every queue's segments after
 * its units (the gaps between them unknown units), every part's records after X's; the parts freed. For the
 * calls that change X or read its arrays whole (add, scan, merge of an export, export). 0, or -1 out of memory
 * (no exception set; X still whole, some queues or records possibly copied already, their parts kept). */
static int xflatten(Xref *X)
{
    if (X->npart == 0) return 0;
    for (Py_ssize_t i = 0; i < X->nq; i++) {
        XQueue *q = &X->q[i];
        if (q->nseg == 0) continue;
        const XQueue *l = q->seg[q->nseg - 1];
        const Py_ssize_t end = (Py_ssize_t)(l->base + l->n - q->base);
        if (xgrow_s(&q->units, &q->cap, end, (size_t)xc.unit, &q->us) < 0) return -1;
        memset(q->units + q->n * xc.unit, 0, (size_t)((end - q->n) * xc.unit));
        for (Py_ssize_t k = 0; k < q->nseg; k++)
            memcpy(q->units + (q->seg[k]->base - q->base) * xc.unit, q->seg[k]->units, (size_t)(q->seg[k]->n * xc.unit));
        q->n = end;
        PyMem_RawFree(q->seg);
        q->seg = NULL;
        q->nseg = q->segcap = 0;
    }
    for (Py_ssize_t k = 0; k < X->npart; k++) {     /* (the order was checked as each part came: unsorted stays) */
        Xref *P = X->part[k];
        if (P->nrec == 0) continue;
        if (xmerge_recs(X, P->nrec, P->nh, P->unsorted, (const uint8_t *)P->off, (const uint8_t *)P->ts,
                        (const uint8_t *)P->kstart, (const uint8_t *)P->nk, (const uint8_t *)P->h) < 0) return -1;
        P->nrec = P->nh = 0;                            /* (copied: a failure later does not copy them again) */
    }
    xparts_free(X);
    return 0;
}

/* xflatten with the GIL: 0, or -1 with MemoryError. */
static int xflat(Xref *X)
{
    if (xflatten(X) == 0) return 0;
    PyErr_NoMemory();
    return -1;
}

/* A heap array of `cap` items shrunk to `n` (at least one; a spilled one stays as it is): its capacity after. */
static Py_ssize_t xshrink_one(void *p, Py_ssize_t cap, Py_ssize_t n, size_t item, const XSpill *sp)
{
    void **pp = (void **)p;
    if (n < 1) n = 1;
    if (*pp == NULL || sp->maplen || n >= cap) return cap;
    void *np = PyMem_RawRealloc(*pp, (size_t)n * item);
    if (np == NULL) return cap;                         /* (kept as it was: nothing lost) */
    __atomic_sub_fetch(&xheap, (int64_t)((size_t)(cap - n) * item), __ATOMIC_RELAXED);
    *pp = np;
    return n;
}

/* A table becoming a part holds what it holds and no more: its arrays shrunk to their contents (they grew by
 * doubling: with many small ranges, each range's spare room and minimum sizes add up), its slot table freed (a
 * part's queues are reached through X's). Before X's segments point into its queue list. */
static void xshrink(Xref *P)
{
    for (Py_ssize_t i = 0; i < P->nq; i++) {
        XQueue *q = &P->q[i];
        q->cap = xshrink_one(&q->units, q->cap, q->n, (size_t)xc.unit, &q->us);
    }
    if (!(P->offs.maplen || P->tss.maplen || P->kss.maplen || P->nks.maplen)) {
        /* (the four record arrays share one capacity: all shrunk, or, a shrinking realloc being refused, that one
         * kept larger than counted -- the heap count then stays a little high, never low) */
        const Py_ssize_t r = P->rcap;
        P->rcap = xshrink_one(&P->off, r, P->nrec, 8, &P->offs);
        (void)xshrink_one(&P->ts, r, P->rcap, 8, &P->tss);
        (void)xshrink_one(&P->kstart, r, P->rcap, 4, &P->kss);
        (void)xshrink_one(&P->nk, r, P->rcap, 2, &P->nks);
    }
    P->hcap = xshrink_one(&P->h, P->hcap, P->nh, 4, &P->hs);
    PyMem_RawFree(P->qslots);
    P->qslots = NULL;
    P->nqslots = 0;
    if (P->nq && P->nq < P->qcap) {                     /* (before X's segments point into the list) */
        XQueue *nq = PyMem_RawRealloc(P->q, (size_t)P->nq * sizeof(XQueue));
        if (nq != NULL) {
            P->q = nq;
            P->qcap = P->nq;
        }
    }
}

/* merge(Y) by reference: Y's arrays move into a part of X (Y left empty), its queues become segments of X's
 * queues and its records follow X's, with the rules of the merge by copy (xmerge_queue, xmerge_recs): what the
 * checks read is the same, nothing is copied. 0, or -1 out of memory (no exception set; X unchanged but for
 * empty queues added, Y unchanged). */
static int xmerge_part(Xref *X, Xref *Y)
{
    if (Y->nq == 0 && Y->nrec == 0 && Y->nh == 0) return 0;
    if (xgrow(&X->part, &X->partcap, X->npart + 1, sizeof(Xref *)) < 0) return -1;
    for (Py_ssize_t i = 0; i < Y->nq; i++)              /* room first: nothing below fails but xq_find */
        if (xq_find(X, Y->q[i].topic, Y->q[i].tlen, Y->q[i].qid, 1) == -2) return -1;
    for (Py_ssize_t i = 0; i < Y->nq; i++) {
        Py_ssize_t qi = xq_find(X, Y->q[i].topic, Y->q[i].tlen, Y->q[i].qid, 0);
        XQueue *q = &X->q[qi];
        if (Y->q[i].n && !q->poisoned && !Y->q[i].poisoned
            && xgrow(&q->seg, &q->segcap, q->nseg + 1, sizeof(XQueue *)) < 0) return -1;
    }
    Xref *P = PyMem_RawCalloc(1, sizeof(Xref));
    if (P == NULL) return -1;
    const size_t head = offsetof(Xref, q);
    memcpy((char *)P + head, (char *)Y + head, sizeof(Xref) - head);
    memset((char *)Y + head, 0, sizeof(Xref) - head);
    P->busy = P->readers = 0;
    xshrink(P);
    X->part[X->npart++] = P;
    /* the records: after X's (and earlier parts'); out of order there, no claim (as xmerge_recs) */
    if (P->nrec) {
        const Xref *last = X->rpart ? X->part[X->rpart - 1] : X->nrec ? X : NULL;
        if (P->unsorted || (last != NULL && P->off[0] <= last->off[last->nrec - 1])) X->unsorted = 1;
        X->rpart = X->npart;
    }
    /* the queues: continued, padded with unknown units, or dropped, as xmerge_queue does */
    for (Py_ssize_t i = 0; i < P->nq; i++) {
        const XQueue *y = &P->q[i];
        XQueue *q = &X->q[xq_find(X, y->topic, y->tlen, y->qid, 0)];
        const int any = q->n || q->nseg;
        const int64_t end = q->nseg ? q->seg[q->nseg - 1]->base + q->seg[q->nseg - 1]->n : q->base + q->n;
        if (q->poisoned || y->poisoned || (any && (y->base < end || y->base - end > XMAXPAD
                                                   || X->padded + (y->base - end) > X->known + y->n + XPADFREE))) {
            q->poisoned = 1;
            xfree_s(q->units, q->cap, (size_t)xc.unit, &q->us);
            q->units = NULL;
            q->n = q->cap = 0;
            q->base = 0;
            PyMem_RawFree(q->seg);
            q->seg = NULL;
            q->nseg = q->segcap = 0;
            continue;
        }
        if (y->n == 0) continue;
        if (!any) q->base = y->base;
        X->padded += any ? y->base - end : 0;
        X->known += y->n;
        q->seg[q->nseg++] = y;
    }
    return 0;
}

/* Below xpart_min bytes of units and records a range's table is merged by copy, while X has no part yet: many
 * small ranges (a small --split-size) as parts would each keep their own arrays and the heap's leftovers of their
 * growth (a 2 GiB store in 1 MiB ranges: 370 MB instead of 145 MB), where copying them costs little; a large
 * one (the thread runner's ranges: tens to hundreds of MB of log each) is kept as a part, not copied. */
static Py_ssize_t xpart_min = (Py_ssize_t)1 << 20;   /* (xref_part_min(): tests set it) */

/* The bytes of Y's units and message records. */
static Py_ssize_t xdata_bytes(const Xref *Y)
{
    Py_ssize_t n = Y->nrec * 22 + Y->nh * 4;
    for (Py_ssize_t i = 0; i < Y->nq; i++) n += Y->q[i].n * xc.unit;
    return n;
}

/* merge(other) with other an Xref: its tables appended to X's (or, X being empty, taken over: other is left
 * empty either way -- it was one range's table, handed over). Appended by reference (xmerge_part) when it is
 * large or X has parts already: the thread runner hands over a table per range, and copying them was most of
 * the merge's time. */
static PyObject *xref_merge_table(Xref *X, Xref *Y)
{
    if (Y == X || xref_writable(Y) < 0) {
        if (Y == X) PyErr_SetString(PyExc_ValueError, "Xref.merge: a table cannot take itself");
        return NULL;
    }
    if (xflat(Y) < 0) return NULL;
    if (X->nq == 0 && X->nrec == 0 && X->nh == 0 && X->npart == 0) {   /* take the arrays over: nothing is copied */
        Xref tmp = *X;
        const size_t head = offsetof(Xref, q);
        memcpy((char *)X + head, (char *)Y + head, sizeof(Xref) - head);
        memcpy((char *)Y + head, (char *)&tmp + head, sizeof(Xref) - head);
        X->busy = Y->busy = 0;
        X->readers = Y->readers = 0;
        xref_clear(Y);
        Py_RETURN_NONE;
    }
    if (xnh_all(X) + Y->nh > (Py_ssize_t)UINT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "Xref.merge: too many key hashes");
        return NULL;
    }
    if (X->npart == 0 && xdata_bytes(Y) < xpart_min) {  /* a small table: copied (see xpart_min) */
        for (Py_ssize_t i = 0; i < Y->nq; i++) {
            const XQueue *q = &Y->q[i];
            if (xmerge_queue(X, q->topic, q->tlen, q->qid, q->base, q->n, q->poisoned, q->units) < 0)
                return PyErr_NoMemory();
        }
        if (xmerge_recs(X, Y->nrec, Y->nh, Y->unsorted, (const uint8_t *)Y->off, (const uint8_t *)Y->ts,
                        (const uint8_t *)Y->kstart, (const uint8_t *)Y->nk, (const uint8_t *)Y->h) < 0)
            return PyErr_NoMemory();                    /* (not -2: the hash count was checked above) */
    } else if (xmerge_part(X, Y) < 0) {
        return PyErr_NoMemory();
    }
    xref_clear(Y);                                      /* (emptied already when parted, but for its lists) */
    Py_RETURN_NONE;
}

static PyObject *xref_merge(Xref *X, PyObject *arg)
{
    if (xref_writable(X) < 0) return NULL;
    if (PyObject_TypeCheck(arg, &XrefType)) return xref_merge_table(X, (Xref *)arg);
    if (xflat(X) < 0) return NULL;
    Py_buffer b;
    if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0) return NULL;
    const uint8_t *p = b.buf, *e = p + b.len;
    int64_t hd[5];
#define NEED(n) do { if ((n) < 0 || e - p < (n)) goto bad; } while (0)
    NEED(40);
    memcpy(hd, p, 40); p += 40;
    if (hd[0] != xc.unit || hd[1] < 0 || hd[2] < 0 || hd[3] < 0) goto bad;
    for (int64_t i = 0; i < hd[1]; i++) {
        int64_t qh[5];
        NEED(40);
        memcpy(qh, p, 40); p += 40;
        if (qh[0] < 0 || qh[3] < 0 || qh[3] > PY_SSIZE_T_MAX / xc.unit) goto bad;
        NEED(XALIGN(qh[0]));
        const uint8_t *topic = p;
        p += XALIGN(qh[0]);
        NEED(XALIGN(qh[3] * xc.unit));
        const uint8_t *units = p;
        p += XALIGN(qh[3] * xc.unit);
        if (xmerge_queue(X, topic, (Py_ssize_t)qh[0], qh[1], qh[2], (Py_ssize_t)qh[3], qh[4] != 0, units) < 0) {
            PyErr_NoMemory();
            goto fail;
        }
    }
    Py_ssize_t nrec = (Py_ssize_t)hd[2], nh = (Py_ssize_t)hd[3];
    NEED(nrec * 16 + XALIGN(nrec * 4) + XALIGN(nrec * 2) + XALIGN(nh * 4));
    const uint8_t *offs = p, *tss = p + nrec * 8, *ks = tss + nrec * 8, *nks = ks + XALIGN(nrec * 4),
                  *hs = nks + XALIGN(nrec * 2);
    int r = xmerge_recs(X, nrec, nh, hd[4] != 0, offs, tss, ks, nks, hs);
    if (r == -2) goto bad;
    if (r == -1) { PyErr_NoMemory(); goto fail; }
#undef NEED
    PyBuffer_Release(&b);
    Py_RETURN_NONE;
bad:
    PyErr_SetString(PyExc_ValueError, "Xref.merge: not an exported table");
fail:
    PyBuffer_Release(&b);
    return NULL;
}

/* The memory of X's arrays, its parts' included: *bytes in memory (the queue list and its slots, topics,
 * segment lists, the arrays not spilled), *spilled mapped from the spill file. */
static void xsizes(const Xref *X, Py_ssize_t *bytes, Py_ssize_t *spilled)
{
    *bytes += X->qcap * (Py_ssize_t)sizeof(XQueue) + X->nqslots * 4 + X->partcap * (Py_ssize_t)sizeof(Xref *);
    const XSpill *const rs[5] = {&X->offs, &X->tss, &X->kss, &X->nks, &X->hs};
    const Py_ssize_t rb[5] = {X->rcap * 8, X->rcap * 8, X->rcap * 4, X->rcap * 2, X->hcap * 4};
    for (int i = 0; i < 5; i++) {
        if (rs[i]->maplen) *spilled += (Py_ssize_t)rs[i]->maplen; else *bytes += rb[i];
    }
    for (Py_ssize_t i = 0; i < X->nq; i++) {
        *bytes += X->q[i].tlen + X->q[i].segcap * (Py_ssize_t)sizeof(XQueue *);
        if (X->q[i].us.maplen) *spilled += (Py_ssize_t)X->q[i].us.maplen; else *bytes += X->q[i].cap * xc.unit;
    }
    for (Py_ssize_t k = 0; k < X->npart; k++) {
        *bytes += (Py_ssize_t)sizeof(Xref);
        xsizes(X->part[k], bytes, spilled);
    }
}

static PyObject *xref_stats(Xref *X, PyObject *noargs)
{
    if (xref_idle(X) < 0) return NULL;
    Py_ssize_t bytes = 0, spilled = 0, nrec = X->nrec;
    xsizes(X, &bytes, &spilled);
    for (Py_ssize_t k = 0; k < X->npart; k++) nrec += X->part[k]->nrec;
    return Py_BuildValue("{sn,sn,sn,sn,sn,sn}", "queues", X->nq, "messages_with_keys", nrec, "key_hashes", xnh_all(X),
                         "bytes", bytes, "spilled", spilled, "parts", X->npart);
}

static PyMethodDef xref_methods[] = {
    {"add", (PyCFunction)xref_add, METH_VARARGS,
     "add(offset, size, topic_raw, queue_id, queue_offset, store_timestamp, props_raw): note a decoded message."},
    {"cq_check", (PyCFunction)xref_cq_check, METH_VARARGS, cq_check_doc},
    {"index_check", (PyCFunction)xref_index_check, METH_VARARGS, index_check_doc},
    {"export", (PyCFunction)xref_export, METH_NOARGS, "export() -> bytes: the table, for merge() in the parent."},
    {"merge", (PyCFunction)xref_merge, METH_O,
     "merge(blob or Xref): append a later range's table (exported, or the table itself, which is left empty)."},
    {"stats", (PyCFunction)xref_stats, METH_NOARGS,
     "stats() -> dict: sizes of the table (bytes: allocated in memory; spilled: mapped from the spill file)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject XrefType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "rmqverify.Xref",
    .tp_basicsize = sizeof(Xref),
    .tp_dealloc = (destructor)xref_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "What the commitlog pass learned about each message, for the consumequeue and index checks.",
    .tp_methods = xref_methods,
    .tp_new = xref_new,
};

PyDoc_STRVAR(configure_xref_doc,
"configure_xref(*, cq_unit, cq_unit_size, index_entry, index_entry_size, index_header_size, index_slot_size,\n"
"               cq_blank_size, prop_sep, nv_sep, key_sep, tags, keys, uniq, schedule_topic, key_join)\n\n"
"The cross-reference's options by name, from formats/rocketmq.py: the consumequeue unit {offset, size, tagsCode}\n"
"and index entry {keyHash, phyOffset, timeDiff, prevIndex} layouts ({name: (offset, size)}) and sizes, the index\n"
"header and slot sizes, the blank-fill unit's size, and the property separators and names (bytes).");

static PyObject *configure_xref(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"cq_unit", "cq_unit_size", "index_entry", "index_entry_size", "index_header_size",
                             "index_slot_size", "cq_blank_size", "prop_sep", "nv_sep", "key_sep", "tags", "keys",
                             "uniq", "schedule_topic", "key_join", NULL};
    static const char *const unames[XU_N] = {"offset", "size", "tagsCode"};
    static const char *const enames[XE_N] = {"keyHash", "phyOffset", "timeDiff", "prevIndex"};
    PyObject *unit, *entry, *str[XS_N];
    Py_ssize_t usz, esz, hsz, ssz;
    long long blank;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "$O!nO!nnnLSSSSSSSS:configure_xref", kwlist, &PyDict_Type, &unit,
                                     &usz, &PyDict_Type, &entry, &esz, &hsz, &ssz, &blank, &str[0], &str[1],
                                     &str[2], &str[3], &str[4], &str[5], &str[6], &str[7]))
        return NULL;
    xc.ready = 0;
    if (usz <= 0 || usz > 4096 || esz <= 0 || esz > 4096 || hsz < 0 || hsz > 4096 || ssz != 4) {
        PyErr_SetString(PyExc_ValueError, "configure_xref: bad sizes");
        return NULL;
    }
    for (int pass = 0; pass < 2; pass++) {
        PyObject *d = pass ? entry : unit;
        int nf = pass ? XE_N : XU_N;
        for (int i = 0; i < nf; i++) {
            const char *name = pass ? enames[i] : unames[i];
            PyObject *pair = PyDict_GetItemString(d, name);
            long o, s;
            if (pair == NULL) return PyErr_Format(PyExc_ValueError, "configure_xref: no field %s", name);
            if (!PyArg_ParseTuple(pair, "ll", &o, &s)) return NULL;
            if (!(s == 4 || s == 8) || o < 0 || o + s > (pass ? esz : usz))
                return PyErr_Format(PyExc_ValueError, "configure_xref: field %s does not fit", name);
            if (pass) { xc.eoff[i] = (int)o; xc.esize[i] = (int)s; } else { xc.uoff[i] = (int)o; xc.usize[i] = (int)s; }
        }
    }
    for (int i = 0; i < XS_N; i++) {
        Py_ssize_t n = PyBytes_GET_SIZE(str[i]);
        if (n == 0 || n >= XMAXSTR || (i <= XS_KEYSEP && n != 1)) {
            PyErr_Format(PyExc_ValueError, "configure_xref: %s: bad length", kwlist[7 + i]);
            return NULL;
        }
        memcpy(xc.s[i], PyBytes_AS_STRING(str[i]), (size_t)n);
        xc.slen[i] = n;
    }
    xc.unit = usz;
    xc.entry = esz;
    xc.header = hsz;
    xc.slot = ssz;
    xc.blank_size = blank;
    const char *const nm[3] = {xc.s[XS_TAGS], xc.s[XS_KEYS], xc.s[XS_UNIQ]};
    const Py_ssize_t nl[3] = {xc.slen[XS_TAGS], xc.slen[XS_KEYS], xc.slen[XS_UNIQ]};
    rmq_names_init(&xc.names, 3, nm, nl, (uint8_t)xc.s[XS_NVSEP][0]);
    xc.ready = 1;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(xref_spill_doc,
"xref_spill(budget=None, spill_dir=None) -> previous budget\n\n"
"The tables' memory bound (see XSpill above): budget: heap bytes of every table of the process together before an\n"
"array that grows moves to the spill file (negative: no limit; None: unchanged); spill_dir: the directory (bytes)\n"
"the spill file is made in (unlinked at once; b\"\": none, so no limit; None: unchanged). Tables already filled\n"
"keep where their arrays are; what they hold does not change either way.");

static PyObject *py_xref_spill(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"budget", "spill_dir", NULL};
    PyObject *budget_o = Py_None, *dir_o = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OO:xref_spill", kwlist, &budget_o, &dir_o)) return NULL;
    long long old = xc.budget, budget = old;
    if (budget_o != Py_None && (budget = PyLong_AsLongLong(budget_o)) == -1 && PyErr_Occurred()) return NULL;
    if (dir_o != Py_None) {
        if (!PyBytes_Check(dir_o) || (size_t)PyBytes_GET_SIZE(dir_o) >= sizeof xc.spill_dir
            || strlen(PyBytes_AS_STRING(dir_o)) != (size_t)PyBytes_GET_SIZE(dir_o)) {
            PyErr_SetString(PyExc_ValueError, "xref_spill: spill_dir is a path as bytes (no NUL)");
            return NULL;
        }
        pthread_mutex_lock(&xs.mu);   /* (a file opened in another directory stays: it only matters where it is) */
        memcpy(xc.spill_dir, PyBytes_AS_STRING(dir_o), (size_t)PyBytes_GET_SIZE(dir_o) + 1);
        pthread_mutex_unlock(&xs.mu);
    }
    xc.budget = budget;
    return PyLong_FromLongLong(old);
}

/* ---- the lane: the verify hook of rmq_walk() -------------------------------------------------------------- */

typedef struct {
    QTab q;
    int64_t shift, last_ts;
    PyObject *expected;
    int known_only;
    PyObject *firsts;                      /* known_only: a list that takes (key, queue offset, global offset) of
                                            * each queue's first unit here (consumed), or NULL (those decline) */
    Py_ssize_t cached;                     /* entry of the previous unit (runs of one queue) */
    Xref *xref;                            /* notes every unit consumed, or NULL */
    int64_t base;                          /* global offset of buf[0] */
    PyThreadState *ts;                     /* the walk runs without the GIL (saved state), or NULL */
    RmqScanSet props;                      /* the one pass over properties: the multi-dispatch name, the CRC tag */
} VerifyRun;

/* Long walks with the built-in CRC run without the GIL (another thread's range walks meanwhile); this much at
 * least, so that a call that stops at the first unit does not pay for the switch (tests set 0: nogil_min()). */
static Py_ssize_t verify_nogil_min = 1 << 20;

/* verify_unit's first unit of a queue (GIL held): its key (topic str, queue id) and expected queue offset into
 * the call's table (*ei). 1, 0 (the full path takes the unit), -1 error set. */
static int new_queue(VerifyRun *v, const uint8_t *topic, Py_ssize_t tl, int64_t qid, int64_t qoff, uint64_t h,
                     int64_t at, Py_ssize_t *ei)
{
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
        if (has < 0 || (has == 0 && v->firsts == NULL)) { Py_DECREF(key); return has < 0 ? -1 : 0; }
        if (has == 0) {           /* the range's first unit of this queue: consumed (a new queue takes any offset) */
            PyObject *first = Py_BuildValue("(OLL)", key, (long long)qoff, (long long)at);
            if (first == NULL || PyList_Append(v->firsts, first) < 0) {
                Py_XDECREF(first);
                Py_DECREF(key);
                return -1;
            }
            Py_DECREF(first);
        }
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
    if ((*ei = q_add(&v->q, topic, tl, qid, h, key, e64)) < 0) return -1;
    return 1;
}

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
    /* one pass: no inner multi-dispatch, no CRC tag in the tail, the table's values, ASCII or else UTF-8 */
    const Py_ssize_t tail = pl < cfg.crc_tail ? pl : cfg.crc_tail;
    const Py_ssize_t from[2] = {0, pl - tail};
    static const RmqNames no_names = {.k = 0};
    const int note = v->xref != NULL && xc.ready;
    RmqProp found[3];
    int ascii = 0;
    /* (loads may read past the properties up to the walk's end, never past it: a map ends where the file did) */
    const Py_ssize_t avail = (Py_ssize_t)(w->buf + (w->end < w->len ? w->end : w->len) - props);
    if (rmq_props_scan(props, pl, avail, &v->props, from,
                       note ? &xc.names : &no_names, RMQ_PROPS_SKIP_EMPTY, found, &ascii))
        return 0;
    if (!ascii && !mq_utf8_ok(props, pl)) return 0;

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
    if (ei < 0) {                                   /* first unit of this queue in this call: Python objects */
        if (v->ts != NULL) PyEval_RestoreThread(v->ts);
        int r = new_queue(v, topic, tl, qid, qoff, h, (int64_t)((uint64_t)v->base + (uint64_t)x->pos), &ei);
        if (v->ts != NULL) v->ts = PyEval_SaveThread();
        if (r <= 0) return r;
    }
    v->cached = ei;
    if (q->ents[ei].next != qoff) return 0;
    q->ents[ei].next = qoff + 1;
    q->ents[ei].end = (int64_t)((uint64_t)v->base + (uint64_t)x->pos + (uint64_t)x->total);   /* (no UB if hostile) */
    int64_t ts = rmq_field(u, F_STORETS);
    if (ts > v->last_ts) v->last_ts = ts;
    /* (topic: decoded strictly when its queue entry was made, the same bytes since; properties: checked above) */
    if (note && xref_note(v->xref, v->base + x->pos, x->total, topic, tl, qid, qoff, ts, props, pl, 1,
                          &q->ents[ei].cache, found) < 0)
        return -1;
    return 1;
}

/* The walk through reads instead of the map (scan's fd): the bytes of [w->pos, w->end) are read with pread(2)
 * into one private buffer a chunk at a time and walked there. On a read-only map the kernel must map every 4 KiB
 * page of the page cache into this process and unmap it again behind the walk (mqtool.pages), which costs more
 * than copying the page into a buffer that stays in this core's cache; the map is left to the full path. A unit
 * that the chunk cuts is read again from its start with the next chunk; one longer than the chunk gets a buffer
 * of its size (up to VERIFY_CHUNK_MAX, past which the walk stops there and the full path takes it). A short read
 * (the file shrank, an I/O error) ends the walk where the bytes end: the scanner then sees the file as it is.
 * Positions, the shift and the base are the caller's (file positions), as rmq_walk over the map gives them. */
static Py_ssize_t verify_chunk = 512 << 10;             /* tests set it small: chunk() */
#define VERIFY_CHUNK_MAX ((Py_ssize_t)64 << 20)

static Py_ssize_t pread_full(int fd, uint8_t *b, Py_ssize_t n, Py_ssize_t at)
{
    Py_ssize_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, b + got, (size_t)(n - got), (off_t)(at + got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += r;
    }
    return got;
}

static int walk_pread(RmqWalk *w, int fd, VerifyRun *v)
{
    const Py_ssize_t limit = w->limit, end = w->end < w->len ? w->end : w->len;
    const int64_t shift0 = v->shift, base0 = v->base;
    Py_ssize_t cap = verify_chunk, pos = w->pos, count = 0;
    int r = 0;
    uint8_t *cb = PyMem_RawMalloc((size_t)cap);
    w->count = 0;
    w->stop = RMQ_STOP_LIMIT;
    if (cb == NULL) return -1;
    while (pos < limit && pos < end) {
        Py_ssize_t want = end - pos < cap ? end - pos : cap;
        Py_ssize_t got = pread_full(fd, cb, want, pos);
        if (got <= 0) {
            w->stop = RMQ_STOP_FRAME;
            break;
        }
        RmqWalk c = *w;
        c.buf = cb;
        c.len = c.end = got;
        c.pos = 0;
        c.limit = limit - pos < got ? limit - pos : got;
        c.cap = w->cap - count;
        v->shift = shift0 + (int64_t)pos;               /* PHYSICALOFFSET - chunk position of a clean unit */
        v->base = base0 + (int64_t)pos;                 /* global offset of cb[0] */
        r = rmq_walk(&c);
        count += c.count;
        Py_ssize_t npos = pos + c.pos;
        w->stop = c.stop;
        if (r < 0) {
            pos = npos;
            break;
        }
        if (c.stop == RMQ_STOP_LIMIT) {                 /* every unit that starts in the chunk was consumed */
            pos = npos;
            continue;
        }
        if (c.stop == RMQ_STOP_FRAME && got == want && pos + got < end) {
            /* the chunk may have cut the unit at npos: read again from there if so */
            Py_ssize_t avail = got - c.pos;
            long long need = avail < RMQ.fixed_size ? RMQ.fixed_size : rmq_field(cb + c.pos, F_TOTAL);
            if (need > avail && npos + need <= end) {
                if (c.pos > 0 && need <= cap) {
                    pos = npos;
                    continue;
                }
                if (need > cap && need <= w->max_size && need <= VERIFY_CHUNK_MAX) {
                    uint8_t *nb = PyMem_RawRealloc(cb, (size_t)need);
                    if (nb == NULL) {
                        r = -1;
                        pos = npos;
                        break;
                    }
                    cb = nb;
                    cap = (Py_ssize_t)need;
                    pos = npos;
                    continue;
                }
            }
        }
        pos = npos;
        break;
    }
    PyMem_RawFree(cb);
    v->shift = shift0;
    v->base = base0;
    w->pos = pos;
    w->count = count;
    return r;
}

PyDoc_STRVAR(scan_doc,
"scan(buf, pos, limit, end, shift, max_size, last_ts, expected_next, dispatched_next, known_queues_only,\n"
"     xref=None, base=0, queue_end=None, fd=-1, firsts=None) -> (new_pos, count, last_ts)\n\n"
"The verify fast lane over the units starting in [pos, limit) of buf[:end] (see verify._fast_lane).\n"
"shift: PHYSICALOFFSET - position of every clean unit; the two dicts are updated as the Python lane does.\n"
"xref: an Xref that notes every unit consumed (buf[0] is global offset base).\n"
"queue_end: a dict, set per queue to the global offset where its last unit consumed ends.\n"
"fd: the file buf maps (buf[i] is its byte i): the walk reads it with pread into a private buffer instead.\n"
"firsts: with known_queues_only, a list: a unit of a queue not in expected_next is consumed too (when clean)\n"
"and (key, queue_offset, global_offset) appended to it, in walk order; None: such a unit stops the walk.");

static PyObject *scan(PyObject *self, PyObject *args)
{
    PyObject *bufobj, *shift_o, *maxsize_o, *lastts_o, *expected, *dispatched;
    Py_ssize_t pos, limit, end;
    int known_only;
    PyObject *xref_o = Py_None, *qend_o = Py_None, *firsts_o = Py_None;
    long long base = 0;
    int fd = -1;
    if (!PyArg_ParseTuple(args, "OnnnOOOO!O!p|OLOiO", &bufobj, &pos, &limit, &end, &shift_o, &maxsize_o, &lastts_o,
                          &PyDict_Type, &expected, &PyDict_Type, &dispatched, &known_only, &xref_o, &base, &qend_o,
                          &fd, &firsts_o))
        return NULL;
    if (firsts_o != Py_None && !PyList_Check(firsts_o)) {
        PyErr_SetString(PyExc_TypeError, "scan: firsts must be a list or None");
        return NULL;
    }
    if (qend_o != Py_None && !PyDict_Check(qend_o)) {
        PyErr_SetString(PyExc_TypeError, "scan: queue_end must be a dict or None");
        return NULL;
    }
    if (xref_o != Py_None && !PyObject_TypeCheck(xref_o, &XrefType)) {
        PyErr_SetString(PyExc_TypeError, "scan: xref must be an Xref or None");
        return NULL;
    }
    if (xref_o != Py_None && (xref_writable((Xref *)xref_o) < 0 || xflat((Xref *)xref_o) < 0)) return NULL;
    if (rmq_ready("verify") < 0) return NULL;
    if (!cfg.configured) {
        PyErr_SetString(PyExc_RuntimeError, "rmqcore.verify.configure() was not called");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(bufobj, &view, PyBUF_SIMPLE) < 0) return NULL;
    VerifyRun v = {.expected = expected, .known_only = known_only, .cached = -1,
                   .firsts = firsts_o == Py_None ? NULL : firsts_o,
                   .xref = xref_o == Py_None ? NULL : (Xref *)xref_o, .base = base};
    const RmqNeedle needles[2] = {{(const uint8_t *)cfg.multi, cfg.multi_len},
                                  {(const uint8_t *)cfg.crc_tag, cfg.crc_tag_len}};
    rmq_scan_init(&v.props, (uint8_t)xc.s[XS_PROPSEP][0], needles, 2);
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
    /* The walk touches no Python object but in new_queue (which takes the GIL back): run it without the GIL when
     * the body CRC is the built-in one (a configured callable needs the GIL) and the span is long. The buffer
     * stays exported (a map cannot be closed meanwhile); the Xref refuses other calls while busy. */
    int nogil = RMQ.crc32 == NULL && limit - pos >= verify_nogil_min && (v.xref == NULL || !v.xref->busy);
    if (nogil) {
        if (v.xref != NULL) v.xref->busy = 1;
        v.ts = PyEval_SaveThread();
    }
    r = fd >= 0 ? walk_pread(&w, fd, &v) : rmq_walk(&w);
    if (nogil) {
        PyEval_RestoreThread(v.ts);
        v.ts = NULL;
        if (v.xref != NULL) v.xref->busy = 0;
    }
    if (r < 0) {
        if (!PyErr_Occurred()) PyErr_NoMemory();     /* xref_note ran out of memory (it sets nothing) */
        goto error;
    }
    if (q_write_back(&v.q, expected, dispatched, qend_o == Py_None ? NULL : qend_o) < 0) goto error;
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

/* madvise(buf, start, length, advice): madvise(2) on the pages of buf[start:start+length] (start rounded down to
 * its page) without the GIL -- mmap.madvise holds it, and populating a window of a map takes milliseconds
 * another thread's walk could use (mqtool.pages.PageWindow). Raises OSError as mmap.madvise does. */
static PyObject *py_madvise(PyObject *self, PyObject *args)
{
    PyObject *bufobj;
    Py_ssize_t start, length;
    int advice;
    if (!PyArg_ParseTuple(args, "Onni:madvise", &bufobj, &start, &length, &advice)) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(bufobj, &view, PyBUF_SIMPLE) < 0) return NULL;
    if (start < 0 || length < 0 || start > view.len || length > view.len - start) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "madvise: range outside the buffer");
        return NULL;
    }
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t at = (uintptr_t)view.buf + (uintptr_t)start, lo = at - at % (uintptr_t)page;
    int rc = 0, err = 0;
    if (length > 0) {
        Py_BEGIN_ALLOW_THREADS
        rc = madvise((void *)lo, (size_t)(at - lo) + (size_t)length, advice);
        err = errno;
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&view);
    if (rc != 0) {
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    Py_RETURN_NONE;
}

/* crc32(data, value=0): the built-in CRC-32 (carry-less multiplication where the CPU has it, else slicing-by-8;
 * tests compare it with zlib.crc32). */
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

/* crc32_table(data, value=0): the table loop alone (tests compare both with zlib.crc32). */
static PyObject *py_crc32_table(PyObject *self, PyObject *args)
{
    Py_buffer b;
    unsigned int value = 0;
    if (!PyArg_ParseTuple(args, "y*|I", &b, &value)) return NULL;
    uint32_t c = mq_crc32_s8(value, b.buf, b.len);
    PyBuffer_Release(&b);
    return PyLong_FromUnsignedLong(c);
}

/* crc32_fold(data, value=0, width=128): the folding CRC of one register width alone (128: PCLMULQDQ, 512:
 * VPCLMULQDQ; its last partial block folded too), the table loop for data shorter than the width takes; None when
 * this CPU cannot run that width (tests compare each width with zlib.crc32 whatever mq_crc32 would choose). */
static PyObject *py_crc32_fold(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"data", "value", "width", NULL};
    Py_buffer b;
    unsigned int value = 0;
    int width = 128;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "y*|Ii:crc32_fold", kwlist, &b, &value, &width)) return NULL;
    if (width != 128 && width != 512) {
        PyBuffer_Release(&b);
        PyErr_SetString(PyExc_ValueError, "crc32_fold: width is 128 or 512");
        return NULL;
    }
    int have = 0;
    uint32_t c = value;
#ifdef MQ_CRC_CLMUL
    have = width == 128 ? mq_crc_hw : mq_crc_wide;
    if (have) {
        const Py_ssize_t n = b.len;
        if (n >= (width == 128 ? 64 : 256))
            c = ~(width == 128 ? mq_crc32_clmul(~c, b.buf, n) : mq_crc32_wide(~c, b.buf, n));
        else
            c = mq_crc32_s8(c, b.buf, n);
    }
#endif
    PyBuffer_Release(&b);
    if (!have) Py_RETURN_NONE;
    return PyLong_FromUnsignedLong(c);
}

/* walks_without_gil(): whether scan() releases the GIL on long spans (the core checks bodies with its own CRC, not
 * a Python callable): the range verify then walks ranges on threads (mqtool/rocketmq/verify/ranges.py). */
static PyObject *py_walks_without_gil(PyObject *self, PyObject *noargs)
{
    return PyBool_FromLong(RMQ.configured && RMQ.crc32 == NULL);
}

/* nogil_min(n=-1) -> the previous value: the shortest span scan() walks without the GIL (n < 0: unchanged).
 * A test hook: the test stores are small, and 0 makes every span of theirs run without the GIL. */
static PyObject *py_nogil_min(PyObject *self, PyObject *args)
{
    Py_ssize_t n = -1, old = verify_nogil_min;
    if (!PyArg_ParseTuple(args, "|n:nogil_min", &n)) return NULL;
    if (n >= 0) verify_nogil_min = n;
    return PyLong_FromSsize_t(old);
}

/* chunk(n=-1) -> the previous value: the bytes scan(fd=...) reads at a time (n >= the fixed part; n < 0: unchanged). */
static PyObject *py_chunk(PyObject *self, PyObject *args)
{
    Py_ssize_t n = -1, old = verify_chunk;
    if (!PyArg_ParseTuple(args, "|n:chunk", &n)) return NULL;
    if (n >= 0 && (n < 64 || n > VERIFY_CHUNK_MAX)) {
        PyErr_SetString(PyExc_ValueError, "chunk: 64 bytes to 64 MiB");
        return NULL;
    }
    if (n >= 0) verify_chunk = n;
    return PyLong_FromSsize_t(old);
}

static PyObject *py_crc32_hardware(PyObject *self, PyObject *noargs)
{
    return PyBool_FromLong(mq_crc32_hardware());
}

/* huge_share(buf, start, length): which share of buf[start:start+length] (a map) this process has mapped with
 * huge pages (a page-cache folio of 2 MiB mapped by one page-table entry), from the kernel's PAGEMAP_SCAN
 * (Linux 6.7+): a float in [0, 1], or None where the kernel cannot say. A scanner asks after populating a
 * window: where the file's pages are huge, reading through the map costs next to nothing, where they are
 * 4 KiB pages mapping them costs about what copying them does (mqtool/rocketmq/scan.py chooses its lane). */
#if defined(__linux__)
struct mq_page_region { uint64_t start, end, categories; };
struct mq_pm_scan_arg {                 /* struct pm_scan_arg of <linux/fs.h>, 6.7+ (older headers lack it) */
    uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages, category_inverted, category_mask,
        category_anyof_mask, return_mask;
};
#define MQ_PAGEMAP_SCAN _IOWR('f', 16, struct mq_pm_scan_arg)
#define MQ_PAGE_IS_PRESENT (1 << 3)
#define MQ_PAGE_IS_HUGE (1 << 6)
#endif

static PyObject *py_huge_share(PyObject *self, PyObject *args)
{
    PyObject *bufobj;
    Py_ssize_t start, length;
    if (!PyArg_ParseTuple(args, "Onn:huge_share", &bufobj, &start, &length)) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(bufobj, &view, PyBUF_SIMPLE) < 0) return NULL;
    if (start < 0 || length <= 0 || start > view.len || length > view.len - start) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "huge_share: an empty range or one outside the buffer");
        return NULL;
    }
#if defined(__linux__)
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t at = (uintptr_t)view.buf + (uintptr_t)start, lo = at - at % page;
    const uintptr_t hi = (at + (uintptr_t)length + page - 1) / page * page;
    uint64_t huge = 0;
    int ok = 0;
    Py_BEGIN_ALLOW_THREADS
    int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        struct mq_page_region vec[32];
        struct mq_pm_scan_arg a = {.size = sizeof a, .start = lo, .end = hi, .vec = (uint64_t)(uintptr_t)vec,
                                   .vec_len = 32, .category_mask = MQ_PAGE_IS_HUGE | MQ_PAGE_IS_PRESENT,
                                   .return_mask = MQ_PAGE_IS_HUGE};
        for (;;) {
            long n = ioctl(fd, MQ_PAGEMAP_SCAN, &a);
            if (n < 0) break;
            for (long i = 0; i < n; i++) huge += vec[i].end - vec[i].start;
            if (a.walk_end >= hi || n < 32 || a.walk_end <= a.start) {    /* (no progress: what it said stands) */
                ok = 1;
                break;
            }
            a.start = a.walk_end;       /* the vector filled up: go on where the walk stopped */
        }
        close(fd);
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (!ok) Py_RETURN_NONE;
    double share = (double)huge / (double)(hi - lo);
    return PyFloat_FromDouble(share > 1.0 ? 1.0 : share);
#else
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
#endif
}

/* props_scan(data, names, skip_empty, needles, avail): the lane's one pass over properties (rmq_props_scan) on
 * data with the given names (bytes, at most 3) and needles ((bytes, from) pairs, at most 2), avail bytes of data
 * readable (len(data) <= avail; the rest of data stands for the bytes after the properties) -> (found, values,
 * ascii): values and ascii are None when found. A test hook: tests compare it with Python's answers. */
static PyObject *py_props_scan(PyObject *self, PyObject *args)
{
    Py_buffer b;
    PyObject *names, *needles, *out = NULL;
    int skip_empty;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "y*O!pO!n:props_scan", &b, &PyTuple_Type, &names, &skip_empty, &PyTuple_Type,
                          &needles, &n))
        return NULL;
    RmqNeedle nd[2];
    RmqProp v[3];
    RmqNames ns;
    RmqScanSet S;
    Py_ssize_t from[2] = {0, 0};
    const Py_ssize_t nn = PyTuple_GET_SIZE(needles);
    if (nn > 2 || n < 0 || n > b.len || !xc.ready) {
        PyErr_SetString(PyExc_ValueError, "props_scan: configure_xref() first; at most 2 needles, n <= len");
        goto done;
    }
    if (rmq_names_from(names, 3, (uint8_t)xc.s[XS_NVSEP][0], &ns) < 0) goto done;
    for (Py_ssize_t j = 0; j < nn; j++) {
        PyObject *o = PyTuple_GET_ITEM(needles, j), *s;
        if (!PyArg_ParseTuple(o, "O!n", &PyBytes_Type, &s, &from[j])) goto done;
        nd[j].s = (const uint8_t *)PyBytes_AS_STRING(s);
        nd[j].len = PyBytes_GET_SIZE(s);
    }
    int ascii = 0;
    rmq_scan_init(&S, (uint8_t)xc.s[XS_PROPSEP][0], nd, (int)nn);
    if (rmq_props_scan(b.buf, n, b.len, &S, from, &ns, skip_empty, v, &ascii)) {
        out = Py_BuildValue("(OOO)", Py_True, Py_None, Py_None);
        goto done;
    }
    PyObject *vals = rmq_values_tuple(v, &ns);
    if (vals != NULL)
        out = Py_BuildValue("(ONO)", Py_False, vals, ascii ? Py_True : Py_False);
done:
    PyBuffer_Release(&b);
    return out;
}

/* xref_part_min(bytes=-1): the size from which merge(table) keeps a range's table as a part (see xpart_min), set
 * to bytes when given (>= 0; tests take 0 to make every merge one by reference); returns the size before. */
static PyObject *py_xref_part_min(PyObject *self, PyObject *args)
{
    Py_ssize_t n = -1;
    if (!PyArg_ParseTuple(args, "|n:xref_part_min", &n)) return NULL;
    const Py_ssize_t before = xpart_min;
    if (n >= 0) xpart_min = n;
    return PyLong_FromSsize_t(before);
}

/* props_scan_width(width=0): the step of the properties pass (32: AVX2, 16: SSE2, 1: no SIMD in this build),
 * set to width when given (16, or 32 where the CPU has AVX2; tests run both); returns the step before. */
static PyObject *py_props_scan_width(PyObject *self, PyObject *args)
{
    int width = 0;
    if (!PyArg_ParseTuple(args, "|i:props_scan_width", &width)) return NULL;
#ifdef RMQ_PROPS_SCAN_SIMD
    const int before = rmq_scan_width;
    if (width != 0) {
        if (width != 16 && !(width == 32 && rmq_scan_width_best() == 32)) {
            PyErr_SetString(PyExc_ValueError, "props_scan_width: 16, or 32 where the CPU has AVX2");
            return NULL;
        }
        rmq_scan_width = width;
    }
    return PyLong_FromLong(before);
#else
    if (width != 0 && width != 1) {
        PyErr_SetString(PyExc_ValueError, "props_scan_width: this build has no SIMD pass");
        return NULL;
    }
    return PyLong_FromLong(1);
#endif
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
    {"configure_xref", (PyCFunction)(void (*)(void))configure_xref, METH_VARARGS | METH_KEYWORDS, configure_xref_doc},
    {"crc32", py_crc32, METH_VARARGS, "Built-in CRC-32 (zlib polynomial): crc32(data, value=0)."},
    {"crc32_table", py_crc32_table, METH_VARARGS, "The slicing-by-8 table CRC-32 alone: crc32_table(data, value=0)."},
    {"crc32_fold", (PyCFunction)(void (*)(void))py_crc32_fold, METH_VARARGS | METH_KEYWORDS,
     "crc32_fold(data, value=0, width=128): one folding width alone (None: not on this CPU)."},
    {"crc32_hardware", py_crc32_hardware, METH_NOARGS,
     "True when the built-in CRC-32 folds with carry-less multiplication (PCLMULQDQ) on this CPU."},
    {"walks_without_gil", py_walks_without_gil, METH_NOARGS,
     "True when scan() walks long spans without the GIL (the core's own body CRC)."},
    {"nogil_min", py_nogil_min, METH_VARARGS,
     "nogil_min(n=-1) -> previous: the shortest span scan() walks without the GIL (tests)."},
    {"chunk", py_chunk, METH_VARARGS,
     "chunk(n=-1) -> previous: the bytes scan(fd=...) reads at a time (tests)."},
    {"index_chains", py_index_chains, METH_VARARGS, index_chains_doc},
    {"xref_spill", (PyCFunction)(void (*)(void))py_xref_spill, METH_VARARGS | METH_KEYWORDS, xref_spill_doc},
    {"madvise", py_madvise, METH_VARARGS,
     "madvise(buf, start, length, advice): madvise(2) on buf[start:start+length] without the GIL."},
    {"utf8_valid", py_utf8_valid, METH_O, "True when bytes.decode('utf-8') would succeed."},
    {"huge_share", py_huge_share, METH_VARARGS, "huge_share(buf, start, length) -> float | None (see the C)."},
    {"props_scan", py_props_scan, METH_VARARGS, "props_scan(data, names, skip_empty, needles, n) (test hook)."},
    {"xref_part_min", py_xref_part_min, METH_VARARGS,
     "xref_part_min(bytes=-1) -> the size from which merge(table) keeps a range's table as a part, before."},
    {"props_scan_width", py_props_scan_width, METH_VARARGS,
     "props_scan_width(width=0) -> the properties pass's step before (test hook: 16 or 32 sets it)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "rmqverify", "RocketMQ verify commitlog fast lane (see mqtool/rocketmq/verify.py)", -1,
    methods,
};

PyObject *rmq_verify_module(void)   /* one part of the rmqcore module (rmqcore.c) */
{
    mq_crc32_init();                  /* this file's copy of the table and the CPU check (crc32_table, _hardware) */
#ifdef RMQ_PROPS_SCAN_SIMD
    rmq_scan_width = rmq_scan_width_best();   /* the properties pass: AVX2 where the CPU has it */
#endif
    static int forked_hook;
    if (!forked_hook++)
        (void)pthread_atfork(NULL, NULL, xs_after_fork);   /* a child makes its own spill file */
    if (PyType_Ready(&XrefType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddObjectRef(m, "Xref", (PyObject *)&XrefType) < 0) Py_CLEAR(m);
    return m;
}
