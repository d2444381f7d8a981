/* Whole files read into caller-provided buffers with the GIL released once per call.
 *
 * A Python thread that reads a small file (open, fstat, pread, close) gives up and retakes
 * the GIL around each system call; with several reader threads on few cores those
 * hand-overs, not the reads, set the rate. read_files() does the system calls of a whole
 * list of files in one stretch without the GIL. It reports per file the bytes read or
 * -errno, and leaves every error's wording to the Python caller, which reads a failed file
 * again through the ordinary path to raise its sentence. Optional: without a compiler the
 * package works, one file at a time (dliobench/storage/posix_io.py).
 *
 * read_checked() also checks, in the same stretch, that each file is one the caller already
 * decoded but for its data: its first bytes equal a template's (the headers of a format that
 * writes them byte-identical in every file of a dataset), a span the format ignores aside
 * (an npz entry's time and CRC-32), and, for a checksummed format, that its CRC-32 matches; the caller then takes the data at the
 * template's offsets with no parsing, and reads any file that fails through its format.
 *
 * ReadQueue (_readqueue.h) does read_checked's work in threads that never take the GIL, and
 * reads batches named by file index into one block (_named.h).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "_crc32.h"

/* Bytes read per system call when a CRC-32 is computed along the read: each piece is checked
 * while it is still in the core's cache (a 16 MiB sample checked after its read was fetched
 * from memory again: 0.63 against 0.35 ms per sample). */
#define CRC_PIECE (256 << 10)

/* Fold buf[lo:hi] of what a read brought in, buf[from:to], into *crc (crc NULL: nothing). */
static void crc_along(uint32_t *crc, const char *buf, Py_ssize_t from, Py_ssize_t to,
                      Py_ssize_t lo, Py_ssize_t hi)
{
    Py_ssize_t a = from > lo ? from : lo, b = to < hi ? to : hi;
    if (crc != NULL && a < b)
        *crc = crc32_update(*crc, (const unsigned char *)buf + a, (size_t)(b - a));
}

/* One read into buf at offset done: with *blocked set to 0, first without waiting for the
 * device (RWF_NOWAIT: page-cached bytes only), setting it to 1 when the read would wait. */
static ssize_t read_piece(int fd, char *buf, size_t want, off_t done, int *blocked)
{
#ifdef RWF_NOWAIT
    if (blocked != NULL && !*blocked) {
        struct iovec iov = {buf, want};
        ssize_t got = preadv2(fd, &iov, 1, done, RWF_NOWAIT);
        if (got >= 0 || (errno != EAGAIN && errno != EOPNOTSUPP))
            return got;  /* 0: the end of the file, which no read waits for */
        *blocked = 1;  /* not in the page cache, or a file system without RWF_NOWAIT */
    }
#endif
    return pread(fd, buf, want, done);
}

/* Read file `path` from offset 0 into buf[0:size]: bytes read (fewer at end of file) or -errno.
 * Only regular files are read (-EINVAL otherwise: a FIFO's open does not block, O_NONBLOCK).
 * With crc set, the CRC-32 of the bytes [crc_lo:crc_hi] read is folded into it piece by piece
 * as they arrive (CRC_PIECE per call). With blocked set, *blocked becomes 1 when a read
 * waited for the device (read_piece). */
static Py_ssize_t read_one(const char *path, char *buf, Py_ssize_t size, uint32_t *crc,
                           Py_ssize_t crc_lo, Py_ssize_t crc_hi, int *blocked)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = errno;
        close(fd);
        return -err;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return -EINVAL;
    }
    Py_ssize_t done = 0;
    while (done < size) {
        Py_ssize_t want = size - done;
        if (crc != NULL && want > CRC_PIECE)
            want = CRC_PIECE;
        ssize_t got = read_piece(fd, buf + done, (size_t)want, (off_t)done, blocked);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            int err = errno;
            close(fd);
            return -err;
        }
        if (got == 0)
            break;
        crc_along(crc, buf, done, done + got, crc_lo, crc_hi);
        done += got;
    }
    close(fd);
    return done;
}

/* Hold each path as bytes and each buffer's memory: the count held, -1 on error (set). */
static Py_ssize_t hold(PyObject *paths, PyObject *buffers, PyObject **names, Py_buffer *views)
{
    Py_ssize_t n = PyList_GET_SIZE(paths);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyUnicode_FSConverter(PyList_GET_ITEM(paths, i), &names[i]))
            return -1 - i;
        if (PyObject_GetBuffer(PyList_GET_ITEM(buffers, i), &views[i],
                               PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) != 0) {
            Py_CLEAR(names[i]);
            return -1 - i;
        }
    }
    return n;
}

static void release(Py_ssize_t held, PyObject **names, Py_buffer *views)
{
    for (Py_ssize_t i = 0; i < held; i++) {
        Py_DECREF(names[i]);
        PyBuffer_Release(&views[i]);
    }
}

/* The list of Python ints of results[0:n], or NULL (error set). */
static PyObject *int_list(const Py_ssize_t *results, Py_ssize_t n)
{
    PyObject *out = PyList_New(n);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        PyObject *value = PyLong_FromSsize_t(results[i]);
        if (value == NULL)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, i, value);
    }
    return out;
}

/* The arguments' lists, checked to be as long as each other; 0 on error (set). */
static int same_length(PyObject *paths, PyObject *others, const char *what)
{
    if (PyList_GET_SIZE(others) == PyList_GET_SIZE(paths))
        return 1;
    PyErr_Format(PyExc_ValueError, "as many %s as paths", what);
    return 0;
}

static PyObject *read_files(PyObject *self, PyObject *args)
{
    PyObject *paths, *buffers;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &paths, &PyList_Type, &buffers)
        || !same_length(paths, buffers, "buffers"))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(paths), m = n ? n : 1;
    PyObject **names = PyMem_Calloc((size_t)m, sizeof(PyObject *));
    Py_buffer *views = PyMem_Calloc((size_t)m, sizeof(Py_buffer));
    Py_ssize_t *results = PyMem_Calloc((size_t)m, sizeof(Py_ssize_t));
    PyObject *out = NULL;
    Py_ssize_t held = 0;
    if (names == NULL || views == NULL || results == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    held = hold(paths, buffers, names, views);
    if (held < 0) {
        held = -1 - held;
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++)
        results[i] = read_one(PyBytes_AS_STRING(names[i]), views[i].buf, views[i].len, NULL,
                              0, 0, NULL);
    Py_END_ALLOW_THREADS
    out = int_list(results, n);
done:
    release(held, names, views);
    PyMem_Free(names);
    PyMem_Free(views);
    PyMem_Free(results);
    return out;
}

#include "_template.h"

/* read_one of `path` into buf[0:len], its CRC-32 computed along when t checks one; *passed:
 * whether it passes t. Bytes read or -errno (no GIL needed). */
static Py_ssize_t read_against(const char *path, char *buf, Py_ssize_t len, const Template *t,
                               int *passed, int *blocked)
{
    uint32_t crc = 0;
    int along = t->held != NULL && t->crc_at >= 0;
    Py_ssize_t got = read_one(path, buf, len, along ? &crc : NULL, t->crc_start, t->data_end,
                              blocked);
    *passed = template_passes(t, buf, got, len, crc);
    return got;
}

/* read_checked's files: each path held as bytes, each buffer's memory, each template and
 * each result. Made with the GIL held (checked_hold), read without it (checked_read), by
 * read_checked at once or by a ReadQueue's threads a few files at a time. */
typedef struct {
    Py_ssize_t n, held, parsed;
    PyObject **names;
    Py_buffer *views;
    Py_ssize_t *results;    /* per file: bytes read or -errno */
    Template *kept;
} Checked;

/* Fill c (zeroed) from the lists, as long as each other; 1, or 0 with an error set (c then
 * holds what it took: checked_clear). */
static int checked_hold(Checked *c, PyObject *paths, PyObject *buffers, PyObject *templates)
{
    Py_ssize_t n = PyList_GET_SIZE(paths), m = n ? n : 1;
    c->n = n;
    c->names = PyMem_Calloc((size_t)m, sizeof(PyObject *));
    c->views = PyMem_Calloc((size_t)m, sizeof(Py_buffer));
    c->results = PyMem_Calloc((size_t)m, sizeof(Py_ssize_t));
    c->kept = PyMem_Calloc((size_t)m, sizeof(Template));
    if (c->names == NULL || c->views == NULL || c->results == NULL || c->kept == NULL) {
        PyErr_NoMemory();
        return 0;
    }
    for (; c->parsed < n; c->parsed++)
        if (!template_parse(PyList_GET_ITEM(templates, c->parsed), &c->kept[c->parsed],
                            c->parsed ? &c->kept[c->parsed - 1] : NULL))
            return 0;
    c->held = hold(paths, buffers, c->names, c->views);
    if (c->held < 0) {
        c->held = -1 - c->held;
        return 0;
    }
    return 1;
}

/* Read files [lo:hi] of c and check each against its template (no GIL needed); blocked:
 * as read_one's. */
static void checked_read(Checked *c, Py_ssize_t lo, Py_ssize_t hi, int *blocked)
{
    for (Py_ssize_t i = lo; i < hi; i++)
        c->results[i] = read_against(PyBytes_AS_STRING(c->names[i]), c->views[i].buf,
                                     c->views[i].len, &c->kept[i], &c->kept[i].passed,
                                     blocked);
}

/* Let go of the paths and the buffers' memory (the results stay). */
static void checked_let_go(Checked *c)
{
    release(c->held, c->names, c->views);
    c->held = 0;
}

static void checked_clear(Checked *c)
{
    checked_let_go(c);
    for (Py_ssize_t i = 0; i < c->parsed; i++)
        template_clear(&c->kept[i]);
    PyMem_Free(c->names);
    PyMem_Free(c->views);
    PyMem_Free(c->results);
    PyMem_Free(c->kept);
}

static PyObject *read_checked(PyObject *self, PyObject *args)
{
    PyObject *paths, *buffers, *templates, *out = NULL;
    if (!PyArg_ParseTuple(args, "O!O!O!", &PyList_Type, &paths, &PyList_Type, &buffers,
                          &PyList_Type, &templates)
        || !same_length(paths, buffers, "buffers") || !same_length(paths, templates, "templates"))
        return NULL;
    Checked c = {0};
    if (checked_hold(&c, paths, buffers, templates)) {
        Py_BEGIN_ALLOW_THREADS
        checked_read(&c, 0, c.n, NULL);
        Py_END_ALLOW_THREADS
        out = template_results(buffers, c.kept, c.results, c.n);
    }
    checked_clear(&c);
    return out;
}

#include "_named.h"
#include "_readqueue.h"
#include "_queueapi.h"

static PyMethodDef methods[] = {
    {"read_files", read_files, METH_VARARGS,
     "read_files(paths, buffers) -> list[int]\n\n"
     "Read each regular file from its start into its writable buffer, as much as the buffer "
     "holds, with the GIL released once for the whole list. Per file: the bytes read, or "
     "-errno (-EINVAL: not a regular file)."},
    {"read_checked", read_checked, METH_VARARGS,
     "read_checked(paths, buffers, templates) -> (list, misses)\n\n"
     "read_files, and per file the template to check it against (None: none): a tuple "
     "(head: bytes, skip_at, skip_len, crc_at, crc_start, data_start, data_end). A file "
     "passes when it filled its buffer (a NumPy array), holds data_end bytes, starts with "
     "head but for its bytes [skip_at:skip_at + skip_len] and, with crc_at set (-1: none; "
     "inside the skipped span), the CRC-32 of its bytes [crc_start:data_end] is the "
     "little-endian value at crc_at. Per file: (its buffer[data_start:data_end], bytes read) "
     "when it passed, else the bytes read or -errno as read_files; misses: how many did not "
     "pass."},
    {"crc32", crc32_py, METH_VARARGS,
     "crc32(data, value=0, level=2) -> int\n\nzlib.crc32, as read_checked computes it, the "
     "fastest way up to level (CRC32_FOLDS: 0 tables, 1 PCLMULQDQ, 2 VPCLMULQDQ): for tests."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "dliobench.storage._readfiles",
    "Whole files read with the GIL released once per list (optional C extension).", -1,
    methods,
};

PyMODINIT_FUNC PyInit__readfiles(void)
{
    crc32_init();
    if (PyType_Ready(&TicketType) < 0 || PyType_Ready(&ReadQueueType) < 0
        || PyType_Ready(&NamesType) < 0 || PyType_Ready(&BlockType) < 0)
        return NULL;
    PyObject *mod = PyModule_Create(&module);
    if (mod == NULL)
        return NULL;
    Py_INCREF(&TicketType);
    Py_INCREF(&ReadQueueType);
    Py_INCREF(&NamesType);
    Py_INCREF(&BlockType);
    if (PyModule_AddIntConstant(mod, "CRC32_FOLDS", crc32_folds()) != 0
        || PyModule_AddObject(mod, "Ticket", (PyObject *)&TicketType) != 0
        || PyModule_AddObject(mod, "ReadQueue", (PyObject *)&ReadQueueType) != 0
        || PyModule_AddObject(mod, "Names", (PyObject *)&NamesType) != 0
        || PyModule_AddObject(mod, "Block", (PyObject *)&BlockType) != 0)
        Py_CLEAR(mod);
    return mod;
}
