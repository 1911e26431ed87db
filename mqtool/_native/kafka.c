/* mqtool/_native/kafka.c: the Kafka v2 records-area walker (optional compiled helper).
 *
 * Replaces two pure-Python loops of mqtool/kafka:
 *   parse_records(data, count)  == mqtool.kafka.records.parse_records (the varint walk of DefaultRecord)
 *   record_rows(...)            == the `dump kafka --deep / --print-data` record rows of a batch
 *                                  (mqtool.kafka.dump.record_row over mqtool.kafka.records.iter_records)
 *   record_json(...)            == those rows as the NDJSON lines mqtool.render.write_ndjson writes
 *   group_lines(...)            == for each batch of a group: its own line (given) and the lines of its records
 *                                  as the bytes that writer writes (newline after each), the records area inflated
 *                                  here for snappy, lz4 and zstd (mqtool.kafka.dump.BatchLines)
 *   frame_candidate(...)        == the shape test of mqtool.kafka.scan._shape_ok at every byte position
 *                                  (mqtool carve's search for batches and legacy messages)
 *   walk_batches(...)           == mqtool.kafka.scan.scan over a run of v2 batches whose CRC-32C holds (the
 *                                  header fields of each, as struct.unpack_from gives them); it stops at anything
 *                                  else, for the Python walk to read
 *
 * The record layout is the construct schema formats/kafka.py `K.Record`; this file implements exactly the
 * field sequence spelled in RECORD_LAYOUT below, and mqtool/kafka/records.py derives the same string from
 * the schema at import time and uses this helper only when the two are equal. Row keys, their order and
 * the batch-level values come from Python (a template dict and a key tuple given to configure()).
 *
 * Contract: whenever the bytes are anything but a clean records area (a length running past its record or
 * the area, a negative header key length, a header count out of range, a varint over 64 bits, bytes left
 * over, an offset/timestamp that would overflow int64), the functions return None and the caller runs the
 * Python code, which gives the precise error. Every length is checked against the bytes left before any
 * byte is read. Buffers come in through the buffer protocol and are released on every path; no pointer is
 * kept past a call. The GIL is held while Python objects are built; group_lines releases it while it inflates,
 * walks and writes.
 *
 * Memory: no call builds more than MAX_RECORDS_PER_CALL records, nor a record with more headers than the
 * optional last argument max_headers (the cap of mqtool.kafka.records.limits()); such input is declined
 * (None), and Python streams it in bounded groups or reports the cap as a finding. group_lines inflates into a
 * per-thread buffer of at most its `limit` (mqtool.kafka.records.NATIVE_AREA_MAX) whatever a stream states,
 * declining anything larger, and keeps a per-thread line buffer of at most LINES_KEPT between calls.
 */
#include "mqcore.h"             /* Python.h first; UTF-8, JSON strings */

/* The schema this walker implements, in the notation of mqtool.kafka.records._layout(K.Record). */
#define RECORD_LAYOUT                                                                                   \
    "prefixed(zigzag,{attributes=int>b,timestampDelta=zigzag,offsetDelta=zigzag,keyLength=zigzag,"     \
    "key=if((this['keyLength'] >= 0),bytes(this['keyLength']),pass),valueLength=zigzag,"                \
    "value=if((this['valueLength'] >= 0),bytes(this['valueLength']),pass),headerCount=zigzag,"          \
    "headers=array(this['headerCount'],{headerKeyLength=zigzag,headerKey=bytes(this['headerKeyLength'])," \
    "headerValueLength=zigzag,headerValue=if((this['headerValueLength'] >= 0),"                         \
    "bytes(this['headerValueLength']),pass)})})"

#define MAX_RECORDS_PER_CALL 65536
static int64_t max_headers = INT64_MAX;     /* set from each call's optional last argument (GIL held) */

/* Row keys, set by configure(): the order is fixed here, the spelling comes from Python. */
enum { K_OFFSET, K_TIMESTAMP, K_SIZE, K_KEY_SIZE, K_VALUE_SIZE, K_SEQUENCE, K_HEADER_KEYS, K_KEY, K_VALUE,
       K_HEADERS, N_KEYS };
static PyObject *row_keys[N_KEYS];

/* One record, located (offsets into the area) and fully bounds-checked by walk_record. */
typedef struct {
    int64_t length;          /* the record's length varint */
    int attributes;          /* the attributes byte, unsigned as Python's data[i] gives it */
    int64_t ts_delta, off_delta;
    Py_ssize_t key_off, value_off;
    int64_t key_len, value_len;  /* < 0: null */
    Py_ssize_t headers_off;  /* first byte after the header count */
    int64_t header_count;
    int headers_zero_byte;   /* the header count was the single byte 0 (Python gives () rather than []) */
    Py_ssize_t end;          /* index after the record */
} rec_t;

/* Zigzag varint (up to 10 bytes, value < 2^64) at p[*i], reading only below lim. 0 = ok, -1 = decline
 * (runs past lim, or is wider than 64 bits: Python would give a wider int or raise). */
static inline int read_zigzag(const uint8_t *p, Py_ssize_t lim, Py_ssize_t *i, int64_t *out)
{
    Py_ssize_t j = *i;
    if (j < lim && p[j] < 0x80) {            /* the common one-byte case */
        uint64_t v = p[j];
        *i = j + 1;
        *out = (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
        return 0;
    }
    uint64_t v = 0;
    int shift = 0;
    for (;;) {
        if (j >= lim)
            return -1;
        uint8_t x = p[j++];
        if (shift == 63 && (x & 0x7F) > 1)
            return -1;
        v |= (uint64_t)(x & 0x7F) << shift;
        if (x < 0x80)
            break;
        shift += 7;
        if (shift > 63)
            return -1;
    }
    *i = j;
    *out = (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
    return 0;
}

/* A nullable byte field (zigzag length, -1 = null, then the bytes) at p[*i], inside p[:end]: its length and
 * start go to *len and *off, *i moves past it. -1 when it does not fit (decline). */
static int skip_nullable(const uint8_t *p, Py_ssize_t end, Py_ssize_t *i, int64_t *len, Py_ssize_t *off)
{
    int64_t v;
    if (read_zigzag(p, end, i, &v) < 0)
        return -1;
    *len = v;
    *off = *i;
    if (v >= 0) {
        if (v > (int64_t)(end - *i))
            return -1;
        *i += (Py_ssize_t)v;
    }
    return 0;
}

/* Locate and check the record at data[i] (area of n bytes). Every field must end inside the record and the
 * fields must end exactly at its length; otherwise -1 (decline). */
static int walk_record_mh(const uint8_t *p, Py_ssize_t n, Py_ssize_t i, rec_t *r, int64_t mh)
{
    int64_t len, v;
    if (read_zigzag(p, n, &i, &len) < 0 || len < 1 || len > (int64_t)(n - i))
        return -1;
    r->length = len;
    Py_ssize_t end = i + (Py_ssize_t)len;
    r->end = end;
    r->attributes = p[i++];                                   /* attributes: Int8 (len >= 1 checked) */
    if (read_zigzag(p, end, &i, &r->ts_delta) < 0 || read_zigzag(p, end, &i, &r->off_delta) < 0)
        return -1;
    if (skip_nullable(p, end, &i, &r->key_len, &r->key_off) < 0          /* keyLength, key */
        || skip_nullable(p, end, &i, &r->value_len, &r->value_off) < 0)  /* valueLength, value */
        return -1;
    if (i >= end)                                             /* headerCount */
        return -1;
    r->headers_zero_byte = p[i] == 0;
    if (read_zigzag(p, end, &i, &v) < 0 || v < 0 || v > len || v > mh)
        return -1;
    r->header_count = v;
    r->headers_off = i;
    for (int64_t h = 0; h < r->header_count; h++) {
        if (read_zigzag(p, end, &i, &v) < 0 || v < 0 || v > (int64_t)(end - i))   /* key: never null */
            return -1;
        i += (Py_ssize_t)v;
        int64_t vlen;
        Py_ssize_t voff;
        if (skip_nullable(p, end, &i, &vlen, &voff) < 0)                 /* value: nullable */
            return -1;
    }
    return i == end ? 0 : -1;
}

#define walk_record(p, n, i, r) walk_record_mh(p, n, i, r, max_headers)

/* bytes, str (UTF-8 with replacement characters) or None for a (offset, length<0 = null) field. */
static PyObject *field_obj(const uint8_t *p, Py_ssize_t off, int64_t len, int text)
{
    if (len < 0)
        Py_RETURN_NONE;
    if (text)
        return PyUnicode_DecodeUTF8((const char *)p + off, (Py_ssize_t)len, "replace");
    return PyBytes_FromStringAndSize((const char *)p + off, (Py_ssize_t)len);
}

/* Header i of a checked record: advances *q past it, gives key and value offsets/lengths. */
static void next_header(const uint8_t *p, Py_ssize_t end, Py_ssize_t *q, Py_ssize_t *ko, int64_t *kl,
                        Py_ssize_t *vo, int64_t *vl)
{
    /* walk_record checked these bytes already: the reads cannot fail */
    (void)read_zigzag(p, end, q, kl);
    *ko = *q;
    *q += (Py_ssize_t)*kl;
    (void)read_zigzag(p, end, q, vl);
    *vo = *q;
    if (*vl >= 0)
        *q += (Py_ssize_t)*vl;
}

/* The headers of a checked record as parse_records gives them: () or [(key bytes, value bytes|None)]. */
static PyObject *headers_tuples(const uint8_t *p, const rec_t *r)
{
    if (r->headers_zero_byte)
        return PyTuple_New(0);
    PyObject *list = PyList_New((Py_ssize_t)r->header_count);
    if (list == NULL)
        return NULL;
    Py_ssize_t q = r->headers_off, ko, vo;
    int64_t kl = 0, vl = 0;
    for (Py_ssize_t h = 0; h < (Py_ssize_t)r->header_count; h++) {
        next_header(p, r->end, &q, &ko, &kl, &vo, &vl);
        PyObject *t = PyTuple_New(2);
        if (t == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, h, t);             /* the list owns t: one DECREF of the list frees both */
        PyObject *k = field_obj(p, ko, kl, 0);
        if (k == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyTuple_SET_ITEM(t, 0, k);
        PyObject *v = field_obj(p, vo, vl, 0);
        if (v == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyTuple_SET_ITEM(t, 1, v);
    }
    return list;
}

/* Get a readable contiguous buffer; -1 with an exception set if the object has none. */
static int get_buffer(PyObject *obj, Py_buffer *view)
{
    return PyObject_GetBuffer(obj, view, PyBUF_SIMPLE);
}

/* parse_records(data, count) -> (list of (size, attributes, timestampDelta, offsetDelta, key, value,
 * headers), end index) exactly as mqtool.kafka.records.parse_records, or None (let Python decide). */
static PyObject *parse_records(PyObject *self, PyObject *args)
{
    PyObject *obj;
    Py_ssize_t count;
    long long mh = INT64_MAX;
    if (!PyArg_ParseTuple(args, "On|L", &obj, &count, &mh))
        return NULL;
    max_headers = mh;
    Py_buffer view;
    if (get_buffer(obj, &view) < 0)
        return NULL;
    const uint8_t *p = (const uint8_t *)view.buf;
    Py_ssize_t n = view.len, i = 0;
    PyObject *out = NULL, *result = NULL;
    if (count < 0 || count > n || count > MAX_RECORDS_PER_CALL)   /* records are >= 2 bytes: no huge list */
        goto decline;
    out = PyList_New(count);
    if (out == NULL)
        goto done;
    for (Py_ssize_t k = 0; k < count; k++) {
        rec_t r;
        if (walk_record(p, n, i, &r) < 0)
            goto decline;
        PyObject *t = PyTuple_New(7);
        if (t == NULL)
            goto done;
        PyList_SET_ITEM(out, k, t);              /* owned by the list from here: fill, or fail with it */
        for (int f = 0; f < 7; f++) {            /* one at a time: stop at the first failure */
            PyObject *item;
            switch (f) {
            case 0: item = PyLong_FromLongLong(r.length); break;
            case 1: item = PyLong_FromLong(r.attributes); break;
            case 2: item = PyLong_FromLongLong(r.ts_delta); break;
            case 3: item = PyLong_FromLongLong(r.off_delta); break;
            case 4: item = field_obj(p, r.key_off, r.key_len, 0); break;
            case 5: item = field_obj(p, r.value_off, r.value_len, 0); break;
            default: item = headers_tuples(p, &r); break;
            }
            if (item == NULL)
                goto done;                       /* NULL slots are fine for the tuple's deallocator */
            PyTuple_SET_ITEM(t, f, item);
        }
        i = r.end;
    }
    result = Py_BuildValue("(On)", out, i);
    goto done;
decline:
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(out);
    PyBuffer_Release(&view);
    return result;
}

/* Set row[key] = value, stealing the reference to value; -1 on error (value NULL counts as an error). */
static inline int set_steal(PyObject *row, int key, PyObject *value)
{
    if (value == NULL)
        return -1;
    int rc = PyDict_SetItem(row, row_keys[key], value);
    Py_DECREF(value);
    return rc;
}

/* One record row: a copy of the template with the record's own fields set in place (key order kept). */
/* Is the records area p[0:n] exactly `count` clean records whose offsets (and timestamps, when tsk) fit in
 * 64 bits? Both builders check this first, so a damaged area is left whole to the Python parser. */
#define utf8_seq mq_utf8_seq   /* mqcore.h */

/* Is p[off:off+len] text (valid UTF-8; a null field counts as text)? */
static inline int is_text(const uint8_t *p, Py_ssize_t off, int64_t len)
{
    return len <= 0 || mq_utf8_ok(p + off, (Py_ssize_t)len);
}

/* Is every string this row shows valid UTF-8: header keys always, with text also keys, values and header
 * values? Bytes that are not are given losslessly (base64 + marker) by the Python rows, so such an area is
 * left to them. */
static int area_text(const uint8_t *p, const rec_t *r, int text)
{
    if (text && (!is_text(p, r->key_off, r->key_len) || !is_text(p, r->value_off, r->value_len)))
        return 0;
    Py_ssize_t q = r->headers_off, ko, vo;
    int64_t kl = 0, vl = 0;
    for (Py_ssize_t h = 0; h < (Py_ssize_t)r->header_count; h++) {
        next_header(p, r->end, &q, &ko, &kl, &vo, &vl);
        if (!is_text(p, ko, kl) || (text && !is_text(p, vo, vl)))
            return 0;
    }
    return 1;
}

static int area_clean_mh(const uint8_t *p, Py_ssize_t n, Py_ssize_t count, long long base, long long ts0,
                         int tsk, int text, int64_t mh)
{
    Py_ssize_t i = 0;
    if (count < 0 || count > n || count > MAX_RECORDS_PER_CALL)
        return 0;
    for (Py_ssize_t k = 0; k < count; k++) {
        rec_t r;
        int64_t off, ts;
        if (walk_record_mh(p, n, i, &r, mh) < 0 || __builtin_add_overflow((int64_t)base, r.off_delta, &off)
            || (tsk && __builtin_add_overflow((int64_t)ts0, r.ts_delta, &ts)) || !area_text(p, &r, text))
            return 0;
        i = r.end;
    }
    return i == n;
}

#define area_clean(p, n, count, base, ts0, tsk, text) area_clean_mh(p, n, count, base, ts0, tsk, text, max_headers)

/* A record's offset, timestamp and producer sequence from its batch's base values (area_clean() has
 * ruled out overflow). Python's (seq + od) & 0x7FFFFFFF is the low 31 bits, the same in wrapping unsigned
 * arithmetic. */
static inline void record_ids(const rec_t *r, long long base, long long ts0, int tsk, long long seq,
                              int64_t *offset, int64_t *timestamp, int64_t *sequence)
{
    *offset = (int64_t)base + r->off_delta;
    *timestamp = tsk ? (int64_t)ts0 + r->ts_delta : (int64_t)ts0;
    *sequence = seq >= 0 ? (int64_t)(((uint64_t)seq + (uint64_t)r->off_delta) & 0x7FFFFFFFu) : -1;
}

static PyObject *build_row(const uint8_t *p, const rec_t *r, PyObject *template, int64_t offset,
                           int64_t timestamp, int64_t sequence, int text)
{
    PyObject *row = PyDict_Copy(template);
    if (row == NULL)
        return NULL;
    PyObject *hkeys = PyList_New((Py_ssize_t)r->header_count);
    PyObject *hlist = text ? PyList_New((Py_ssize_t)r->header_count) : NULL;
    if (hkeys == NULL || (text && hlist == NULL))
        goto fail;
    Py_ssize_t q = r->headers_off, ko, vo;
    int64_t kl = 0, vl = 0;
    for (Py_ssize_t h = 0; h < (Py_ssize_t)r->header_count; h++) {
        next_header(p, r->end, &q, &ko, &kl, &vo, &vl);
        PyObject *k = field_obj(p, ko, kl, 1);
        if (k == NULL)
            goto fail;
        PyList_SET_ITEM(hkeys, h, k);
        if (text) {                              /* [key, value] in stored order, repeated keys kept */
            PyObject *v = field_obj(p, vo, vl, 1);
            PyObject *pair = v != NULL ? PyList_New(2) : NULL;
            if (pair == NULL) {
                Py_XDECREF(v);
                goto fail;
            }
            PyList_SET_ITEM(pair, 0, Py_NewRef(k));
            PyList_SET_ITEM(pair, 1, v);
            PyList_SET_ITEM(hlist, h, pair);
        }
    }
    if (set_steal(row, K_OFFSET, PyLong_FromLongLong(offset)) < 0
        || set_steal(row, K_TIMESTAMP, PyLong_FromLongLong(timestamp)) < 0
        || set_steal(row, K_SIZE, PyLong_FromLongLong(r->length)) < 0
        || set_steal(row, K_KEY_SIZE, PyLong_FromLongLong(r->key_len < 0 ? -1 : r->key_len)) < 0
        || set_steal(row, K_VALUE_SIZE, PyLong_FromLongLong(r->value_len < 0 ? -1 : r->value_len)) < 0
        || set_steal(row, K_SEQUENCE, PyLong_FromLongLong(sequence)) < 0)
        goto fail;
    int rc = PyDict_SetItem(row, row_keys[K_HEADER_KEYS], hkeys);
    Py_CLEAR(hkeys);
    if (rc < 0)
        goto fail;
    if (text) {
        if (set_steal(row, K_KEY, field_obj(p, r->key_off, r->key_len, 1)) < 0
            || set_steal(row, K_VALUE, field_obj(p, r->value_off, r->value_len, 1)) < 0)
            goto fail;
        rc = PyDict_SetItem(row, row_keys[K_HEADERS], hlist);
        Py_CLEAR(hlist);
        if (rc < 0)
            goto fail;
    }
    return row;
fail:
    Py_XDECREF(hkeys);
    Py_XDECREF(hlist);
    Py_DECREF(row);
    return NULL;
}

/* record_rows(data, count, base_offset, ts0, ts_k, base_sequence, template, text) -> list of row dicts,
 * or None (let Python decide). Per record, as mqtool.kafka.records.iter_records computes them:
 *   offset = base_offset + offsetDelta; timestamp = ts0 + ts_k * timestampDelta (ts_k is 0 or 1);
 *   sequence = (base_sequence + offsetDelta) & 0x7FFFFFFF, or -1 when base_sequence < 0.
 * text=0: the --deep row (header_keys only); text=1: --print-data --body text (key, value, headers too). */
static PyObject *record_rows(PyObject *self, PyObject *args)
{
    PyObject *obj, *template;
    Py_ssize_t count;
    long long base, ts0, seq;
    int tsk, text;
    long long mh = INT64_MAX;
    if (!PyArg_ParseTuple(args, "OnLLiLO!p|L", &obj, &count, &base, &ts0, &tsk, &seq, &PyDict_Type, &template,
                          &text, &mh))
        return NULL;
    max_headers = mh;
    if (row_keys[0] == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "kafka helper: configure() was not called");
        return NULL;
    }
    if (tsk != 0 && tsk != 1)
        Py_RETURN_NONE;
    Py_buffer view;
    if (get_buffer(obj, &view) < 0)
        return NULL;
    const uint8_t *p = (const uint8_t *)view.buf;
    Py_ssize_t n = view.len, i = 0;
    PyObject *out = NULL, *result = NULL;
    /* first pass: the whole area must be clean before any object is built (no work thrown away on the
     * rare damaged batch, and no partial answer) */
    if (!area_clean(p, n, count, base, ts0, tsk, text))
        goto decline;
    out = PyList_New(count);
    if (out == NULL)
        goto done;
    i = 0;
    for (Py_ssize_t k = 0; k < count; k++) {
        rec_t r;
        (void)walk_record(p, n, i, &r);
        int64_t offset, timestamp, sequence;
        record_ids(&r, base, ts0, tsk, seq, &offset, &timestamp, &sequence);
        PyObject *row = build_row(p, &r, template, offset, timestamp, sequence, text);
        if (row == NULL)
            goto done;
        PyList_SET_ITEM(out, k, row);
        i = r.end;
    }
    result = Py_NewRef(out);
    goto done;
decline:
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(out);
    PyBuffer_Release(&view);
    return result;
}

/* ---- NDJSON lines straight from the records area (dump kafka --json) ---------------------------------
 * The line of a record is the row record_row builds, as mqtool.render.write_ndjson writes it with orjson:
 * Python renders a template row with placeholders and passes the constant pieces between them (`segs`) and
 * which field fills each gap (`order`, codes = the enum above); this code writes the fields the way orjson
 * writes them (ints in decimal, null, strings as UTF-8 with ", \ and control characters escaped). */

/* The output buffer: plain malloc memory and no Python call, so the lines can be written without the GIL;
 * running out of memory sets `oom` (the caller raises MemoryError once it holds the GIL again). */
typedef struct { char *p; Py_ssize_t len, cap; int oom; } out_t;

static int out_reserve(out_t *o, Py_ssize_t more)
{
    if (o->len + more <= o->cap)
        return 0;
    Py_ssize_t cap = o->cap ? o->cap : 65536;
    while (cap < o->len + more) {
        if (cap > PY_SSIZE_T_MAX / 2) {
            o->oom = 1;
            return -1;
        }
        cap *= 2;
    }
    char *np = realloc(o->p, (size_t)cap);
    if (np == NULL) {
        o->oom = 1;
        return -1;
    }
    o->p = np;
    o->cap = cap;
    return 0;
}

static inline int out_put(out_t *o, const char *s, Py_ssize_t n)
{
    if (out_reserve(o, n) < 0)
        return -1;
    memcpy(o->p + o->len, s, (size_t)n);
    o->len += n;
    return 0;
}

static int out_int(out_t *o, int64_t v)
{
    if (out_reserve(o, 24) < 0)
        return -1;
    o->len = mq_fmt_i64(o->p + o->len, v) - o->p;        /* mqcore.h: two digits at a time */
    return 0;
}

/* A JSON string of bytes escaped as orjson does (mqcore.h). Returns 1 if the bytes are not valid UTF-8
 * (nothing written then), 0 ok, -1 error. */
static int out_escaped(out_t *o, const uint8_t *s, Py_ssize_t n)
{
    if (out_reserve(o, 6 * n + 2) < 0)                   /* worst case: every byte as \u00xx */
        return -1;
    char *d = mq_json_str(o->p + o->len, s, n, 1);
    if (d == NULL)
        return 1;
    o->len = d - o->p;
    return 0;
}

/* Bytes as a JSON string. Only strings area_clean() has found valid UTF-8 come here (then the string is that of
 * bytes.decode("utf-8", "replace") too); anything else gives -2: decline, let Python give the row. */
static int out_text(out_t *o, const uint8_t *s, Py_ssize_t n)
{
    int rc = out_escaped(o, s, n);
    return rc == 1 ? -2 : rc;
}

static int out_nullable_text(out_t *o, const uint8_t *p, Py_ssize_t off, int64_t len)
{
    return len < 0 ? out_put(o, "null", 4) : out_text(o, p + off, (Py_ssize_t)len);
}

static int out_field(out_t *o, int code, const uint8_t *p, const rec_t *r, int64_t offset, int64_t timestamp,
                     int64_t sequence)
{
    Py_ssize_t q = r->headers_off, ko, vo;
    int64_t kl = 0, vl = 0;
    switch (code) {
    case K_OFFSET: return out_int(o, offset);
    case K_TIMESTAMP: return out_int(o, timestamp);
    case K_SIZE: return out_int(o, r->length);
    case K_KEY_SIZE: return out_int(o, r->key_len < 0 ? -1 : r->key_len);
    case K_VALUE_SIZE: return out_int(o, r->value_len < 0 ? -1 : r->value_len);
    case K_SEQUENCE: return out_int(o, sequence);
    case K_KEY: return out_nullable_text(o, p, r->key_off, r->key_len);
    case K_VALUE: return out_nullable_text(o, p, r->value_off, r->value_len);
    case K_HEADER_KEYS:
    case K_HEADERS:                  /* ["k",...] or [["k","v"|null],...]: stored order, repeated keys kept */
        if (out_put(o, "[", 1) < 0)
            return -1;
        for (Py_ssize_t h = 0; h < (Py_ssize_t)r->header_count; h++) {
            next_header(p, r->end, &q, &ko, &kl, &vo, &vl);
            if ((h && out_put(o, ",", 1) < 0) || (code == K_HEADERS && out_put(o, "[", 1) < 0)
                || out_text(o, p + ko, (Py_ssize_t)kl) < 0)
                return -1;
            if (code == K_HEADERS && (out_put(o, ",", 1) < 0 || out_nullable_text(o, p, vo, vl) < 0
                                      || out_put(o, "]", 1) < 0))
                return -1;
        }
        return out_put(o, "]", 1);
    }
    return -1;                       /* (codes are checked before the walk) */
}

/* The constant pieces of a line and the fields between them (record_json, group_lines), checked with the GIL
 * held; the bytes objects stay referenced by the caller's arguments while the lines are written. `extra`: ints a
 * field code >= N_KEYS stands for (the batch's own numbers in a line cut once per template: code N_KEYS + j
 * writes extra[j]). */
#define MAX_EXTRA 4
typedef struct {
    Py_ssize_t nf;
    int codes[16];
    int64_t xv[MAX_EXTRA];
    const char *sp[17];
    Py_ssize_t sn[17];
    int text;                    /* a field shows keys, values or header values as text */
    /* the same line with the extra ints written into the constant pieces (once per template, not per record):
     * piece k is fp[k][0:fn[k]], then the record field fc[k] (k < np - 1; the last piece ends the line) */
    Py_ssize_t np, flen;         /* pieces; their total length */
    const char *fp[17];
    Py_ssize_t fn[17];
    int fc[17];
    char *own;                   /* the merged pieces' bytes (malloc), or NULL */
} tpl_t;

static void tpl_free(tpl_t *t)
{
    free(t->own);
    t->own = NULL;
}

/* The flattened pieces of t (see tpl_t); -1 with MemoryError set. */
static int tpl_flatten(tpl_t *t)
{
    Py_ssize_t room = 0;
    int extras = 0;
    for (Py_ssize_t f = 0; f <= t->nf; f++) {
        room += t->sn[f];
        if (f < t->nf && t->codes[f] >= N_KEYS) {
            room += 24;
            extras = 1;
        }
    }
    t->own = NULL;
    t->np = 0;
    t->flen = 0;
    if (!extras) {                       /* the segments themselves */
        for (Py_ssize_t f = 0; f <= t->nf; f++) {
            t->fp[f] = t->sp[f];
            t->fn[f] = t->sn[f];
            t->fc[f] = f < t->nf ? t->codes[f] : -1;
            t->flen += t->sn[f];
        }
        t->np = t->nf + 1;
        return 0;
    }
    char *d = t->own = malloc(room ? (size_t)room : 1);
    if (d == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    const char *start = d;
    for (Py_ssize_t f = 0; f <= t->nf; f++) {
        memcpy(d, t->sp[f], (size_t)t->sn[f]);
        d += t->sn[f];
        int c = f < t->nf ? t->codes[f] : -1;
        if (c >= N_KEYS) {
            d = mq_fmt_i64(d, t->xv[c - N_KEYS]);
            continue;
        }
        t->fp[t->np] = start;
        t->fn[t->np] = d - start;
        t->fc[t->np] = c;
        t->flen += d - start;
        t->np++;
        start = d;
    }
    return 0;
}

static int tpl_init(tpl_t *t, PyObject *segs, PyObject *order, PyObject *extra)
{
    Py_ssize_t nf = PyTuple_GET_SIZE(order);
    Py_ssize_t nx = extra == NULL ? 0 : PyTuple_GET_SIZE(extra);
    t->own = NULL;
    if (PyTuple_GET_SIZE(segs) != nf + 1 || nf > 16 || nx > MAX_EXTRA) {
        PyErr_SetString(PyExc_ValueError, "record_json: len(segs) must be len(order) + 1 (at most 16 fields, "
                                          "4 extra ints)");
        return -1;
    }
    t->nf = nf;
    t->text = 0;
    for (Py_ssize_t j = 0; j < nx; j++) {
        long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(extra, j));
        if (v == -1 && PyErr_Occurred())
            return -1;
        t->xv[j] = v;
    }
    for (Py_ssize_t f = 0; f <= nf; f++) {
        PyObject *seg = PyTuple_GET_ITEM(segs, f);
        if (!PyBytes_Check(seg)) {
            PyErr_SetString(PyExc_TypeError, "record_json: segs must be bytes");
            return -1;
        }
        t->sp[f] = PyBytes_AS_STRING(seg);
        t->sn[f] = PyBytes_GET_SIZE(seg);
        if (f < nf) {
            long c = PyLong_AsLong(PyTuple_GET_ITEM(order, f));
            if (c == -1 && PyErr_Occurred())
                return -1;
            if (c < 0 || c >= N_KEYS + nx) {
                PyErr_SetString(PyExc_ValueError, "record_json: unknown field code");
                return -1;
            }
            t->codes[f] = (int)c;
            t->text |= c == K_KEY || c == K_VALUE || c == K_HEADERS;
        }
    }
    return tpl_flatten(t);
}

/* A record field at d, without bounds checks: the caller reserved line_room() bytes. Every string shown was
 * found valid UTF-8 by area_text() first, so it is escaped without a second check. */
static inline char *put_nullable_text(char *d, const uint8_t *p, Py_ssize_t off, int64_t len)
{
    if (len < 0) {
        memcpy(d, "null", 4);
        return d + 4;
    }
    return mq_json_str(d, p + off, (Py_ssize_t)len, 0);
}

static char *put_field(char *d, int code, const uint8_t *p, const rec_t *r, int64_t offset, int64_t timestamp,
                       int64_t sequence)
{
    Py_ssize_t q = r->headers_off, ko, vo;
    int64_t kl = 0, vl = 0;
    switch (code) {
    case K_OFFSET: return mq_fmt_i64(d, offset);
    case K_TIMESTAMP: return mq_fmt_i64(d, timestamp);
    case K_SIZE: return mq_fmt_i64(d, r->length);
    case K_KEY_SIZE: return mq_fmt_i64(d, r->key_len < 0 ? -1 : r->key_len);
    case K_VALUE_SIZE: return mq_fmt_i64(d, r->value_len < 0 ? -1 : r->value_len);
    case K_SEQUENCE: return mq_fmt_i64(d, sequence);
    case K_KEY: return put_nullable_text(d, p, r->key_off, r->key_len);
    case K_VALUE: return put_nullable_text(d, p, r->value_off, r->value_len);
    case K_HEADER_KEYS:
    case K_HEADERS:                  /* ["k",...] or [["k","v"|null],...]: stored order, repeated keys kept */
        *d++ = '[';
        for (Py_ssize_t h = 0; h < (Py_ssize_t)r->header_count; h++) {
            next_header(p, r->end, &q, &ko, &kl, &vo, &vl);
            if (h)
                *d++ = ',';
            if (code == K_HEADERS)
                *d++ = '[';
            d = mq_json_str(d, p + ko, (Py_ssize_t)kl, 0);
            if (code == K_HEADERS) {
                *d++ = ',';
                d = put_nullable_text(d, p, vo, vl);
                *d++ = ']';
            }
        }
        *d++ = ']';
        return d;
    }
    return d;                        /* (codes are checked by tpl_init) */
}

/* Room enough for the line of record r under t: the constant pieces, 20 characters per number, and every string
 * at its worst (6 characters a byte, 2 quotes; header keys may be shown twice: header_keys and headers) -- or -1
 * for a record too long to reserve that much at once (its line is written field by field, each checked). */
#define LINE_ROOM_RECORD_MAX (64 << 10)
static inline Py_ssize_t line_room(const tpl_t *t, const rec_t *r)
{
    if (r->length > LINE_ROOM_RECORD_MAX)
        return -1;
    return t->flen + 24 * (t->np + 1) + 12 * (Py_ssize_t)r->length + 16 * ((Py_ssize_t)r->header_count + 2) + 2;
}

/* The lines of the records area p[0:n] into *o (each followed by "\n" when `nl`, else joined by "\n"), in one
 * walk with the checks of area_clean(): a record that is not clean takes back what was written and declines. No
 * Python object is touched (callable without the GIL). Returns 1 written, 0 declined (let Python decide), -1 out
 * of memory. */
static int write_lines(out_t *o, const uint8_t *p, Py_ssize_t n, Py_ssize_t count, long long base, long long ts0,
                       int tsk, long long seq, const tpl_t *t, int nl, int64_t mh)
{
    Py_ssize_t i = 0, start = o->len;
    if ((tsk != 0 && tsk != 1) || count < 0 || count > n || count > MAX_RECORDS_PER_CALL)
        return 0;
    for (Py_ssize_t k = 0; k < count; k++) {
        rec_t r;
        int64_t off, ts;
        if (walk_record_mh(p, n, i, &r, mh) < 0 || __builtin_add_overflow((int64_t)base, r.off_delta, &off)
            || (tsk && __builtin_add_overflow((int64_t)ts0, r.ts_delta, &ts)) || !area_text(p, &r, t->text))
            goto fail;
        int64_t offset, timestamp, sequence;
        record_ids(&r, base, ts0, tsk, seq, &offset, &timestamp, &sequence);
        if (!nl && k && out_put(o, "\n", 1) < 0)
            goto fail;
        Py_ssize_t room = line_room(t, &r);
        if (room >= 0) {                 /* one reservation, then plain stores */
            if (out_reserve(o, room) < 0)
                goto fail;
            char *d = o->p + o->len;
            for (Py_ssize_t f = 0; f < t->np; f++) {
                memcpy(d, t->fp[f], (size_t)t->fn[f]);
                d += t->fn[f];
                if (t->fc[f] >= 0)
                    d = put_field(d, t->fc[f], p, &r, offset, timestamp, sequence);
            }
            if (nl)
                *d++ = '\n';
            o->len = d - o->p;
            i = r.end;
            continue;
        }
        for (Py_ssize_t f = 0; f < t->np; f++) {
            if (out_put(o, t->fp[f], t->fn[f]) < 0)
                goto fail;
            if (t->fc[f] >= 0 && out_field(o, t->fc[f], p, &r, offset, timestamp, sequence) < 0)
                goto fail;
        }
        if (nl && out_put(o, "\n", 1) < 0)
            goto fail;
        i = r.end;
    }
    if (i == n)
        return 1;
fail:
    if (o->oom)
        return -1;
    o->len = start;              /* a string that is not text after all: decline */
    return 0;
}

/* record_json(data, count, base_offset, ts0, ts_k, base_sequence, segs, order[, max_headers[, extra]]) -> str of
 * the NDJSON lines of the batch's records (joined by "\n", no final newline), or None (let Python decide). segs:
 * tuple of len(order) + 1 bytes; order: tuple of field codes. Same checks and values as record_rows. */
static PyObject *record_json(PyObject *self, PyObject *args)
{
    PyObject *obj, *segs, *order, *extra = NULL;
    Py_ssize_t count;
    long long base, ts0, seq;
    int tsk;
    long long mh = INT64_MAX;
    if (!PyArg_ParseTuple(args, "OnLLiLO!O!|LO!", &obj, &count, &base, &ts0, &tsk, &seq, &PyTuple_Type, &segs,
                          &PyTuple_Type, &order, &mh, &PyTuple_Type, &extra))
        return NULL;
    max_headers = mh;
    tpl_t t;
    if (tpl_init(&t, segs, order, extra) < 0)
        return NULL;
    Py_buffer view;
    if (get_buffer(obj, &view) < 0) {
        tpl_free(&t);
        return NULL;
    }
    out_t o = {NULL, 0, 0, 0};
    PyObject *result = NULL;
    int rc = write_lines(&o, (const uint8_t *)view.buf, view.len, count, base, ts0, tsk, seq, &t, 0, mh);
    tpl_free(&t);
    PyBuffer_Release(&view);
    if (rc > 0)
        result = PyUnicode_DecodeUTF8(o.p ? o.p : "", o.len, "strict");
    else if (rc == 0)
        result = Py_NewRef(Py_None);
    else
        PyErr_NoMemory();
    free(o.p);
    return result;
}


/* ---- compressed records areas, inflated here (group_lines) -----------------------------------------------
 * The codecs of mqtool.codecs for Kafka payloads, for the streams they take without a question: functions of the
 * libraries mqtool already loads (lz4's block decoder from python-lz4, zstd's from the zstandard package), found
 * by configure_codecs(); snappy's raw format is decoded here. Whatever is not plainly well formed (a checksum that
 * fails, a frame without its content size, output past the limit, bytes after the end, an unknown flag) is
 * declined, and mqtool.codecs decodes the batch, or gives the precise error. Output goes into one buffer reused for
 * the batches of a call, never grown past `limit`. */
#include <dlfcn.h>

enum { AREA_PLAIN, AREA_SNAPPY, AREA_LZ4, AREA_ZSTD, N_AREA };
static int (*lz4_decompress_safe)(const char *, char *, int, int);
static struct {
    void *(*create)(void);
    size_t (*free_ctx)(void *);
    unsigned long long (*content_size)(const void *, size_t);
    size_t (*frame_size)(const void *, size_t);
    size_t (*decompress)(void *, void *, size_t, const void *, size_t);
    unsigned (*is_error)(size_t);
} zstd;
static uint8_t xerial_magic[16], lz4_magic[4];
static Py_ssize_t xerial_magic_len;
static int64_t lz4_block_max[8];         /* by the BD byte's block size id; 0 = not valid */

static inline uint32_t rd_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Raw snappy s[0:n] appended at d[*len] (room up to cap, and SLACK bytes after cap that may be written over):
 * 0 ok, -1 not a clean stream (declined). A stream is taken only when its stated length fits, every copy
 * reaches back inside the output and the input ends exactly where the stated length is reached. Short literals
 * and copies move 8 or 16 bytes at a time (writing up to SLACK bytes past their end, later overwritten). */
#define SLACK 32
static inline void copy8(uint8_t *d, const uint8_t *s)
{
    uint64_t x;
    memcpy(&x, s, 8);
    memcpy(d, &x, 8);
}

static int snappy_raw(const uint8_t *s, size_t n, uint8_t *d, size_t *len, size_t cap)
{
    size_t i = 0, want = 0;
    for (int shift = 0;; shift += 7) {              /* the length preamble: a varint of at most 32 bits */
        if (i >= n || shift > 28)
            return -1;
        uint8_t b = s[i++];
        if (shift == 28 && b > 0x0F)
            return -1;
        want |= (size_t)(b & 0x7F) << shift;
        if (b < 0x80)
            break;
    }
    if (want > cap - *len)
        return -1;
    uint8_t *out = d + *len, *o = out, *end = out + want;
    while (i < n) {
        uint8_t tag = s[i++];
        size_t l, off;
        if ((tag & 3) == 0) {                       /* literal */
            l = tag >> 2;
            if (l >= 60) {
                size_t nb = l - 59;
                if (nb > n - i)
                    return -1;
                l = 0;
                for (size_t k = 0; k < nb; k++)
                    l |= (size_t)s[i + k] << (8 * k);
                i += nb;
            }
            l += 1;
            if (l > n - i || l > (size_t)(end - o))
                return -1;
            if (l <= 16 && n - i >= 16) {
                copy8(o, s + i);
                copy8(o + 8, s + i + 8);
            } else {
                memcpy(o, s + i, l);
            }
            i += l;
            o += l;
            continue;
        }
        if ((tag & 3) == 1) {
            if (i >= n)
                return -1;
            l = ((tag >> 2) & 7) + 4;
            off = ((size_t)(tag >> 5) << 8) | s[i];
            i += 1;
        } else if ((tag & 3) == 2) {
            if (n - i < 2)
                return -1;
            l = (size_t)(tag >> 2) + 1;
            off = (size_t)s[i] | (size_t)s[i + 1] << 8;
            i += 2;
        } else {
            if (n - i < 4)
                return -1;
            l = (size_t)(tag >> 2) + 1;
            off = rd_le32(s + i);
            i += 4;
        }
        if (off == 0 || off > (size_t)(o - out) || l > (size_t)(end - o))
            return -1;
        if (off >= 16) {                            /* 16 bytes loaded before they are stored */
            for (size_t k = 0; k < l; k += 16) {
                uint64_t x, y;
                memcpy(&x, o - off + k, 8);
                memcpy(&y, o - off + k + 8, 8);
                memcpy(o + k, &x, 8);
                memcpy(o + k + 8, &y, 8);
            }
        } else if (off >= 8) {                      /* source and destination 8 bytes apart at least */
            for (size_t k = 0; k < l; k += 8)
                copy8(o + k, o - off + k);
        } else {
            for (size_t k = 0; k < l; k++)
                o[k] = o[k - off];
        }
        o += l;
    }
    if (o != end)
        return -1;
    *len += want;
    return 0;
}

/* mqtool.codecs._snappy_stream: snappy-java's xerial framing (magic, two ints, then int32-BE-sized raw blocks) or
 * one raw stream. */
static int unsnappy(const uint8_t *s, size_t n, uint8_t *d, size_t *len, size_t cap)
{
    size_t ml = (size_t)xerial_magic_len;
    if (!(ml && n >= ml && memcmp(s, xerial_magic, ml) == 0))
        return snappy_raw(s, n, d, len, cap);
    for (size_t pos = ml + 8; pos < n;) {
        if (n - pos < 4)
            return -1;
        int64_t bn = mq_rd_be(s + pos, 4);
        pos += 4;
        if (bn < 0 || (size_t)bn > n - pos || snappy_raw(s + pos, (size_t)bn, d, len, cap) < 0)
            return -1;
        pos += (size_t)bn;
    }
    return 0;
}

/* mqtool.codecs._lz4_stream: Kafka's LZ4 frame (the header checksum byte is skipped, block checksums are not
 * read, nothing after the end mark is looked at, as there). */
static int unlz4(const uint8_t *s, size_t n, uint8_t *d, size_t *len, size_t cap)
{
    if (lz4_decompress_safe == NULL || n < 7 || memcmp(s, lz4_magic, 4) != 0)
        return -1;
    int flg = s[4], bd = s[5];
    if ((flg >> 6) != 1)
        return -1;
    int64_t block_max = lz4_block_max[(bd >> 4) & 7];
    if (block_max <= 0)
        return -1;
    size_t pos = 6 + ((flg & 0x08) ? 8 : 0) + 1;
    for (;;) {
        if (pos > n || n - pos < 4)
            return -1;
        uint32_t word = rd_le32(s + pos);
        pos += 4;
        if (word == 0)
            return 0;
        size_t bn = word & 0x7FFFFFFFu;
        if ((int64_t)bn > block_max || bn > n - pos)
            return -1;
        size_t room = cap - *len;
        if (word & 0x80000000u) {
            if (bn > room)
                return -1;
            memcpy(d + *len, s + pos, bn);
            *len += bn;
        } else {
            if (room > (size_t)block_max)
                room = (size_t)block_max;
            int got = lz4_decompress_safe((const char *)s + pos, (char *)d + *len, (int)bn, (int)room);
            if (got < 0)
                return -1;
            *len += (size_t)got;
        }
        pos += bn + ((flg & 0x10) ? 4 : 0);
    }
}

/* mqtool.codecs._zstd_sized_frames: standard frames, each stating its content size, back to back to the end. */
static int unzstd(void **dctx, const uint8_t *s, size_t n, uint8_t *d, size_t *len, size_t cap)
{
    if (zstd.decompress == NULL || *dctx == NULL)
        return -1;
    while (n) {
        if (n < 4 || rd_le32(s) != 0xFD2FB528u)         /* a standard frame (not a skippable one) */
            return -1;
        unsigned long long size = zstd.content_size(s, n);
        if (size >= 0xFFFFFFFFFFFFFFFEULL || size > cap - *len)     /* unknown, error, too large */
            return -1;
        size_t fn = zstd.frame_size(s, n);
        if (zstd.is_error(fn) || fn > n)
            return -1;
        size_t got = zstd.decompress(*dctx, d + *len, (size_t)size, s, fn);
        if (zstd.is_error(got) || got != size)
            return -1;
        *len += got;
        s += fn;
        n -= fn;
    }
    return 0;
}

/* Per thread: the buffer areas are inflated into (at most limit + SLACK bytes, kept between calls) and a zstd
 * context; freed when the thread ends. */
#include <pthread.h>
typedef struct { out_t buf, lines; void *dctx; size_t (*free_ctx)(void *); } scratch_t;
static pthread_key_t scratch_key;
static int scratch_key_ok;

static void scratch_free(void *v)
{
    scratch_t *t = v;
    free(t->buf.p);
    free(t->lines.p);
    if (t->dctx != NULL)
        t->free_ctx(t->dctx);
    free(t);
}

static scratch_t *scratch_get(void)
{
    if (!scratch_key_ok)
        return NULL;
    scratch_t *t = pthread_getspecific(scratch_key);
    if (t == NULL && (t = calloc(1, sizeof *t)) != NULL && pthread_setspecific(scratch_key, t) != 0) {
        free(t);
        t = NULL;
    }
    return t;
}

/* The records area of a job into the scratch buffer (grown up to limit): 0 ok, -1 declined, -2 out of memory. */
static int inflate_area(int kind, const uint8_t *s, size_t n, scratch_t *t, size_t limit)
{
    out_t *scratch = &t->buf;
    if (kind == AREA_ZSTD && t->dctx == NULL && zstd.decompress != NULL && (t->dctx = zstd.create()) != NULL)
        t->free_ctx = zstd.free_ctx;
    if (scratch->cap < (Py_ssize_t)limit) {
        char *np = realloc(scratch->p, limit + SLACK);
        if (np == NULL)
            return -2;
        scratch->p = np;
        scratch->cap = (Py_ssize_t)limit;
    }
    size_t len = 0;
    int rc = kind == AREA_SNAPPY ? unsnappy(s, n, (uint8_t *)scratch->p, &len, limit)
           : kind == AREA_LZ4 ? unlz4(s, n, (uint8_t *)scratch->p, &len, limit)
           : kind == AREA_ZSTD ? unzstd(&t->dctx, s, n, (uint8_t *)scratch->p, &len, limit) : -1;
    scratch->len = (Py_ssize_t)len;
    return rc;
}

/* configure_codecs(lz4_library, zstd_library, xerial_magic, lz4_magic, lz4_block_max) -> (snappy, lz4, zstd)
 * booleans: which areas group_lines inflates itself. The libraries are the paths of shared objects mqtool's codec
 * packages ship (python-lz4's block module, zstandard's cffi module), or None; their functions are looked up by
 * name. lz4_block_max: ((block size id, bytes), ...). */
static PyObject *configure_codecs(PyObject *self, PyObject *args)
{
    PyObject *lz4_path, *zstd_path, *sizes;
    const char *xm, *lm;
    Py_ssize_t xn, ln;
    if (!PyArg_ParseTuple(args, "OOy#y#O!", &lz4_path, &zstd_path, &xm, &xn, &lm, &ln, &PyTuple_Type, &sizes))
        return NULL;
    if (xn > (Py_ssize_t)sizeof xerial_magic || ln != 4) {
        PyErr_SetString(PyExc_ValueError, "configure_codecs: bad magic");
        return NULL;
    }
    memcpy(xerial_magic, xm, (size_t)xn);
    xerial_magic_len = xn;
    memcpy(lz4_magic, lm, 4);
    memset(lz4_block_max, 0, sizeof lz4_block_max);
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(sizes); k++) {
        int id;
        long long size;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(sizes, k), "iL", &id, &size))
            return NULL;
        if (id >= 0 && id < 8 && size > 0 && size <= INT32_MAX)
            lz4_block_max[id] = size;
    }
    /* resolved into locals first: a call already running in another thread keeps seeing whole pointers */
    int (*lz4_fn)(const char *, char *, int, int) = NULL;
    __typeof__(zstd) z;
    memset(&z, 0, sizeof z);
    const char *lp = lz4_path == Py_None ? NULL : PyUnicode_AsUTF8(lz4_path);
    const char *zp = zstd_path == Py_None ? NULL : PyUnicode_AsUTF8(zstd_path);
    PyErr_Clear();
    void *h = lp != NULL ? dlopen(lp, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (h != NULL)
        *(void **)&lz4_fn = dlsym(h, "LZ4_decompress_safe");
    h = zp != NULL ? dlopen(zp, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (h != NULL) {
        *(void **)&z.create = dlsym(h, "ZSTD_createDCtx");
        *(void **)&z.free_ctx = dlsym(h, "ZSTD_freeDCtx");
        *(void **)&z.content_size = dlsym(h, "ZSTD_getFrameContentSize");
        *(void **)&z.frame_size = dlsym(h, "ZSTD_findFrameCompressedSize");
        *(void **)&z.decompress = dlsym(h, "ZSTD_decompressDCtx");
        *(void **)&z.is_error = dlsym(h, "ZSTD_isError");
        if (!z.create || !z.free_ctx || !z.content_size || !z.frame_size || !z.is_error)
            z.decompress = NULL;
    }
    if (lz4_fn != NULL)
        lz4_decompress_safe = lz4_fn;
    if (z.decompress != NULL)
        zstd = z;
    return Py_BuildValue("(OOO)", Py_True, lz4_decompress_safe ? Py_True : Py_False,
                         zstd.decompress ? Py_True : Py_False);
}

/* inflate(kind, data, limit[, length_only]) -> bytes (or only their length), or None where group_lines declines
 * the area (the decoders above: for tests against mqtool.codecs, and verify's inflate check). */
static PyObject *inflate(PyObject *self, PyObject *args)
{
    int kind, length_only = 0;
    Py_buffer view;
    Py_ssize_t limit;
    if (!PyArg_ParseTuple(args, "iy*n|p", &kind, &view, &limit, &length_only))
        return NULL;
    PyObject *result = NULL;
    scratch_t *t = scratch_get();
    if (kind <= AREA_PLAIN || kind >= N_AREA || limit < 0) {
        PyErr_SetString(PyExc_ValueError, "inflate: bad kind or limit");
    } else if (t == NULL) {
        PyErr_NoMemory();
    } else {
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = inflate_area(kind, view.buf, (size_t)view.len, t, (size_t)limit);
        Py_END_ALLOW_THREADS
        if (rc == -2)
            PyErr_NoMemory();
        else
            result = rc < 0 ? Py_NewRef(Py_None) : length_only ? PyLong_FromSsize_t((Py_ssize_t)t->buf.len)
                                                                : PyBytes_FromStringAndSize(t->buf.p, t->buf.len);
    }
    PyBuffer_Release(&view);
    return result;
}

/* A bytes object of type `cls` (bytes or a subclass of the same layout) holding s[0:n]: one copy. */
static PyObject *bytes_of(PyTypeObject *cls, const char *s, Py_ssize_t n)
{
    if (cls == &PyBytes_Type)
        return PyBytes_FromStringAndSize(s, n);
    /* as PyType_GenericAlloc, without zeroing what is written next (a bytes object holds no references: it
     * need not be tracked by the collector) */
    PyObject *b = PyType_IS_GC(cls) ? (PyObject *)PyObject_GC_NewVar(PyBytesObject, cls, n)
                                    : (PyObject *)PyObject_NewVar(PyBytesObject, cls, n);
    if (b == NULL)
        return NULL;
    memcpy(PyBytes_AS_STRING(b), s, (size_t)n);
    PyBytes_AS_STRING(b)[n] = '\0';
_Py_COMP_DIAG_PUSH
_Py_COMP_DIAG_IGNORE_DEPR_DECLS
    ((PyBytesObject *)b)->ob_shash = -1;
_Py_COMP_DIAG_POP
    return b;
}

/* One batch of group_lines. A thread keeps a line buffer of up to LINES_KEPT bytes between calls. */
#define LINES_KEPT (8 << 20)
typedef struct {
    Py_buffer view;
    int have_view, kind;
    Py_ssize_t count;
    long long base, ts0, seq;
    int tsk;
    tpl_t t;
    const char *head;
    Py_ssize_t head_len;
    PyTypeObject *cls;
    Py_ssize_t at, len;          /* its lines in the thread's line buffer */
    int rc;
} job_t;

/* group_lines(jobs, limit, max_headers) -> [bytes, True or None, ...]: per job (data, area kind, count, base_offset,
 * ts0, ts_k, base_sequence, segs, order, extra, head, cls), `head` (the batch's own line) and then the NDJSON line
 * of every record, each ending in "\n"; None when declined. The lines of a run of consecutive jobs taken with the
 * same `cls` (bytes or a subclass: PreRenderedLines) are one object of that type, at the run's first job; the
 * others of the run are True. Area kind: 0 the records area itself, 1 snappy, 2 Kafka's LZ4 frame, 3 zstd (inflated here into
 * a buffer of at most `limit` bytes, see above). The inflating, the walk and the writing of all jobs run without
 * the GIL (threads decode several groups at once); every `data` must stay unchanged during the call (bytes, or
 * a view of a read-only map). */
static PyObject *group_lines(PyObject *self, PyObject *args)
{
    PyObject *jobs;
    Py_ssize_t limit;
    long long mh;
    if (!PyArg_ParseTuple(args, "O!nL", &PyTuple_Type, &jobs, &limit, &mh))
        return NULL;
    if (limit < 0) {
        PyErr_SetString(PyExc_ValueError, "group_lines: negative limit");
        return NULL;
    }
    Py_ssize_t nj = PyTuple_GET_SIZE(jobs);
    scratch_t *scratch = NULL;
    job_t *js = calloc(nj ? (size_t)nj : 1, sizeof *js);
    if (js == NULL)
        return PyErr_NoMemory();
    PyObject *result = NULL;
    for (Py_ssize_t j = 0; j < nj; j++) {
        job_t *b = &js[j];
        PyObject *data, *segs, *order, *extra, *head, *cls;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(jobs, j), "OinLLiLO!O!O!SO!", &data, &b->kind, &b->count, &b->base,
                              &b->ts0, &b->tsk, &b->seq, &PyTuple_Type, &segs, &PyTuple_Type, &order,
                              &PyTuple_Type, &extra, &head, &PyType_Type, &cls)
            || tpl_init(&b->t, segs, order, extra) < 0)
            goto done;
        if (b->kind < 0 || b->kind >= N_AREA || !PyType_IsSubtype((PyTypeObject *)cls, &PyBytes_Type)
            || ((PyTypeObject *)cls)->tp_basicsize != PyBytes_Type.tp_basicsize
            || ((PyTypeObject *)cls)->tp_itemsize != 1) {
            PyErr_SetString(PyExc_ValueError, "group_lines: bad area kind or output type");
            goto done;
        }
        if (get_buffer(data, &b->view) < 0)
            goto done;
        b->have_view = 1;
        b->head = PyBytes_AS_STRING(head);
        b->head_len = PyBytes_GET_SIZE(head);
        b->cls = (PyTypeObject *)cls;
    }
    int oom = 0;
    Py_BEGIN_ALLOW_THREADS
    scratch = scratch_get();
    out_t *o = scratch == NULL ? NULL : &scratch->lines;
    if (o == NULL)
        oom = 1;
    else
        o->len = 0;
    for (Py_ssize_t j = 0; j < nj && !oom; j++) {
        job_t *b = &js[j];
        const uint8_t *p = b->view.buf;
        Py_ssize_t n = b->view.len;
        if (b->kind != AREA_PLAIN) {
            int rc = inflate_area(b->kind, p, (size_t)n, scratch, (size_t)limit);
            if (rc == -2)
                oom = 1;
            if (rc < 0)
                continue;
            p = (const uint8_t *)scratch->buf.p;
            n = scratch->buf.len;
        } else if (n > limit) {
            continue;
        }
        b->at = o->len;
        if (out_put(o, b->head, b->head_len) < 0) {
            oom = 1;
            continue;
        }
        b->rc = write_lines(o, p, n, b->count, b->base, b->ts0, b->tsk, b->seq, &b->t, 1, mh);
        if (b->rc < 0)
            oom = 1;
        if (b->rc <= 0)
            o->len = b->at;
        b->len = o->len - b->at;
    }
    Py_END_ALLOW_THREADS
    if (oom) {
        PyErr_NoMemory();
        goto done;
    }
    result = PyList_New(nj);
    if (result == NULL)
        goto done;
    for (Py_ssize_t j = 0; j < nj; j++) {
        job_t *b = &js[j];
        PyObject *item;
        if (b->rc <= 0) {
            item = Py_NewRef(Py_None);
        } else if (j > 0 && js[j - 1].rc > 0 && js[j - 1].cls == b->cls) {
            item = Py_NewRef(Py_True);                      /* in the block of the run it continues */
        } else {
            Py_ssize_t len = 0;                             /* the run's lines lie back to back */
            for (Py_ssize_t k = j; k < nj && js[k].rc > 0 && js[k].cls == b->cls; k++)
                len += js[k].len;
            item = bytes_of(b->cls, scratch->lines.p + b->at, len);
        }
        if (item == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, j, item);
    }
done:
    if (scratch != NULL && scratch->lines.cap > LINES_KEPT) {      /* an unusually big group: give it back */
        free(scratch->lines.p);
        scratch->lines = (out_t){NULL, 0, 0, 0};
    }
    for (Py_ssize_t j = 0; j < nj; j++) {
        tpl_free(&js[j].t);
        if (js[j].have_view)
            PyBuffer_Release(&js[j].view);
    }
    free(js);
    return result;
}

/* configure(keys): the row keys, in the order of the enum above (offset, timestamp, size, key_size,
 * value_size, sequence, header_keys, key, value, headers). */
static PyObject *configure(PyObject *self, PyObject *args)
{
    PyObject *keys;
    if (!PyArg_ParseTuple(args, "O!", &PyTuple_Type, &keys))
        return NULL;
    if (PyTuple_GET_SIZE(keys) != N_KEYS) {
        PyErr_Format(PyExc_ValueError, "configure: %d row keys expected", N_KEYS);
        return NULL;
    }
    for (int k = 0; k < N_KEYS; k++) {
        if (!PyUnicode_Check(PyTuple_GET_ITEM(keys, k))) {
            PyErr_SetString(PyExc_TypeError, "configure: row keys must be str");
            return NULL;
        }
    }
    for (int k = 0; k < N_KEYS; k++) {
        PyObject *key = Py_NewRef(PyTuple_GET_ITEM(keys, k));
        Py_XSETREF(row_keys[k], key);
    }
    Py_RETURN_NONE;
}


/* ---- carve: the next entry that could be a batch or a legacy message -------------------------------- */

/* Field places for frame_candidate, from mqtool.kafka.carve (derived there from formats/kafka.py). */
typedef struct { Py_ssize_t off; int size; } fld_t;
enum { F_SIZE, F_MAGIC, F_BASE, F_PLE, F_ATTR, F_LOD, F_BTS, F_MTS, F_PID, F_PEPOCH, F_BSEQ, F_COUNT, F_LATTR,
       N_FLD };

/* The cheap structure test of mqtool.kafka.scan._shape_ok (plus its size bounds) at q; 1 = candidate. */
static int shape_at(const uint8_t *b, Py_ssize_t q, Py_ssize_t n, const fld_t *f, const long long *c)
{
    /* c: min_overhead, min_v2, v2_unused, codec_mask, max_codec, legacy_unused, v0_header, v1_header,
     *    v0_min, v1_min */
    int magic = b[q + f[F_MAGIC].off];
    int64_t size = mq_rd_be(b + q + f[F_SIZE].off, f[F_SIZE].size);
    if (magic > 2 || size < c[0] || size > n - q - 12)
        return 0;
    Py_ssize_t end = q + 12 + (Py_ssize_t)size;
    if (magic == 2) {
        if (size < c[1])
            return 0;
        int64_t attrs = mq_rd_be(b + q + f[F_ATTR].off, f[F_ATTR].size);
        if ((attrs & c[2]) || (attrs & c[3]) > c[4])
            return 0;
        int64_t lod = mq_rd_be(b + q + f[F_LOD].off, f[F_LOD].size);
        int64_t count = mq_rd_be(b + q + f[F_COUNT].off, f[F_COUNT].size);
        if (mq_rd_be(b + q + f[F_BASE].off, f[F_BASE].size) < 0 || count < 0 || count > lod + 1)
            return 0;
        static const int rest[] = {F_PLE, F_BTS, F_MTS, F_PID, F_PEPOCH, F_BSEQ};
        for (int k = 0; k < 6; k++)
            if (mq_rd_be(b + q + f[rest[k]].off, f[rest[k]].size) < -1)
                return 0;
        return 1;
    }
    if (size < (magic == 0 ? c[8] : c[9]))
        return 0;
    int attrs = b[q + f[F_LATTR].off];
    if ((attrs & c[5]) || (attrs & c[3]) > c[4])
        return 0;
    Py_ssize_t p = q + (magic == 1 ? c[7] : c[6]);
    if (p + 8 > end)
        return 0;
    int64_t klen = mq_rd_be(b + p, 4);
    p += 4 + (klen > 0 ? klen : 0);
    if (p + 4 > end)
        return 0;
    int64_t vlen = mq_rd_be(b + p, 4);
    return p + 4 + (vlen > 0 ? vlen : 0) == end;
}

/* frame_candidate(buf, start, stop, fields, consts) -> the first q in [start, stop) where an entry of a
 * plausible shape starts (magic <= 2 at its magic offset, a size inside the buffer, mqtool.kafka.scan's shape
 * test), or -1. The CRC is left to the caller. Eight magic bytes at a time are tested for a value below 3
 * first, so runs with none cost one compare per word. */
static PyObject *frame_candidate(PyObject *self, PyObject *args)
{
    PyObject *obj, *fields, *consts;
    Py_ssize_t start, stop;
    if (!PyArg_ParseTuple(args, "OnnO!O!", &obj, &start, &stop, &PyTuple_Type, &fields, &PyTuple_Type, &consts))
        return NULL;
    if (PyTuple_GET_SIZE(fields) != N_FLD || PyTuple_GET_SIZE(consts) != 10) {
        PyErr_SetString(PyExc_ValueError, "frame_candidate: wrong layout tuples");
        return NULL;
    }
    fld_t f[N_FLD];
    long long c[10];
    Py_ssize_t reach = 0;
    for (int k = 0; k < N_FLD; k++) {
        PyObject *t = PyTuple_GET_ITEM(fields, k);
        if (!PyArg_ParseTuple(t, "ni", &f[k].off, &f[k].size))
            return NULL;
        if (f[k].off < 0 || !(f[k].size == 1 || f[k].size == 2 || f[k].size == 4 || f[k].size == 8)) {
            PyErr_SetString(PyExc_ValueError, "frame_candidate: bad field");
            return NULL;
        }
        if (k != F_MAGIC && k != F_SIZE && k != F_LATTR && f[k].off + f[k].size > reach)
            reach = f[k].off + f[k].size;
    }
    for (int k = 0; k < 10; k++) {
        c[k] = PyLong_AsLongLong(PyTuple_GET_ITEM(consts, k));
        if (c[k] == -1 && PyErr_Occurred())
            return NULL;
    }
    /* every v2 field lies inside the smallest v2 entry; the legacy header inside the smallest legacy one */
    if (reach > 12 + c[1] || f[F_MAGIC].off + 1 > 12 + c[0] || f[F_LATTR].off + 1 > 12 + c[8]
        || f[F_SIZE].off + f[F_SIZE].size > 12) {
        PyErr_SetString(PyExc_ValueError, "frame_candidate: layout does not fit the minimum sizes");
        return NULL;
    }
    Py_buffer view;
    if (get_buffer(obj, &view) < 0)
        return NULL;
    const uint8_t *b = view.buf;
    Py_ssize_t n = view.len, mo = f[F_MAGIC].off, found = -1;
    Py_ssize_t last = n - 12 - c[0];        /* the last q whose smallest entry fits */
    if (start < 0)
        start = 0;
    if (stop > last + 1)
        stop = last + 1;
    Py_ssize_t q = start;
    while (q < stop) {
        if (q + 8 <= stop) {
            uint64_t x;
            memcpy(&x, b + q + mo, 8);
            if (!((x - 0x0303030303030303ULL) & ~x & 0x8080808080808080ULL)) {
                q += 8;
                continue;
            }
            for (int k = 0; k < 8; k++, q++)
                if (b[q + mo] <= 2 && shape_at(b, q, n, f, c)) {
                    found = q;
                    goto done;
                }
            continue;
        }
        if (b[q + mo] <= 2 && shape_at(b, q, n, f, c)) {
            found = q;
            break;
        }
        q++;
    }
done:
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(found);
}

/* ---- the batch walk: runs of whole v2 batches whose CRC-32C holds ------------------------------------- */

/* CRC-32C (Castagnoli) of ISA-L (crc32_iscsi, the `fast` extra's isal_zlib module: the CPU's fastest kernel,
 * chosen by ISA-L at run time), found by configure_crc32c; NULL: walk_batches declines every call. ISA-L's
 * convention: pass the inverted start value, invert the result. */
static uint32_t (*crc32c_fn)(const unsigned char *, int, uint32_t) = NULL;

static uint32_t crc32c_of(const uint8_t *p, Py_ssize_t len)
{
    uint32_t crc = 0xFFFFFFFFu;
    while (len > 0) {               /* ISA-L takes an int length: a batch fits, but walk in 1 GiB steps anyway */
        int step = len > (1 << 30) ? (1 << 30) : (int)len;
        crc = crc32c_fn(p, step, crc);
        p += step;
        len -= step;
    }
    return crc ^ 0xFFFFFFFFu;
}

/* configure_crc32c(isal_zlib_library) -> whether walk_batches has its CRC-32C: the function is looked up in the
 * library and must give the check value of "123456789" (0xE3069283) before it is used. */
static PyObject *configure_crc32c(PyObject *self, PyObject *args)
{
    PyObject *path;
    if (!PyArg_ParseTuple(args, "O", &path))
        return NULL;
    uint32_t (*fn)(const unsigned char *, int, uint32_t) = NULL;
    const char *lp = path == Py_None ? NULL : PyUnicode_AsUTF8(path);
    PyErr_Clear();
    void *h = lp != NULL ? dlopen(lp, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (h != NULL)
        *(void **)&fn = dlsym(h, "crc32_iscsi");
    if (fn != NULL && (fn((const unsigned char *)"123456789", 9, 0xFFFFFFFFu) ^ 0xFFFFFFFFu) == 0xE3069283u)
        crc32c_fn = fn;
    return PyBool_FromLong(crc32c_fn != NULL);
}

#define WALK_MAX_FIELDS 16
#define WALK_MAX_BATCHES 64

/* walk_batches(buf, pos, stop, limit, fields, roles[, check]) -> (end, [(position, *header fields), ...]):
 * from `pos`, the consecutive entries that are v2 batches a walk of mqtool.kafka.scan.scan reads as valid --
 * magic `roles[3]`, a length of at least roles[5] (the v2 header after the log overhead), the whole entry
 * inside the first `limit` bytes, the CRC-32C stored in field roles[2] equal to that of the bytes from offset
 * roles[4] to the entry's end -- each starting before `stop`, at most WALK_MAX_BATCHES of them; `end` is where
 * the walk stopped (the first entry it did not take, for the Python walk to read). `check` false: no CRC, the
 * framing alone (mqtool.kafka.scan.batch_offsets' header walk). `fields`: the header's fields in schema order
 * as (offset, size, signed); the tuple of each batch holds their values as struct.unpack_from gives them;
 * roles[0], roles[1]: the indexes of the length and magic fields. Every read is inside the entry, which lies
 * inside the buffer. The GIL is let go while it walks. None when asked to check without a CRC-32C
 * (configure_crc32c). */
static PyObject *walk_batches(PyObject *self, PyObject *args)
{
    PyObject *obj, *fields, *roles;
    Py_ssize_t pos, stop, limit;
    int check = 1;
    if (!PyArg_ParseTuple(args, "OnnnO!O!|p", &obj, &pos, &stop, &limit, &PyTuple_Type, &fields, &PyTuple_Type,
                          &roles, &check))
        return NULL;
    if (check && crc32c_fn == NULL)
        Py_RETURN_NONE;
    Py_ssize_t nf = PyTuple_GET_SIZE(fields);
    if (nf < 2 || nf > WALK_MAX_FIELDS || PyTuple_GET_SIZE(roles) != 6) {
        PyErr_SetString(PyExc_ValueError, "walk_batches: wrong layout tuples");
        return NULL;
    }
    Py_ssize_t off[WALK_MAX_FIELDS], header = 0;
    int size[WALK_MAX_FIELDS], sign[WALK_MAX_FIELDS];
    for (Py_ssize_t k = 0; k < nf; k++) {
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(fields, k), "nii", &off[k], &size[k], &sign[k]))
            return NULL;
        if (off[k] < 0 || !(size[k] == 1 || size[k] == 2 || size[k] == 4 || size[k] == 8)) {
            PyErr_SetString(PyExc_ValueError, "walk_batches: bad field");
            return NULL;
        }
        if (off[k] + size[k] > header)
            header = off[k] + size[k];
    }
    Py_ssize_t r[6];
    for (int k = 0; k < 6; k++) {
        r[k] = PyLong_AsSsize_t(PyTuple_GET_ITEM(roles, k));
        if (r[k] == -1 && PyErr_Occurred())
            return NULL;
    }
    Py_ssize_t i_len = r[0], i_magic = r[1], i_crc = r[2], magic = r[3], crc_from = r[4], min_len = r[5];
    /* the header fits in the smallest batch; the CRC's bytes start inside it */
    if (i_len < 0 || i_len >= nf || i_magic < 0 || i_magic >= nf || size[i_magic] != 1 || i_crc < 0
        || i_crc >= nf || size[i_crc] != 4 || sign[i_crc] || crc_from < 0 || crc_from > header
        || header > off[i_len] + size[i_len] + min_len) {
        PyErr_SetString(PyExc_ValueError, "walk_batches: layout does not fit");
        return NULL;
    }
    Py_ssize_t overhead = off[i_len] + size[i_len];
    Py_buffer view;
    if (get_buffer(obj, &view) < 0)
        return NULL;
    const uint8_t *b = view.buf;
    if (limit > view.len)
        limit = view.len;
    if (pos < 0)
        pos = 0;
    Py_ssize_t at[WALK_MAX_BATCHES];
    int taken = 0;
    Py_ssize_t p = pos;
    Py_BEGIN_ALLOW_THREADS
    while (taken < WALK_MAX_BATCHES && p < stop && limit - p >= overhead + min_len) {
        int64_t len = mq_rd_be(b + p + off[i_len], size[i_len]);
        if (b[p + off[i_magic]] != magic || len < min_len || len > limit - p - overhead)
            break;
        Py_ssize_t end = p + overhead + (Py_ssize_t)len;
        if (check && crc32c_of(b + p + crc_from, end - p - crc_from) != (uint32_t)mq_rd_be(b + p + off[i_crc], 4))
            break;
        at[taken++] = p;
        p = end;
    }
    Py_END_ALLOW_THREADS
    PyObject *list = PyList_New(taken), *out = NULL;
    if (list == NULL)
        goto done;
    for (int t = 0; t < taken; t++) {
        PyObject *tup = PyTuple_New(nf + 1), *v;
        if (tup == NULL)
            goto fail;
        PyList_SET_ITEM(list, t, tup);
        if ((v = PyLong_FromSsize_t(at[t])) == NULL)
            goto fail;
        PyTuple_SET_ITEM(tup, 0, v);
        for (Py_ssize_t k = 0; k < nf; k++) {
            const uint8_t *q = b + at[t] + off[k];
            if (sign[k])
                v = PyLong_FromLongLong(mq_rd_be(q, size[k]));
            else {
                uint64_t u = 0;
                for (int i = 0; i < size[k]; i++)
                    u = (u << 8) | q[i];
                v = PyLong_FromUnsignedLongLong(u);
            }
            if (v == NULL)
                goto fail;
            PyTuple_SET_ITEM(tup, k + 1, v);
        }
    }
    out = Py_BuildValue("(nO)", p, list);
fail:
    Py_XDECREF(list);
done:
    PyBuffer_Release(&view);
    return out;
}

static PyMethodDef methods[] = {
    {"parse_records", parse_records, METH_VARARGS,
     "parse_records(data, count) -> (records, end) as mqtool.kafka.records.parse_records, or None."},
    {"record_rows", record_rows, METH_VARARGS,
     "record_rows(data, count, base_offset, ts0, ts_k, base_sequence, template, text) -> [row dict] or None."},
    {"record_json", record_json, METH_VARARGS,
     "record_json(data, count, base_offset, ts0, ts_k, base_sequence, segs, order) -> NDJSON lines or None."},
    {"group_lines", group_lines, METH_VARARGS,
     "group_lines(jobs, limit, max_headers) -> per job: its lines (with those of the run it starts), True or None."},
    {"inflate", inflate, METH_VARARGS,
     "inflate(kind, data, limit[, length_only]) -> bytes (or their length) or None (group_lines' decoders)."},
    {"configure_codecs", configure_codecs, METH_VARARGS,
     "configure_codecs(lz4_library, zstd_library, xerial_magic, lz4_magic, lz4_block_max) -> codecs inflated here."},
    {"configure", configure, METH_VARARGS, "configure(keys): the row keys record_rows sets."},
    {"frame_candidate", frame_candidate, METH_VARARGS,
     "frame_candidate(buf, start, stop, fields, consts) -> first plausible entry position in [start, stop) or -1."},
    {"configure_crc32c", configure_crc32c, METH_VARARGS,
     "configure_crc32c(isal_zlib_library) -> whether walk_batches has ISA-L's CRC-32C."},
    {"walk_batches", walk_batches, METH_VARARGS,
     "walk_batches(buf, pos, stop, limit, fields, roles[, check]) -> (end, [(position, *header)]) of v2 batches."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "kafka",
                                    "mqtool compiled helper: Kafka v2 records-area walker", -1, methods};

PyMODINIT_FUNC PyInit_kafka(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (!scratch_key_ok)
        scratch_key_ok = pthread_key_create(&scratch_key, scratch_free) == 0;
    if (PyModule_AddStringConstant(m, "RECORD_LAYOUT", RECORD_LAYOUT) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
