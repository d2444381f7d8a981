/* Whole files read into caller-provided buffers with the GIL released once per call.
 *
 * A Python thread that reads a small file (open, fstat, pread, close) gives up and retakes
 * the GIL around each system call; with several reader threads on few cores those
 * hand-overs, not the reads, set the rate. read_files() does the system calls of a whole
 * list of files in one stretch without the GIL. It reports per file the bytes read or
 * -errno, and leaves every error's wording to the Python caller, which reads a failed file
 * again through the ordinary path to raise its sentence. Optional: without a compiler the
 * package works, one file at a time (dliobench/storage/posix_io.py).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* Read file `path` from offset 0 into buf[0:size]: bytes read (fewer at end of file) or -errno.
 * Only regular files are read (-EINVAL otherwise: a FIFO's open does not block, O_NONBLOCK). */
static Py_ssize_t read_one(const char *path, char *buf, Py_ssize_t size)
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
        ssize_t got = pread(fd, buf + done, (size_t)(size - done), (off_t)done);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            int err = errno;
            close(fd);
            return -err;
        }
        if (got == 0)
            break;
        done += got;
    }
    close(fd);
    return done;
}

static PyObject *read_files(PyObject *self, PyObject *args)
{
    PyObject *paths, *buffers;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &paths, &PyList_Type, &buffers))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(paths);
    if (PyList_GET_SIZE(buffers) != n) {
        PyErr_SetString(PyExc_ValueError, "read_files: as many buffers as paths");
        return NULL;
    }
    PyObject **names = PyMem_Calloc((size_t)(n ? n : 1), sizeof(PyObject *));
    Py_buffer *views = PyMem_Calloc((size_t)(n ? n : 1), sizeof(Py_buffer));
    Py_ssize_t *results = PyMem_Calloc((size_t)(n ? n : 1), sizeof(Py_ssize_t));
    PyObject *out = NULL;
    Py_ssize_t held = 0;
    if (names == NULL || views == NULL || results == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (; held < n; held++) {
        if (!PyUnicode_FSConverter(PyList_GET_ITEM(paths, held), &names[held]))
            goto done;
        if (PyObject_GetBuffer(PyList_GET_ITEM(buffers, held), &views[held],
                               PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) != 0) {
            Py_CLEAR(names[held]);
            goto done;
        }
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++)
        results[i] = read_one(PyBytes_AS_STRING(names[i]), views[i].buf, views[i].len);
    Py_END_ALLOW_THREADS
    out = PyList_New(n);
    if (out == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *value = PyLong_FromSsize_t(results[i]);
        if (value == NULL) {
            Py_CLEAR(out);
            goto done;
        }
        PyList_SET_ITEM(out, i, value);
    }
done:
    for (Py_ssize_t i = 0; i < held; i++) {
        Py_DECREF(names[i]);
        PyBuffer_Release(&views[i]);
    }
    PyMem_Free(names);
    PyMem_Free(views);
    PyMem_Free(results);
    return out;
}

static PyMethodDef methods[] = {
    {"read_files", read_files, METH_VARARGS,
     "read_files(paths, buffers) -> list[int]\n\n"
     "Read each regular file from its start into its writable buffer, as much as the buffer "
     "holds, with the GIL released once for the whole list. Per file: the bytes read, or "
     "-errno (-EINVAL: not a regular file)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "dliobench.storage._readfiles",
    "Whole files read with the GIL released once per list (optional C extension).", -1,
    methods,
};

PyMODINIT_FUNC PyInit__readfiles(void)
{
    return PyModule_Create(&module);
}
