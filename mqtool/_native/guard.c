/* SIGBUS guard for read-only file maps (mqtool.io.MappedInput).
 *
 * A page of a file map that lies past the end of the file (someone truncated the file while we read it)
 * raises SIGBUS (si_code BUS_ADRERR) when touched, whether the reader is Python's mmap slicing or a compiled
 * helper's walk. This handler, for an address inside a map registered with watch(), maps one anonymous
 * zero page over the lost page (MAP_FIXED) and returns: the faulting load runs again and reads zeros. It
 * counts these events; the scanners, which check the file size between records, then report the shrink as a
 * `file-changed` finding and drop what they read since the last check. Any other SIGBUS goes to the handler
 * that was installed before (e.g. faulthandler), or gets the default action.
 *
 * Cost: nothing on the read path (no checks per access); one registration per map.
 */
#define _GNU_SOURCE
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define SLOTS 1024

static volatile uintptr_t slot_lo[SLOTS], slot_hi[SLOTS];
static volatile sig_atomic_t fault_count;
static struct sigaction previous;
static int installed;
static uintptr_t page_mask;

static void on_sigbus(int sig, siginfo_t *si, void *ctx)
{
    uintptr_t a = (uintptr_t)si->si_addr;
    if (si->si_code == BUS_ADRERR) {
        for (int i = 0; i < SLOTS; i++) {
            uintptr_t lo = slot_lo[i], hi = slot_hi[i];
            if (lo != 0 && a >= lo && a < hi) {
                void *page = (void *)(a & page_mask);
                void *p = mmap(page, (size_t)(~page_mask + 1), PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
                               -1, 0);
                if (p != MAP_FAILED) {
                    fault_count++;
                    return;                 /* the load runs again and reads zeros */
                }
                break;
            }
        }
    }
    /* not ours */
    if (previous.sa_flags & SA_SIGINFO) {
        if (previous.sa_sigaction != NULL) {
            previous.sa_sigaction(sig, si, ctx);
            return;
        }
    } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
        previous.sa_handler(sig);
        return;
    }
    signal(SIGBUS, SIG_DFL);                /* returning faults again, now with the default action */
}

static int install(void)
{
    if (installed)
        return 0;
    long ps = sysconf(_SC_PAGESIZE);
    if (ps <= 0)
        return -1;
    page_mask = ~((uintptr_t)ps - 1);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGBUS, &sa, &previous) != 0)
        return -1;
    installed = 1;
    return 0;
}

/* watch(buffer) -> slot (or -1 when every slot is taken: that map is then unguarded) */
static PyObject *watch(PyObject *self, PyObject *obj)
{
    Py_buffer b;
    if (PyObject_GetBuffer(obj, &b, PyBUF_SIMPLE) < 0)
        return NULL;
    uintptr_t lo = (uintptr_t)b.buf, hi = lo + (uintptr_t)b.len;
    PyBuffer_Release(&b);       /* the mmap stays closable; the slot is cleared by unwatch() */
    if (lo == 0 || hi <= lo)
        return PyLong_FromLong(-1);
    if (install() != 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    for (int i = 0; i < SLOTS; i++) {
        if (slot_lo[i] == 0) {
            slot_hi[i] = hi;        /* hi first: the handler treats a slot as live once lo is set */
            slot_lo[i] = lo;
            return PyLong_FromLong(i);
        }
    }
    return PyLong_FromLong(-1);
}

/* unwatch(slot): the map is gone (or going) */
static PyObject *unwatch(PyObject *self, PyObject *arg)
{
    long i = PyLong_AsLong(arg);
    if (i == -1 && PyErr_Occurred())
        return NULL;
    if (i >= 0 && i < SLOTS) {
        slot_lo[i] = 0;
        slot_hi[i] = 0;
    }
    Py_RETURN_NONE;
}

static PyObject *faults(PyObject *self, PyObject *unused) { return PyLong_FromLong((long)fault_count); }

static PyMethodDef methods[] = {
    {"watch", watch, METH_O, "Guard a read-only file map: lost pages read as zeros instead of SIGBUS; returns a slot."},
    {"unwatch", unwatch, METH_O, "Stop guarding the map in this slot."},
    {"faults", faults, METH_NOARGS, "How many lost pages were replaced by zeros so far (this process)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "guard", "SIGBUS guard for read-only file maps", -1,
                                    methods};

PyMODINIT_FUNC PyInit_guard(void) { return PyModule_Create(&module); }
