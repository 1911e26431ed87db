/* mqtool/_native/kafka.c: the Kafka v2 records-area walker (optional compiled helper).
 *
 * Replaces two pure-Python loops of mqtool/kafka:
 *   parse_records(data, count)  == mqtool.kafka.records.parse_records (the varint walk of DefaultRecord)
 *   record_rows(...)            == the `dump kafka --deep / --print-data` record rows of a batch
 *                                  (mqtool.kafka.dump.record_row over mqtool.kafka.records.iter_records)
 *   record_json(...)            == those rows as the NDJSON lines mqtool.render.write_ndjson writes
 *   batch_lines(...)            == the same lines as the bytes that writer writes (newline after each), after
 *                                  a given prefix (the batch's own line)
 *   frame_candidate(...)        == the shape test of mqtool.kafka.scan._shape_ok at every byte position
 *                                  (mqtool carve's search for batches and legacy messages)
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
 * kept past a call. The GIL is held throughout (Python objects are built as we go).
 *
 * Memory: no call builds more than MAX_RECORDS_PER_CALL records, nor a record with more headers than the
 * optional last argument max_headers (the cap of mqtool.kafka.records.limits()); such input is declined
 * (None), and Python streams it in bounded groups or reports the cap as a finding.
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
static int is_text(const uint8_t *p, Py_ssize_t off, int64_t len)
{
    const uint8_t *s = p + off;
    for (Py_ssize_t i = 0; i < (Py_ssize_t)len;) {
        if (s[i] < 0x80) { i++; continue; }
        Py_ssize_t l = utf8_seq(s + i, (Py_ssize_t)len - i);
        if (l == 0) return 0;
        i += l;
    }
    return 1;
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
    char tmp[24], *e = tmp + sizeof tmp, *b = e;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;    /* INT64_MIN too */
    do {
        *--b = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *--b = '-';
    return out_put(o, b, e - b);
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

/* The shared body of record_json and batch_lines: check the arguments (GIL held), then check the whole area and
 * write the lines into *o (after `prefix`, each line followed by "\n" when `nl`, else joined by "\n") without
 * touching a Python object, so with `nogil` the GIL is released meanwhile (the buffer and the bytes objects stay
 * referenced by the call's arguments). Returns 1 written, 0 declined (let Python decide), -1 error (raised).
 * `extra`: ints a field code >= N_KEYS stands for (the batch's own numbers in a line cut once per template:
 * code N_KEYS + j writes extra[j]). */
#define MAX_EXTRA 4
static int json_lines(out_t *o, PyObject *obj, Py_ssize_t count, long long base, long long ts0, int tsk,
                      long long seq, PyObject *segs, PyObject *order, PyObject *extra, PyObject *prefix, int nl,
                      int64_t mh, int nogil)
{
    Py_ssize_t nf = PyTuple_GET_SIZE(order);
    Py_ssize_t nx = extra == NULL ? 0 : PyTuple_GET_SIZE(extra);
    if (PyTuple_GET_SIZE(segs) != nf + 1 || nf > 16 || nx > MAX_EXTRA) {
        PyErr_SetString(PyExc_ValueError, "record_json: len(segs) must be len(order) + 1 (at most 16 fields, "
                                          "4 extra ints)");
        return -1;
    }
    int codes[16];
    int64_t xv[MAX_EXTRA];
    const char *sp[17];
    Py_ssize_t sn[17];
    for (Py_ssize_t j = 0; j < nx; j++) {
        long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(extra, j));
        if (v == -1 && PyErr_Occurred())
            return -1;
        xv[j] = v;
    }
    for (Py_ssize_t f = 0; f <= nf; f++) {
        PyObject *seg = PyTuple_GET_ITEM(segs, f);
        if (!PyBytes_Check(seg)) {
            PyErr_SetString(PyExc_TypeError, "record_json: segs must be bytes");
            return -1;
        }
        sp[f] = PyBytes_AS_STRING(seg);
        sn[f] = PyBytes_GET_SIZE(seg);
        if (f < nf) {
            long c = PyLong_AsLong(PyTuple_GET_ITEM(order, f));
            if (c == -1 && PyErr_Occurred())
                return -1;
            if (c < 0 || c >= N_KEYS + nx) {
                PyErr_SetString(PyExc_ValueError, "record_json: unknown field code");
                return -1;
            }
            codes[f] = (int)c;
        }
    }
    if (prefix != NULL && !PyBytes_Check(prefix)) {
        PyErr_SetString(PyExc_TypeError, "batch_lines: prefix must be bytes");
        return -1;
    }
    if (tsk != 0 && tsk != 1)
        return 0;
    Py_buffer view;
    if (get_buffer(obj, &view) < 0)
        return -1;
    const uint8_t *p = (const uint8_t *)view.buf;
    Py_ssize_t n = view.len, i = 0;
    int rc = -1, text = 0;
    for (Py_ssize_t f = 0; f < nf; f++)
        text |= codes[f] == K_KEY || codes[f] == K_VALUE || codes[f] == K_HEADERS;
    PyThreadState *ts = nogil ? PyEval_SaveThread() : NULL;
    if (!area_clean_mh(p, n, count, base, ts0, tsk, text, mh)) {  /* the whole area must be clean first */
        rc = 0;
        goto done;
    }
    if (prefix != NULL && out_put(o, PyBytes_AS_STRING(prefix), PyBytes_GET_SIZE(prefix)) < 0)
        goto fail;
    for (Py_ssize_t k = 0; k < count; k++) {
        rec_t r;
        (void)walk_record_mh(p, n, i, &r, mh);
        int64_t offset, timestamp, sequence;
        record_ids(&r, base, ts0, tsk, seq, &offset, &timestamp, &sequence);
        if (!nl && k && out_put(o, "\n", 1) < 0)
            goto fail;
        for (Py_ssize_t f = 0; f <= nf; f++) {
            if (out_put(o, sp[f], sn[f]) < 0)
                goto fail;
            if (f < nf) {
                int c = codes[f];
                if ((c >= N_KEYS ? out_int(o, xv[c - N_KEYS])
                                 : out_field(o, c, p, &r, offset, timestamp, sequence)) < 0)
                    goto fail;
            }
        }
        if (nl && out_put(o, "\n", 1) < 0)
            goto fail;
        i = r.end;
    }
    rc = 1;
    goto done;
fail:
    rc = o->oom ? -1 : 0;        /* out of memory, or a string that is not text after all: decline */
done:
    if (ts != NULL)
        PyEval_RestoreThread(ts);
    PyBuffer_Release(&view);
    if (rc < 0)
        PyErr_NoMemory();
    return rc;
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
    out_t o = {NULL, 0, 0, 0};
    PyObject *result = NULL;
    int rc = json_lines(&o, obj, count, base, ts0, tsk, seq, segs, order, extra, NULL, 0, mh, 0);
    if (rc > 0)
        result = PyUnicode_DecodeUTF8(o.p ? o.p : "", o.len, "strict");
    else if (rc == 0)
        result = Py_NewRef(Py_None);
    free(o.p);
    return result;
}

/* batch_lines(data, count, base_offset, ts0, ts_k, base_sequence, segs, order, extra, prefix[, max_headers]) ->
 * bytes: `prefix` (the batch's own line, say), then the NDJSON line of every record, each ending in "\n" (the
 * bytes mqtool.render.write_ndjson writes for them); None when declined. The walk and the writing run without
 * the GIL (threads may decode several batches at once); `data` must not change during the call (bytes, or a
 * view of a read-only map). */
static PyObject *batch_lines(PyObject *self, PyObject *args)
{
    PyObject *obj, *segs, *order, *extra, *prefix;
    Py_ssize_t count;
    long long base, ts0, seq;
    int tsk;
    long long mh = INT64_MAX;
    if (!PyArg_ParseTuple(args, "OnLLiLO!O!O!S|L", &obj, &count, &base, &ts0, &tsk, &seq, &PyTuple_Type, &segs,
                          &PyTuple_Type, &order, &PyTuple_Type, &extra, &prefix, &mh))
        return NULL;
    out_t o = {NULL, 0, 0, 0};
    PyObject *result = NULL;
    int rc = json_lines(&o, obj, count, base, ts0, tsk, seq, segs, order, extra, prefix, 1, mh, 1);
    if (rc > 0)
        result = PyBytes_FromStringAndSize(o.p ? o.p : "", o.len);
    else if (rc == 0)
        result = Py_NewRef(Py_None);
    free(o.p);
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

static PyMethodDef methods[] = {
    {"parse_records", parse_records, METH_VARARGS,
     "parse_records(data, count) -> (records, end) as mqtool.kafka.records.parse_records, or None."},
    {"record_rows", record_rows, METH_VARARGS,
     "record_rows(data, count, base_offset, ts0, ts_k, base_sequence, template, text) -> [row dict] or None."},
    {"record_json", record_json, METH_VARARGS,
     "record_json(data, count, base_offset, ts0, ts_k, base_sequence, segs, order) -> NDJSON lines or None."},
    {"batch_lines", batch_lines, METH_VARARGS,
     "batch_lines(data, count, base_offset, ts0, ts_k, base_sequence, segs, order, extra, prefix) -> bytes or None."},
    {"configure", configure, METH_VARARGS, "configure(keys): the row keys record_rows sets."},
    {"frame_candidate", frame_candidate, METH_VARARGS,
     "frame_candidate(buf, start, stop, fields, consts) -> first plausible entry position in [start, stop) or -1."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "kafka",
                                    "mqtool compiled helper: Kafka v2 records-area walker", -1, methods};

PyMODINIT_FUNC PyInit_kafka(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddStringConstant(m, "RECORD_LAYOUT", RECORD_LAYOUT) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
