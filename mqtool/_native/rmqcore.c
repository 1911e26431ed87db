/* mqtool._native.rmqcore: the one compiled RocketMQ module. Its parts (verify, rebuild, dump, decode; see
 * rmqcore.h) share mqcore.h's primitives and rmqunit.h's layout and framing rule, and are configured from
 * mqtool/rocketmq/layout.py, which turns them all off when the schema drifted from that layout. */
#include "rmqcore.h"

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "rmqcore", "RocketMQ compiled core: verify, rebuild, dump and decode parts", -1, NULL,
};

PyMODINIT_FUNC PyInit_rmqcore(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    static const char *names[] = {"verify", "rebuild", "dump", "decode"};
    PyObject *(*makers[])(void) = {rmq_verify_module, rmq_rebuild_module, rmq_dump_module, rmq_decode_module};
    for (int i = 0; i < 4; i++) {
        PyObject *part = makers[i]();
        if (part == NULL || PyModule_AddObject(m, names[i], part) < 0) {
            Py_XDECREF(part);
            Py_DECREF(m);
            return NULL;
        }
    }
    return m;
}
