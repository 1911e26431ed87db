/* The smallest helper: proves the compiled helpers were built and load (tests/test_common_native.py), and the
 * one byte search the carvers share (find: what bytes.find answers, by memchr on the needle's first byte and a
 * compare at each hit: several times faster than CPython's search for the short magics carve looks for). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

static PyObject *abi(PyObject *self, PyObject *unused) { return PyLong_FromLong(1); }

/* Lowest j in [lo, hi - k] where s[0..k) occurs in b, or -1 (bytes.find(s, lo, hi) for 0 <= lo, hi). */
static Py_ssize_t find_in(const unsigned char *b, Py_ssize_t n, const unsigned char *s, Py_ssize_t k,
                          Py_ssize_t lo, Py_ssize_t hi)
{
    if (hi > n)
        hi = n;
    if (lo > n || hi - lo < k)
        return -1;
    if (k == 0)
        return lo;
    const unsigned char *p = b + lo, *end = b + (hi - k) + 1;
    while (p < end) {
        p = memchr(p, s[0], (size_t)(end - p));
        if (p == NULL)
            return -1;
        if (memcmp(p + 1, s + 1, (size_t)(k - 1)) == 0)
            return p - b;
        p++;
    }
    return -1;
}

static PyObject *find(PyObject *self, PyObject *args)
{
    Py_buffer buf, sub;
    Py_ssize_t lo, hi, at;
    if (!PyArg_ParseTuple(args, "y*y*nn", &buf, &sub, &lo, &hi))
        return NULL;
    if (lo < 0 || hi < 0) {
        PyBuffer_Release(&buf);
        PyBuffer_Release(&sub);
        PyErr_SetString(PyExc_ValueError, "find: start and end must not be negative");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    at = find_in((const unsigned char *)buf.buf, buf.len, (const unsigned char *)sub.buf, sub.len, lo, hi);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&buf);
    PyBuffer_Release(&sub);
    return PyLong_FromSsize_t(at);
}

static PyMethodDef methods[] = {
    {"abi", abi, METH_NOARGS, "Version of the helpers' calling conventions."},
    {"find", find, METH_VARARGS,
     "find(buf, sub, start, end) -> int: buf.find(sub, start, end) for start, end >= 0 (any readable buffer)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "probe", "mqtool compiled-helper probe", -1, methods};

PyMODINIT_FUNC PyInit_probe(void) { return PyModule_Create(&module); }
