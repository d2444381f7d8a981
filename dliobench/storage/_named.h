/* Named batches: a ReadQueue ticket whose files are named by their index and read into one
 * block (included once, by _readfiles.c, after _template.h and before _readqueue.h).
 *
 * A batch of read_checked's per-file lists costs its consumer, in Python, a path string, a
 * buffer and a template per file, and their conversions in submit(): ~3.6 us of a 64 KiB
 * sample's ~19 us on 2 cores (benchmarks/history/RESULTS-2026-11-22-to-2026-11-25.md,
 * "Speed, session 12"). When every file of a dataset
 * has one size and its name is a pure function of its index (a generated dataset's layout,
 * dataset/layout.py: "{prefix}{i % folders:04d}/{stem}_{i:07d}.{ext}"), the consumer hands
 * over the indices and nothing else: each reader thread formats a file's path on its own
 * stack, reads the file into its row of one page-aligned block per batch (rows a whole
 * number of pages apart, as the compiled ceiling's memory), and checks it against the one
 * template. The consumer takes the block and each file's bytes read and whether it passed.
 */
#include <stdint.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>

#define PAGE 4096

/* Names(prefix, stem, folders, extension): the path of file i, as dataset/layout.py's _name. */
typedef struct {
    PyObject_HEAD
    char *prefix, *stem, *extension;
    size_t prefix_len, stem_len, extension_len;
    long long folders;
} Names;

static char *names_copy(PyObject *obj)
{
    PyObject *raw = NULL;
    if (!PyUnicode_FSConverter(obj, &raw))
        return NULL;
    char *out = strdup(PyBytes_AS_STRING(raw));
    Py_DECREF(raw);
    if (out == NULL)
        PyErr_NoMemory();
    return out;
}

static void names_dealloc(Names *self)
{
    free(self->prefix);
    free(self->stem);
    free(self->extension);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *names_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *prefix, *stem, *extension;
    long long folders;
    if (kwds != NULL && PyDict_GET_SIZE(kwds) != 0) {
        PyErr_SetString(PyExc_TypeError, "Names() takes positional arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OOLO", &prefix, &stem, &folders, &extension))
        return NULL;
    if (folders < 0) {
        PyErr_SetString(PyExc_ValueError, "Names: folders is 0 or more");
        return NULL;
    }
    Names *self = (Names *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->folders = folders;
    if ((self->prefix = names_copy(prefix)) == NULL || (self->stem = names_copy(stem)) == NULL
        || (self->extension = names_copy(extension)) == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    self->prefix_len = strlen(self->prefix);
    self->stem_len = strlen(self->stem);
    self->extension_len = strlen(self->extension);
    return (PyObject *)self;
}

/* The decimal digits of v, zero-padded to at least width, at the end of out[0:24]: where
 * they start. */
static char *decimal(unsigned long long v, int width, char *end)
{
    char *p = end;
    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    while (end - p < width)
        *--p = '0';
    return p;
}

/* The path of file i (0 or more) into out[0:cap]: its length, or -1 when it does not fit.
 * Made by hand: snprintf's parsing of its format took ~1.5 % of a 64 KiB npz run's CPU. */
static int names_format(const Names *names, long long i, char *out, size_t cap)
{
    char folder[24], index[24];
    char *f = names->folders ? decimal((unsigned long long)(i % names->folders), 4, folder + 24)
                             : folder + 24;
    char *x = decimal((unsigned long long)i, 7, index + 24);
    size_t flen = (size_t)(folder + 24 - f), xlen = (size_t)(index + 24 - x);
    size_t len = names->prefix_len + (names->folders ? flen + 1 : 0) + names->stem_len + 1
        + xlen + 1 + names->extension_len;
    if (len >= cap)
        return -1;
    char *p = out;
    memcpy(p, names->prefix, names->prefix_len);
    p += names->prefix_len;
    if (names->folders) {
        memcpy(p, f, flen);
        p += flen;
        *p++ = '/';
    }
    memcpy(p, names->stem, names->stem_len);
    p += names->stem_len;
    *p++ = '_';
    memcpy(p, x, xlen);
    p += xlen;
    *p++ = '.';
    memcpy(p, names->extension, names->extension_len);
    p += names->extension_len;
    *p = '\0';
    return (int)len;
}

static PyObject *names_call(Names *self, PyObject *args, PyObject *kwds)
{
    long long i;
    char path[PATH_MAX];
    if (!PyArg_ParseTuple(args, "L", &i))
        return NULL;
    if (i < 0 || names_format(self, i, path, sizeof path) < 0) {
        PyErr_SetString(PyExc_ValueError, "Names: a negative index, or a path too long");
        return NULL;
    }
    return PyUnicode_DecodeFSDefault(path);
}

static PyTypeObject NamesType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dliobench.storage._readfiles.Names",
    .tp_doc = "Names(prefix, stem, folders, extension)\n\nThe path of file i: prefix + "
              "f'{i % folders:04d}/' (folders > 0) + f'{stem}_{i:07d}.{extension}'.",
    .tp_basicsize = sizeof(Names),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = names_new,
    .tp_call = (ternaryfunc)names_call,
    .tp_dealloc = (destructor)names_dealloc,
};

#include "_block.h"

/* A named batch's files: their indices, the block, the one template, each result. */
typedef struct {
    Names *names;           /* a reference */
    int64_t *ids;
    Py_ssize_t size, stride;
    Block *block;           /* a reference */
    Template kept;
    Py_ssize_t *results;    /* per file: bytes read or -errno */
    char *passed;
} Named;

/* The n file indices of ids (a list of ints, or a buffer of int64: an index array) into
 * out; 1, or 0 with an error set. */
static int named_ids(PyObject *ids, Py_ssize_t n, int64_t *out)
{
    if (PyList_Check(ids)) {
        for (Py_ssize_t i = 0; i < n; i++)
            if ((out[i] = PyLong_AsLongLong(PyList_GET_ITEM(ids, i))) == -1 && PyErr_Occurred())
                return 0;
    } else {
        Py_buffer view;
        if (PyObject_GetBuffer(ids, &view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) != 0) {
            PyErr_SetString(PyExc_TypeError, "submit_named: ids are a list or an int64 array");
            return 0;
        }
        int int64 = view.itemsize == 8 && view.len == n * 8 && view.format != NULL
            && strchr("lq", view.format[view.format[0] == '=' || view.format[0] == '<']) != NULL;
        if (int64)
            memcpy(out, view.buf, (size_t)n * 8);
        PyBuffer_Release(&view);
        if (!int64) {
            PyErr_SetString(PyExc_TypeError, "submit_named: ids are a list or an int64 array");
            return 0;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (out[i] < 0) {
            PyErr_SetString(PyExc_ValueError, "submit_named: a negative file index");
            return 0;
        }
    return 1;
}

/* How many indices ids holds (named_ids' kinds), or -1 with an error set. */
static Py_ssize_t named_count(PyObject *ids)
{
    if (PyList_Check(ids))
        return PyList_GET_SIZE(ids);
    Py_ssize_t n = PyObject_Length(ids);
    if (n < 0)
        PyErr_SetString(PyExc_TypeError, "submit_named: ids are a list or an int64 array");
    return n;
}

/* Fill b (zeroed) for the n files of ids (named_ids); 1, or 0 with an error set (b then
 * holds what it took: named_clear). */
static int named_hold(Named *b, PyObject *names, PyObject *ids, Py_ssize_t n, Py_ssize_t size,
                      PyObject *template, PyObject *owner, BlockCache *cache)
{
    Py_ssize_t m = n ? n : 1;
    Py_INCREF(names);
    b->names = (Names *)names;
    b->size = size;
    b->stride = (size + PAGE - 1) / PAGE * PAGE;
    b->ids = PyMem_Calloc((size_t)m, sizeof(int64_t));
    b->results = PyMem_Calloc((size_t)m, sizeof(Py_ssize_t));
    b->passed = PyMem_Calloc((size_t)m, 1);
    b->block = PyObject_New(Block, &BlockType);
    if (b->block != NULL) {
        b->block->buf = NULL;
        Py_INCREF(owner);
        b->block->owner = owner;
        b->block->cache = cache;
    }
    if (b->ids == NULL || b->results == NULL || b->passed == NULL || b->block == NULL) {
        PyErr_NoMemory();
        return 0;
    }
    if (!named_ids(ids, n, b->ids))
        return 0;
    b->block->len = b->stride * n;
    b->block->buf = cache_take(cache, b->block->len, &b->block->cap);
    if (b->block->buf == NULL) {
        PyErr_NoMemory();
        return 0;
    }
    return template_parse(template, &b->kept, NULL);
}

/* Read files [lo:hi] of b into their rows and check each against the template (no GIL);
 * blocked: as read_one's. */
static void named_read(Named *b, Py_ssize_t lo, Py_ssize_t hi, int *blocked)
{
    char path[PATH_MAX];
    for (Py_ssize_t i = lo; i < hi; i++) {
        int passed = 0;
        b->results[i] = names_format(b->names, b->ids[i], path, sizeof path) < 0
            ? -ENAMETOOLONG
            : read_against(path, b->block->buf + i * b->stride, b->size, &b->kept, &passed,
                           blocked);
        b->passed[i] = (char)passed;
    }
}

static void named_cancel(Named *b, Py_ssize_t lo, Py_ssize_t hi)
{
    for (Py_ssize_t i = lo; i < hi; i++) {
        b->results[i] = -ECANCELED;
        b->passed[i] = 0;
    }
}

static void named_clear(Named *b)
{
    Py_XDECREF(b->names);
    Py_XDECREF(b->block);
    template_clear(&b->kept);
    PyMem_Free(b->ids);
    PyMem_Free(b->results);
    PyMem_Free(b->passed);
}

/* (block, results, passed, misses, nbytes) of n files, or NULL with an error set: nbytes
 * is the sum of the bytes read (results of 0 or more). */
static PyObject *named_results(Named *b, Py_ssize_t n)
{
    PyObject *results = int_list(b->results, n);
    if (results == NULL)
        return NULL;
    Py_ssize_t misses = 0, nbytes = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        misses += !b->passed[i];
        nbytes += b->results[i] > 0 ? b->results[i] : 0;
    }
    return Py_BuildValue("(ONy#nn)", (PyObject *)b->block, results, b->passed, n, misses,
                         nbytes);
}
