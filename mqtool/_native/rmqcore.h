/* rmqcore.h: the parts of the one RocketMQ extension module (mqtool._native.rmqcore, built from rmqcore.c and
 * the files below). Each part is a module object of its own, an attribute of rmqcore, so the Python callers
 * keep their interface: mqtool.native.load("rmqverify") is rmqcore.verify. */
#ifndef RMQCORE_H
#define RMQCORE_H
#include "mqcore.h"

PyObject *rmq_verify_module(void);    /* rmqverify.c: the `verify commitlog` fast lane */
PyObject *rmq_rebuild_module(void);   /* rmqrebuild.c: the rebuild-index dispatch loop */
PyObject *rmq_dump_module(void);      /* rmqdump.c + rmqjson.c: dump rows, NDJSON lines, export columns */
PyObject *rmq_decode_module(void);    /* rmqdecode.c: Message objects for the scanner */

#endif
