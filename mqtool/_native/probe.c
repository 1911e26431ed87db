/* The smallest helper: proves the compiled helpers were built and load (tests/test_native.py). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *abi(PyObject *self, PyObject *unused) { return PyLong_FromLong(1); }

static PyMethodDef methods[] = {
    {"abi", abi, METH_NOARGS, "Version of the helpers' calling conventions."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "probe", "mqtool compiled-helper probe", -1, methods};

PyMODINIT_FUNC PyInit_probe(void) { return PyModule_Create(&module); }
