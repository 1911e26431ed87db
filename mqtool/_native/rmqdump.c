/* rmqdump: the rows of `mqtool dump commitlog` for runs of common RocketMQ units, built in C.
 *
 * Drop-in for the per-message Python work of the dump's no-filter loop (scan.decode_common + Message.to_row):
 * rows(buf, pos, limit, end, base, file, max_size, body_mode, out, cap) consumes whole units from buf[pos:]
 * that the Python fast decoder (records.decode_common) would accept -- v1/v2 magic, IPv4 hosts, every length
 * consistent -- and appends for each the very dict Message.to_row(body_mode) builds (same keys, order, values).
 * It stops at the first unit it does not fully handle (anything else: the Python path decodes it and gives
 * the precise reason) and returns (new_pos, count); that is the SegmentScanner fast-lane contract.
 * columns(...) is the same walk for `export`: the values go to per-topic columns instead of a dict per row.
 *
 * rows(), columns() and json_rows() (rmqjson.c) are one walk of the core's unit walker (rmq_walk, rmqunit.h)
 * with the dump hook below: the walker frames each unit with the layout rmqcore.configure() got by field name
 * from formats/rocketmq.py and computes its body CRC. No layout is written here: configure(**options) is called
 * once from mqtool/rocketmq/nativedump.py with the flags, masks, name tables and separators of
 * formats/rocketmq.py and the row's key names.
 * Every length is checked against the buffer before a byte is read. The buffer is held through the buffer
 * protocol for the call only. The GIL is held throughout (Python objects are built all along).
 */
#include "rmqdump.h"
#include "rmqcore.h"

State S;

/* ---- helpers ----------------------------------------------------------------------------------------- */

static int all_ascii(const unsigned char *p, Py_ssize_t n)
{
    unsigned char acc = 0;
    for (Py_ssize_t i = 0; i < n; i++) acc |= p[i];
    return acc < 0x80;
}

/* bytes.decode("utf-8", errors="replace") of p[0:n]; ASCII is copied straight into a compact str. */
static PyObject *text(const unsigned char *p, Py_ssize_t n, int ascii)
{
    if (ascii) {
        PyObject *s = PyUnicode_New(n, 127);
        if (s != NULL) memcpy(PyUnicode_DATA(s), p, (size_t)n);
        return s;
    }
    return PyUnicode_DecodeUTF8((const char *)p, n, "replace");
}

/* "a.b.c.d:port" (formats.common.format_host for IPv4), cached on the 8 raw bytes. Returns a new ref. */
static PyObject *host(const unsigned char *addr, long long port, unsigned char *raw, PyObject **cache,
                      const unsigned char *port_raw)
{
    unsigned char key[8];
    memcpy(key, addr, 4);
    memcpy(key + 4, port_raw, 4);
    if (*cache != NULL && memcmp(key, raw, 8) == 0) {
        Py_INCREF(*cache);
        return *cache;
    }
    char buf[48], *o = buf;                       /* "%u.%u.%u.%u:%lld", without printf's cost */
    for (int i = 0; i < 4; i++) {
        unsigned a = addr[i];
        if (a >= 100) *o++ = (char)('0' + a / 100);
        if (a >= 10) *o++ = (char)('0' + a / 10 % 10);
        *o++ = (char)('0' + a % 10);
        *o++ = i < 3 ? '.' : ':';
    }
    unsigned long long u = port < 0 ? (unsigned long long)(-port) : (unsigned long long)port;  /* |int32| */
    char digits[24];
    int nd = 0;
    do { digits[nd++] = (char)('0' + u % 10); u /= 10; } while (u);
    if (port < 0) *o++ = '-';
    while (nd) *o++ = digits[--nd];
    PyObject *s = PyUnicode_FromStringAndSize(buf, o - buf);
    if (s == NULL) return NULL;
    Py_XSETREF(*cache, s);
    memcpy(raw, key, 8);
    Py_INCREF(s);
    return s;
}

/* Property name as str, from the small cache when seen recently. Returns a new ref. */
static PyObject *prop_name(const unsigned char *p, Py_ssize_t n, int ascii)
{
    if (n <= MAXNAME) {
        for (int i = 0; i < NCACHE; i++)
            if (S.name[i] != NULL && S.name_len[i] == n && memcmp(S.name_raw[i], p, (size_t)n) == 0) {
                Py_INCREF(S.name[i]);
                return S.name[i];
            }
    }
    PyObject *s = text(p, n, ascii);
    if (s != NULL && n <= MAXNAME) {
        int i = S.name_next;
        S.name_next = (i + 1) % NCACHE;
        Py_XSETREF(S.name[i], s);
        Py_INCREF(s);
        memcpy(S.name_raw[i], p, (size_t)n);
        S.name_len[i] = n;
    }
    return s;
}

/* records.property_dict / property_pairs over the raw properties p[0:n]: segments split at prop_sep, each
 * split at its first nv_sep; a pair is kept when name and value are both non-empty; a repeated name keeps its
 * first place and takes the last value. With pairs != NULL, every kept pair is also appended as [name, value].
 * Splitting the bytes, then decoding each piece, equals decoding then splitting: the separators are ASCII
 * and UTF-8 decoding never joins an ASCII byte to a neighbouring sequence. Returns the count of kept pairs
 * or -1 (error set). */
static Py_ssize_t split_props(const unsigned char *p, Py_ssize_t n, int ascii, PyObject *dict, PyObject *pairs)
{
    Py_ssize_t kept = 0, i = 0;
    while (i <= n) {
        const unsigned char *seg = p + i;
        const unsigned char *sep = memchr(seg, S.prop_sep, (size_t)(n - i));
        Py_ssize_t len = sep ? (Py_ssize_t)(sep - seg) : n - i;
        const unsigned char *nv = memchr(seg, S.nv_sep, (size_t)len);
        if (nv != NULL && nv > seg && nv < seg + len - 1) {      /* name and value non-empty */
            Py_ssize_t nl = (Py_ssize_t)(nv - seg);
            PyObject *k = prop_name(seg, nl, ascii);
            PyObject *v = k ? text(nv + 1, len - nl - 1, ascii) : NULL;
            int bad = (v == NULL) || PyDict_SetItem(dict, k, v) < 0;
            if (!bad && pairs != NULL) {
                PyObject *pr = PyList_New(2);
                if (pr == NULL) bad = 1;
                else {
                    Py_INCREF(k); PyList_SET_ITEM(pr, 0, k);
                    Py_INCREF(v); PyList_SET_ITEM(pr, 1, v);
                    bad = PyList_Append(pairs, pr) < 0;
                    Py_DECREF(pr);
                }
            }
            Py_XDECREF(k);
            Py_XDECREF(v);
            if (bad) return -1;
            kept++;
        }
        i += len + 1;
    }
    return kept;
}

/* [t for t in keys.split(" ") if t] */
static PyObject *split_keys(PyObject *k)
{
    PyObject *parts = PyUnicode_Split(k, S.key_sep, -1);
    if (parts == NULL) return NULL;
    PyObject *out = PyList_New(0);
    for (Py_ssize_t i = 0; out != NULL && i < PyList_GET_SIZE(parts); i++) {
        PyObject *t = PyList_GET_ITEM(parts, i);
        if (PyUnicode_GET_LENGTH(t) > 0 && PyList_Append(out, t) < 0) Py_CLEAR(out);
    }
    Py_DECREF(parts);
    return out;
}

static const char HEXU[] = "0123456789ABCDEF", HEXL[] = "0123456789abcdef";
static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* common.encode_body for an uncompressed body: 1 text (UTF-8, replace), 2 hex, 3 base64. */
static PyObject *encode_body(const unsigned char *p, Py_ssize_t n, int mode)
{
    if (mode == 1) return text(p, n, all_ascii(p, n));
    if (mode == 2) {
        if (n > PY_SSIZE_T_MAX / 2) return PyErr_NoMemory();
        PyObject *s = PyUnicode_New(2 * n, 127);
        if (s == NULL) return NULL;
        char *o = PyUnicode_DATA(s);
        for (Py_ssize_t i = 0; i < n; i++) { o[2 * i] = HEXL[p[i] >> 4]; o[2 * i + 1] = HEXL[p[i] & 15]; }
        return s;
    }
    if (n > PY_SSIZE_T_MAX / 4 - 3) return PyErr_NoMemory();
    Py_ssize_t m = (n + 2) / 3 * 4, i = 0, j = 0;
    PyObject *s = PyUnicode_New(m, 127);
    if (s == NULL) return NULL;
    char *o = PyUnicode_DATA(s);
    for (; i + 3 <= n; i += 3) {
        uint32_t v = ((uint32_t)p[i] << 16) | ((uint32_t)p[i + 1] << 8) | p[i + 2];
        o[j++] = B64[v >> 18]; o[j++] = B64[(v >> 12) & 63]; o[j++] = B64[(v >> 6) & 63]; o[j++] = B64[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)p[i] << 16;
        o[j++] = B64[v >> 18]; o[j++] = B64[(v >> 12) & 63]; o[j++] = '='; o[j++] = '=';
    } else if (n - i == 2) {
        uint32_t v = ((uint32_t)p[i] << 16) | ((uint32_t)p[i + 1] << 8);
        o[j++] = B64[v >> 18]; o[j++] = B64[(v >> 12) & 63]; o[j++] = B64[(v >> 6) & 63]; o[j++] = '=';
    }
    return s;
}

/* An empty dict with room for n items (no resize while the properties go in). */
static PyObject *new_dict(Py_ssize_t n)
{
#if PY_VERSION_HEX < 0x030D0000
    return _PyDict_NewPresized(n);
#else
    (void)n;
    return PyDict_New();
#endif
}

/* columns(): the properties column of a topic may be a tuple of five bytearrays, the Arrow buffers of a
 * map<string,string> column being filled (export): map offsets, key offsets, key bytes, value offsets, value
 * bytes (offsets native int32, each list starting with a 0). The values are appended as the UTF-8 bytes the
 * unit holds (rmq_dump_ok() checked they are valid UTF-8, so they are the bytes of the row's strings). */
static int is_map_buffers(PyObject *c)
{
    if (!PyTuple_CheckExact(c) || PyTuple_GET_SIZE(c) != 5) return 0;
    for (int i = 0; i < 5; i++)
        if (!PyByteArray_CheckExact(PyTuple_GET_ITEM(c, i))) return 0;
    return 1;
}

static int is_str_buffers(PyObject *c)           /* string (3) or string-list (4) buffers */
{
    if (!PyTuple_CheckExact(c) || (PyTuple_GET_SIZE(c) != 3 && PyTuple_GET_SIZE(c) != 4)) return 0;
    for (int i = 0; i < PyTuple_GET_SIZE(c); i++)
        if (!PyByteArray_CheckExact(PyTuple_GET_ITEM(c, i))) return 0;
    return 1;
}

static int ba_append(PyObject *ba, const void *p, Py_ssize_t n)
{
    Py_ssize_t m = PyByteArray_GET_SIZE(ba);
    if (PyByteArray_Resize(ba, m + n) < 0) return -1;
    memcpy(PyByteArray_AS_STRING(ba) + m, p, (size_t)n);
    return 0;
}

/* One string p[0:n] onto (offsets, data); the offsets are int32 as Arrow's string type has them. */
static int str_append(PyObject *offsets, PyObject *data, const void *p, Py_ssize_t n)
{
    Py_ssize_t end = PyByteArray_GET_SIZE(data) + n;
    if (end > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "columns: more than 2 GiB of property text in one chunk");
        return -1;
    }
    int32_t e = (int32_t)end;
    return ba_append(data, p, n) < 0 ? -1 : ba_append(offsets, &e, sizeof e);
}

/* The row's map ends here: its end offset (the count of pairs so far) onto the map offsets. */
static int map_row_done(PyObject *mb)
{
    int32_t pairs = (int32_t)(PyByteArray_GET_SIZE(PyTuple_GET_ITEM(mb, 1)) / 4 - 1);
    return ba_append(PyTuple_GET_ITEM(mb, 0), &pairs, sizeof pairs);
}

static int map_append_pairs(PyObject *mb, const Pairs *P)
{
    for (int i = 0; i < P->n; i++)
        if (str_append(PyTuple_GET_ITEM(mb, 1), PyTuple_GET_ITEM(mb, 2), P->np[i], P->nn[i]) < 0
            || str_append(PyTuple_GET_ITEM(mb, 3), PyTuple_GET_ITEM(mb, 4), P->vp[i], P->vn[i]) < 0)
            return -1;
    return map_row_done(mb);
}

/* The properties dict (the path of a unit whose names repeat) onto the map buffers, in the dict's order. */
static int map_append_dict(PyObject *mb, PyObject *dict)
{
    PyObject *k, *v;
    Py_ssize_t i = 0, kn, vn;
    while (PyDict_Next(dict, &i, &k, &v)) {
        const char *ks = PyUnicode_AsUTF8AndSize(k, &kn), *vs = ks ? PyUnicode_AsUTF8AndSize(v, &vn) : NULL;
        if (vs == NULL || str_append(PyTuple_GET_ITEM(mb, 1), PyTuple_GET_ITEM(mb, 2), ks, kn) < 0
            || str_append(PyTuple_GET_ITEM(mb, 3), PyTuple_GET_ITEM(mb, 4), vs, vn) < 0)
            return -1;
    }
    return map_row_done(mb);
}

/* columns(): the list of column lists (one per row key, ROW_KEYS order) of the unit's topic, that the values go
 * to instead of a dict per row; NULL in rows(). Only set inside a columns() call (the GIL is held throughout). */
static PyObject *COLS;
/* columns(): the column lists of `topic` in by_topic (a dict topic -> one column per row key), made by calling
 * new_entry() when new. A column is a list, or for integer values a bytearray (native int64 each). Borrowed
 * reference, or NULL (error set). */
static PyObject *topic_columns(PyObject *by_topic, PyObject *topic, PyObject *new_entry)
{
    PyObject *cols = PyDict_GetItemWithError(by_topic, topic);
    if (cols == NULL) {
        if (PyErr_Occurred()) return NULL;
        cols = PyObject_CallNoArgs(new_entry);
        if (cols == NULL) return NULL;
        int r = PyDict_SetItem(by_topic, topic, cols);
        Py_DECREF(cols);            /* the dict holds it */
        if (r < 0) return NULL;
    }
    int ok = PyList_CheckExact(cols) && PyList_GET_SIZE(cols) == NKEYS;
    for (int i = 0; ok && i < NKEYS; i++)
        ok = PyList_CheckExact(PyList_GET_ITEM(cols, i)) || PyByteArray_CheckExact(PyList_GET_ITEM(cols, i))
             || (i == K_PROPERTIES && is_map_buffers(PyList_GET_ITEM(cols, i)))
             || is_str_buffers(PyList_GET_ITEM(cols, i));
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "columns: a topic's entry must be a list of one list or bytearray per "
                                          "row key (three bytearrays for strings, four for string lists, five for the "
                                          "properties' map)");
        return NULL;
    }
    return cols;
}

/* columns(): a column of strings may be a tuple of three bytearrays, the Arrow buffers of a string column
 * being filled: offsets (native int32, starting with a 0), the UTF-8 bytes, and one byte per row (1 valid,
 * 0 null). */
static int str_col_append(PyObject *c, PyObject *v)
{
    static const unsigned char valid = 1, null = 0;
    if (v == Py_None) {
        PyObject *data = PyTuple_GET_ITEM(c, 1);
        return str_append(PyTuple_GET_ITEM(c, 0), data, "", 0) < 0 ? -1 : ba_append(PyTuple_GET_ITEM(c, 2), &null, 1);
    }
    Py_ssize_t n;
    const char *u8 = PyUnicode_Check(v) ? PyUnicode_AsUTF8AndSize(v, &n) : NULL;
    if (u8 == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "columns: a string column got another type");
        return -1;
    }
    return str_append(PyTuple_GET_ITEM(c, 0), PyTuple_GET_ITEM(c, 1), u8, n) < 0 ? -1
         : ba_append(PyTuple_GET_ITEM(c, 2), &valid, 1);
}

/* columns(): a column of string lists may be a tuple of four bytearrays: list offsets, string offsets (native
 * int32, each starting with a 0), the UTF-8 bytes, and one byte per row (1 valid, 0 null). */
static int list_col_append(PyObject *c, PyObject *v)
{
    static const unsigned char valid = 1, null = 0;
    if (v != Py_None && !PyList_CheckExact(v)) {
        PyErr_SetString(PyExc_TypeError, "columns: a string-list column got another type");
        return -1;
    }
    for (Py_ssize_t i = 0; v != Py_None && i < PyList_GET_SIZE(v); i++) {
        Py_ssize_t n;
        PyObject *t = PyList_GET_ITEM(v, i);
        const char *u8 = PyUnicode_Check(t) ? PyUnicode_AsUTF8AndSize(t, &n) : NULL;
        if (u8 == NULL) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "columns: a string list holds another type");
            return -1;
        }
        if (str_append(PyTuple_GET_ITEM(c, 1), PyTuple_GET_ITEM(c, 2), u8, n) < 0) return -1;
    }
    int32_t items = (int32_t)(PyByteArray_GET_SIZE(PyTuple_GET_ITEM(c, 1)) / 4 - 1);
    return ba_append(PyTuple_GET_ITEM(c, 0), &items, sizeof items) < 0 ? -1
         : ba_append(PyTuple_GET_ITEM(c, 3), v == Py_None ? &null : &valid, 1);
}

/* v onto the column c (a list, or string, string-list or map buffers); v borrowed. */
static int col_append(PyObject *c, PyObject *v)
{
    if (!PyTuple_CheckExact(c)) return PyList_Append(c, v);
    switch (PyTuple_GET_SIZE(c)) {
    case 5: return map_append_dict(c, v);
    case 4: return list_col_append(c, v);
    default: return str_col_append(c, v);
    }
}

/* Set row[key] = v (or append v to its column; a bytearray column takes no object: an error), stealing v
 * (NULL: an error is already set). */
static int put(PyObject *row, int key, PyObject *v)
{
    if (v == NULL) return -1;
    int r = COLS ? col_append(PyList_GET_ITEM(COLS, key), v) : PyDict_SetItem(row, S.keys[key], v);
    Py_DECREF(v);
    return r;
}

static int put_ll(PyObject *row, int key, long long v)
{
    if (COLS && PyByteArray_CheckExact(PyList_GET_ITEM(COLS, key))) {    /* 8 more bytes in the bytearray */
        PyObject *ba = PyList_GET_ITEM(COLS, key);
        Py_ssize_t n = PyByteArray_GET_SIZE(ba);
        int64_t x = (int64_t)v;
        if (PyByteArray_Resize(ba, n + (Py_ssize_t)sizeof x) < 0) return -1;
        memcpy(PyByteArray_AS_STRING(ba) + n, &x, sizeof x);
        return 0;
    }
    return put(row, key, PyLong_FromLongLong(v));
}

static int put_borrowed(PyObject *row, int key, PyObject *v)
{
    if (v == NULL) v = Py_None;
    return COLS ? col_append(PyList_GET_ITEM(COLS, key), v) : PyDict_SetItem(row, S.keys[key], v);
}

/* ---- one unit ------------------------------------------------------------------------------------------ */

/* S.topic = the topic p[0:n] as str; the last one is reused when the bytes are the same. 0 or -1. */
static int topic_text(const unsigned char *p, Py_ssize_t n)
{
    if (S.topic == NULL || S.topic_len != n || memcmp(S.topic_raw, p, (size_t)n) != 0) {
        PyObject *t = text(p, n, all_ascii(p, n));
        if (t == NULL) return -1;
        Py_XSETREF(S.topic, t);
        S.topic_len = n <= (Py_ssize_t)sizeof S.topic_raw ? n : -1;     /* too long to remember: no reuse */
        if (S.topic_len >= 0) memcpy(S.topic_raw, p, (size_t)n);
    }
    return 0;
}

/* The row of the unit at u (its TOTALSIZE bytes are inside the buffer and its framing was checked); with
 * by_topic (columns()), its values are appended to its topic's column lists instead and None is returned. */
static PyObject *build_row(const unsigned char *u, const Unit *x, long long base, PyObject *file, int body_mode,
                           PyObject *by_topic, PyObject *new_entry)
{
    const long long total = x->total, body_len = x->body_len, pos = x->pos;
    const int v2 = x->v2, crc_ok = x->crc_ok;
    const Py_ssize_t tp = x->tp, tl = x->tl, pp = x->pp;
    long long sys_flag = rmq_field(u, F_SYSFLAG);
    long long body_crc = rmq_field(u, F_BODYCRC);
    const unsigned char *body = u + RMQ.fixed_size;
    PyObject *row, *v;
    if (by_topic != NULL) {         /* columns: every key of the topic's lists gets one value, None if absent */
        if (topic_text(u + tp, tl) < 0 || (COLS = topic_columns(by_topic, S.topic, new_entry)) == NULL) return NULL;
        Py_INCREF(Py_None);
        row = Py_None;
    } else if ((row = PyDict_Copy(S.template)) == NULL) return NULL;

    if (put_borrowed(row, K_KIND, S.kind) < 0 || put_borrowed(row, K_FILE, file) < 0
        || put_ll(row, K_POSITION, pos) < 0 || put_ll(row, K_OFFSET, base + pos) < 0
        || put_ll(row, K_SIZE, total) < 0 || put_borrowed(row, K_MAGIC, v2 ? S.v2 : S.v1) < 0
        || put_ll(row, K_BODY_CRC, body_crc) < 0 || put_borrowed(row, K_CRC_OK, crc_ok ? Py_True : Py_False) < 0
        || put_ll(row, K_QUEUE_ID, rmq_field(u, F_QUEUEID)) < 0
        || put_ll(row, K_FLAG, rmq_field(u, F_FLAG)) < 0
        || put_ll(row, K_QUEUE_OFFSET, rmq_field(u, F_QOFF)) < 0
        || put_ll(row, K_PHYSICAL_OFFSET, rmq_field(u, F_PHYS)) < 0
        || put_ll(row, K_SYS_FLAG, sys_flag) < 0
        || put_borrowed(row, K_TRANSACTION, PyTuple_GET_ITEM(S.txn_names, sys_flag & S.txn_mask)) < 0
        || put_ll(row, K_BORN_TS, rmq_field(u, F_BORNTS)) < 0
        || put(row, K_BORN_HOST, host(u + RMQ.off[F_BADDR], rmq_field(u, F_BPORT),
                                      S.bhost_raw, &S.bhost, u + RMQ.off[F_BPORT])) < 0
        || put_ll(row, K_STORE_TS, rmq_field(u, F_STORETS)) < 0
        || put(row, K_STORE_HOST, host(u + RMQ.off[F_SADDR], rmq_field(u, F_SPORT),
                                       S.shost_raw, &S.shost, u + RMQ.off[F_SPORT])) < 0
        || put_ll(row, K_RECONSUME, rmq_field(u, F_RECONSUME)) < 0
        || put_ll(row, K_PREPARED, rmq_field(u, F_PREPARED)) < 0)
        goto fail;

    if (topic_text(u + tp, tl) < 0 || put_borrowed(row, K_TOPIC, S.topic) < 0) goto fail;

    /* properties: the dict; the pair list too when a name repeats. Into map buffers (export) the pairs go as
     * bytes, with no dict, unless a name repeats. */
    Py_ssize_t pl = (Py_ssize_t)total - pp;
    int pascii = all_ascii(u + pp, pl), repeated = 0;
    PyObject *props = NULL, *mb = COLS ? PyList_GET_ITEM(COLS, K_PROPERTIES) : NULL;
    Pairs P;
    if (mb != NULL && PyTuple_CheckExact(mb) && rmq_pairs(u + pp, pl, &P)) {
        if (map_append_pairs(mb, &P) < 0) goto fail;
        int k = find_pair(&P, S.keys_u8, S.keys_n);
        PyObject *kv = k >= 0 ? text(P.vp[k], P.vn[k], pascii) : NULL;
        if (k >= 0 && kv == NULL) goto fail;
        PyObject *keys = kv ? split_keys(kv) : PyList_New(0);
        Py_XDECREF(kv);
        if (put(row, K_KEYS, keys) < 0) goto fail;
        k = find_pair(&P, S.tags_u8, S.tags_n);
        if (k >= 0 ? put(row, K_TAGS, text(P.vp[k], P.vn[k], pascii)) : put_borrowed(row, K_TAGS, NULL)) goto fail;
        k = find_pair(&P, S.uniq_u8, S.uniq_n);
        if (k >= 0 ? put(row, K_UNIQ_KEY, text(P.vp[k], P.vn[k], pascii)) : put_borrowed(row, K_UNIQ_KEY, NULL))
            goto fail;
    } else {
        props = new_dict(S.last_nprops);    /* sized like the last message's: no resize */
        if (props == NULL) goto fail;
        Py_ssize_t kept = split_props(u + pp, pl, pascii, props, NULL);
        if (kept < 0) { Py_DECREF(props); goto fail; }
        S.last_nprops = kept;
        repeated = kept != PyDict_GET_SIZE(props);
        Py_INCREF(props);                                   /* ours, past put() */
        if (put(row, K_PROPERTIES, props) < 0) { Py_DECREF(props); goto fail; }
        PyObject *k = PyDict_GetItemWithError(props, S.prop_keys);
        int bad = (k == NULL && PyErr_Occurred()) || put(row, K_KEYS, k ? split_keys(k) : PyList_New(0)) < 0;
        if (!bad) {
            v = PyDict_GetItemWithError(props, S.prop_tags);
            bad = (v == NULL && PyErr_Occurred()) || put_borrowed(row, K_TAGS, v) < 0;
        }
        if (!bad) {
            v = PyDict_GetItemWithError(props, S.prop_uniq);
            bad = (v == NULL && PyErr_Occurred()) || put_borrowed(row, K_UNIQ_KEY, v) < 0;
        }
        Py_DECREF(props);
        if (bad) goto fail;
    }

    /* msg_id: store address, store port and PHYSICALOFFSET as stored, upper-case hex */
    {
        const unsigned char *parts[3] = {u + RMQ.off[F_SADDR], u + RMQ.off[F_SPORT], u + RMQ.off[F_PHYS]};
        Py_ssize_t lens[3] = {RMQ.size[F_SADDR], RMQ.size[F_SPORT], RMQ.size[F_PHYS]};
        PyObject *id = PyUnicode_New(2 * (lens[0] + lens[1] + lens[2]), 127);
        if (id == NULL) goto fail;
        char *o = PyUnicode_DATA(id);
        for (int j = 0; j < 3; j++)
            for (Py_ssize_t i = 0; i < lens[j]; i++) {
                *o++ = HEXU[parts[j][i] >> 4];
                *o++ = HEXU[parts[j][i] & 15];
            }
        if (put(row, K_MSG_ID, id) < 0) goto fail;
    }
    if (put_ll(row, K_BODY_SIZE, body_len) < 0) goto fail;
    if (sys_flag & S.compressed_flag) {
        v = PyTuple_GET_ITEM(S.comp_names, (sys_flag & S.comp_mask) >> S.comp_shift);
        if (put_borrowed(row, K_COMPRESSION, v) < 0) goto fail;
    } else if (COLS && put_borrowed(row, K_COMPRESSION, NULL) < 0) goto fail;
    if (repeated) {                                   /* a name repeats: keep every pair for the record */
        PyObject *pairs = PyList_New(0), *scratch = PyDict_New();
        int bad = pairs == NULL || scratch == NULL || split_props(u + pp, pl, pascii, scratch, pairs) < 0;
        Py_XDECREF(scratch);
        if (bad) { Py_XDECREF(pairs); goto fail; }
        if (put(row, K_PROPERTY_PAIRS, pairs) < 0) goto fail;
    } else if (COLS && put_borrowed(row, K_PROPERTY_PAIRS, NULL) < 0) goto fail;
    if (body_mode != 0 && put(row, K_BODY, encode_body(body, (Py_ssize_t)body_len, body_mode)) < 0) goto fail;
    if (body_mode == 0 && COLS && put_borrowed(row, K_BODY, NULL) < 0) goto fail;
    return row;
fail:
    Py_DECREF(row);
    return NULL;
}

/* ---- the lane --------------------------------------------------------------------------------------------- */

enum { ROWS, COLUMNS, JSON, JSON_FILL };
typedef struct {
    int kind, body_mode;
    Py_ssize_t flush;                     /* JSON_FILL: the run ends once this many bytes are in the buffer */
    long long base;
    PyObject *file, *out, *new_entry;     /* file: the name (ROWS, COLUMNS) or its JSON rendering (JSON) */
    JB jb;                                /* JSON: the lines so far */
} DumpRun;

/* The dump hook of rmq_walk(): the unit's row appended to the list (ROWS), its values to its topic's columns
 * (COLUMNS), or its NDJSON line to the buffer (JSON). */
static int dump_unit(RmqWalk *w, const unsigned char *u, RmqUnit *x)
{
    DumpRun *d = w->verb;
    if (!rmq_dump_ok(u, x, d->body_mode)) return 0;
    if (d->kind == JSON) return rmq_json_unit(&d->jb, u, x, d->base, d->file, d->body_mode, w->buf + w->len);
    if (d->kind == JSON_FILL) {
        /* a failed CRC is left to the dict lane (the writer notes damaged rows from dicts); a full buffer ends
         * the run after at least one line (the caller writes it out between runs) */
        if (!x->crc_ok || d->jb.n >= d->flush) return 0;
        return rmq_json_unit(&d->jb, u, x, d->base, d->file, d->body_mode, w->buf + w->len);
    }
    PyObject *row = build_row(u, x, d->base, d->file, d->body_mode, d->kind == COLUMNS ? d->out : NULL,
                              d->new_entry);
    if (row == NULL) return -1;
    int r = d->kind == COLUMNS ? 0 : PyList_Append(d->out, row);
    Py_DECREF(row);
    return r < 0 ? -1 : 1;
}

/* rows() (out: a list of row dicts), columns() (out: a dict topic -> one list per row key) and json_rows(). */
static PyObject *run(PyObject *args, int kind)
{
    PyObject *bufobj;
    Py_ssize_t pos, limit, end, cap;
    long long max_size;
    DumpRun d = {.kind = kind};
    int ok;
    if (kind == COLUMNS)
        ok = PyArg_ParseTuple(args, "OnnnLOLiO!On", &bufobj, &pos, &limit, &end, &d.base, &d.file, &max_size,
                              &d.body_mode, &PyDict_Type, &d.out, &d.new_entry, &cap);
    else if (kind == ROWS)
        ok = PyArg_ParseTuple(args, "OnnnLOLiO!n", &bufobj, &pos, &limit, &end, &d.base, &d.file, &max_size,
                              &d.body_mode, &PyList_Type, &d.out, &cap);
    else if (kind == JSON)
        ok = PyArg_ParseTuple(args, "OnnnLO!Lin", &bufobj, &pos, &limit, &end, &d.base, &PyBytes_Type, &d.file,
                              &max_size, &d.body_mode, &cap);
    else {
        ok = PyArg_ParseTuple(args, "OnnnLO!LinO!nn", &bufobj, &pos, &limit, &end, &d.base, &PyBytes_Type,
                              &d.file, &max_size, &d.body_mode, &cap, &PyByteArray_Type, &d.jb.ba, &d.jb.n,
                              &d.flush);
        if (ok) {
            d.jb.cap = PyByteArray_GET_SIZE(d.jb.ba);
            d.jb.p = PyByteArray_AS_STRING(d.jb.ba);
            if (d.jb.n < 0 || d.jb.n > d.jb.cap) {
                PyErr_SetString(PyExc_ValueError, "json_fill: at lies outside the buffer");
                return NULL;
            }
        }
    }
    if (!ok || !call_ready(d.body_mode)) return NULL;
    if (d.new_entry != NULL && !PyCallable_Check(d.new_entry)) {
        PyErr_SetString(PyExc_TypeError, "columns: new_entry must be callable");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(bufobj, &view, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *result = NULL;
    RmqWalk w = {.buf = view.buf, .len = view.len, .pos = pos, .limit = limit, .end = end, .max_size = max_size,
                 .cap = cap, .magics = RMQ_V1 | RMQ_V2, .crc = RMQ_CRC_ON, .hook = dump_unit, .verb = &d};
    if (rmq_walk(&w) == 0)
        result = kind == JSON ? Py_BuildValue("nny#", w.pos, w.count, d.jb.p ? d.jb.p : "", d.jb.n)
               : kind == JSON_FILL ? Py_BuildValue("nnn", w.pos, w.count, d.jb.n)
               : Py_BuildValue("nn", w.pos, w.count);
    COLS = NULL;
    if (d.jb.ba == NULL) PyMem_Free(d.jb.p);
    PyBuffer_Release(&view);
    return result;
}

static PyObject *rows(PyObject *self, PyObject *args) { return run(args, ROWS); }

static PyObject *columns(PyObject *self, PyObject *args) { return run(args, COLUMNS); }

static PyObject *json_rows(PyObject *self, PyObject *args) { return run(args, JSON); }

static PyObject *json_fill(PyObject *self, PyObject *args) { return run(args, JSON_FILL); }

/* ---- configuration ------------------------------------------------------------------------------------ */

PyDoc_STRVAR(configure_doc,
"configure(*, row_keys, compressed_flag, comp_mask, comp_shift, txn_mask, kind, v1, v2, txn_names, comp_names,\n"
"          prop_keys, prop_tags, prop_uniq, key_sep, prop_sep, nv_sep, kind_json, v1_json, v2_json, txn_json,\n"
"          comp_json)\n\n"
"The dump's own options, by name (the layout is rmqcore.configure()'s): the row keys in row order, the flags and\n"
"masks, name tables and separators of formats/rocketmq.py, and their NDJSON renderings.");

static PyObject *configure(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"row_keys", "compressed_flag", "comp_mask", "comp_shift", "txn_mask", "kind", "v1",
                             "v2", "txn_names", "comp_names", "prop_keys", "prop_tags", "prop_uniq", "key_sep",
                             "prop_sep", "nv_sep", "kind_json", "v1_json", "v2_json", "txn_json", "comp_json", NULL};
    PyObject *keys, *o[11], *sep[2], *js[5];
    long long compressed_flag, comp_mask, comp_shift, txn_mask;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "$O!LLLLOOOO!O!UUUUSSSSSO!O!:configure", kwlist, &PyTuple_Type,
                                     &keys, &compressed_flag, &comp_mask, &comp_shift, &txn_mask, &o[0], &o[1],
                                     &o[2], &PyTuple_Type, &o[3], &PyTuple_Type, &o[4], &o[5], &o[6], &o[7], &o[8],
                                     &sep[0], &sep[1], &js[0], &js[1], &js[2], &PyTuple_Type, &js[3], &PyTuple_Type,
                                     &js[4]))
        return NULL;
    S.configured = 0;
    if (PyTuple_GET_SIZE(keys) != NKEYS) {
        PyErr_Format(PyExc_ValueError, "need %d row keys", NKEYS);
        return NULL;
    }
    if (PyTuple_GET_SIZE(o[3]) != txn_mask + 1 || comp_shift < 0 || comp_shift > 62
        || PyTuple_GET_SIZE(o[4]) != (comp_mask >> comp_shift) + 1) {
        PyErr_SetString(PyExc_ValueError, "bad name tables");
        return NULL;
    }
    for (int i = 0; i < 2; i++)
        if (PyBytes_GET_SIZE(sep[i]) != 1 || (unsigned char)PyBytes_AS_STRING(sep[i])[0] >= 0x80) {
            PyErr_SetString(PyExc_ValueError, "separators must be single ASCII bytes");
            return NULL;
        }
    S.compressed_flag = compressed_flag;
    S.comp_mask = comp_mask;
    S.comp_shift = comp_shift;
    S.txn_mask = txn_mask;
    S.prop_sep = (unsigned char)PyBytes_AS_STRING(sep[0])[0];
    S.nv_sep = (unsigned char)PyBytes_AS_STRING(sep[1])[0];
    PyObject **slots[] = {&S.kind, &S.v1, &S.v2, &S.txn_names, &S.comp_names, &S.prop_keys, &S.prop_tags,
                          &S.prop_uniq, &S.key_sep};
    for (int i = 0; i < 9; i++) { Py_INCREF(o[i]); Py_XSETREF(*slots[i], o[i]); }
    PyObject *tmpl = PyDict_New();
    if (tmpl == NULL) return NULL;
    for (int i = 0; i < NKEYS; i++) {
        PyObject *k = PyTuple_GET_ITEM(keys, i);
        if (!PyUnicode_CheckExact(k)) { Py_DECREF(tmpl); return PyErr_Format(PyExc_TypeError, "row key %d", i); }
        Py_INCREF(k);
        PyUnicode_InternInPlace(&k);
        Py_XSETREF(S.keys[i], k);
        if (i < NROWKEYS && PyDict_SetItem(tmpl, k, Py_None) < 0) { Py_DECREF(tmpl); return NULL; }
    }
    Py_XSETREF(S.template, tmpl);
    Py_CLEAR(S.topic); Py_CLEAR(S.bhost); Py_CLEAR(S.shost);
    for (int i = 0; i < NCACHE; i++) Py_CLEAR(S.name[i]);
    if (rmq_json_configure(js) < 0) return NULL;
    S.configured = 1;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"configure", (PyCFunction)(void (*)(void))configure, METH_VARARGS | METH_KEYWORDS, configure_doc},
    {"rows", rows, METH_VARARGS,
     "rows(buf, pos, limit, end, base, file, max_size, body_mode, out, cap) -> (new_pos, count): append the "
     "dump rows of the common units from pos (starting before limit, at most cap) to out."},
    {"columns", columns, METH_VARARGS,
     "columns(buf, pos, limit, end, base, file, max_size, body_mode, by_topic, new_entry, cap) -> (new_pos, count): "
     "rows() column-wise, by topic: by_topic maps a topic to one column per row key (new_entry() makes one); "
     "each unit appends its values (None where the row lacks the key) to its topic's columns: a list, or for "
     "integer values a bytearray of native int64. After an error they may be uneven."},
    {"json_rows", json_rows, METH_VARARGS,
     "json_rows(buf, pos, limit, end, base, file_json, max_size, body_mode, cap) -> (new_pos, count, bytes): "
     "the NDJSON lines write_ndjson would write for those rows (units needing the Python path end the run)."},
    {"json_fill", json_fill, METH_VARARGS,
     "json_fill(buf, pos, limit, end, base, file_json, max_size, body_mode, cap, out, at, flush) -> (new_pos, "
     "count, at): json_rows()' lines written into the bytearray out from index at (out grows when a line needs "
     "room; its size is its capacity), the run also ending at a unit whose body CRC fails (left to the dict "
     "lane) and once at >= flush; at: where the lines written end."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "rmqdump", "RocketMQ dump rows in C", -1, methods};

PyObject *rmq_dump_module(void)   /* one part of the rmqcore module (rmqcore.c) */ { return PyModule_Create(&module); }
