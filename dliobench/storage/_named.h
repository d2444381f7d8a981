/* Named batches: a ReadQueue ticket whose files are named by their index and read into one
 * block (included once, by _readfiles.c, after _template.h and before _readqueue.h).
 *
 * A batch of read_checked's per-file lists costs its consumer, in Python, a path string, a
 * buffer and a template per file, and their conversions in submit(): ~3.6 us of a 64 KiB
 * sample's ~19 us on 2 cores (RESULTS.md, "Speed, session 12"). When every file of a dataset
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
    return (PyObject *)self;
}

/* The path of file i into out[0:cap]: its length, or -1 when it does not fit. */
static int names_format(const Names *names, long long i, char *out, size_t cap)
{
    int len = names->folders
        ? snprintf(out, cap, "%s%04lld/%s_%07lld.%s", names->prefix, i % names->folders,
                   names->stem, i, names->extension)
        : snprintf(out, cap, "%s%s_%07lld.%s", names->prefix, names->stem, i, names->extension);
    return len >= 0 && (size_t)len < cap ? len : -1;
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

/* Block: page-aligned memory that a named batch's files are read into, lent to NumPy
 * through the buffer protocol (np.frombuffer). When the last array using it dies its memory
 * goes back to its queue's BlockCache, for the next batch: a block per batch from malloc
 * was a fresh mmap or a heap the allocator had just trimmed, paid in a page fault per 4 KiB
 * (64 KiB npz, 8 epochs: 17 faults per sample, 28k against 97k samples/s). */
#define CACHED_BLOCKS 8  /* kept for reuse, at most: the batches in flight, as a rule */

typedef struct {
    char *buf[CACHED_BLOCKS];
    Py_ssize_t cap[CACHED_BLOCKS];
    int count;
} BlockCache;

typedef struct {
    PyObject_HEAD
    char *buf;
    Py_ssize_t len, cap;
    PyObject *owner;        /* the queue whose cache takes the memory back (a reference) */
    BlockCache *cache;
} Block;

/* Memory of at least len bytes (cap: how much) from cache, else new and page-aligned; NULL
 * when none can be had (the GIL held: it guards the cache). */
static char *cache_take(BlockCache *cache, Py_ssize_t len, Py_ssize_t *cap)
{
    for (int i = cache->count - 1; i >= 0; i--)
        if (cache->cap[i] >= len && cache->cap[i] / 2 <= len) {
            char *buf = cache->buf[i];
            *cap = cache->cap[i];
            cache->count--;
            cache->buf[i] = cache->buf[cache->count];
            cache->cap[i] = cache->cap[cache->count];
            return buf;
        }
    void *buf = NULL;
    *cap = len ? len : PAGE;
    return posix_memalign(&buf, PAGE, (size_t)*cap) == 0 ? buf : NULL;
}

/* Keep buf for reuse when there is room, else free it (the GIL held). */
static void cache_give(BlockCache *cache, char *buf, Py_ssize_t cap)
{
    if (cache->count < CACHED_BLOCKS) {
        cache->buf[cache->count] = buf;
        cache->cap[cache->count++] = cap;
    } else {
        free(buf);
    }
}

static void cache_clear(BlockCache *cache)
{
    while (cache->count > 0)
        free(cache->buf[--cache->count]);
}

static int block_getbuffer(Block *self, Py_buffer *view, int flags)
{
    return PyBuffer_FillInfo(view, (PyObject *)self, self->buf, self->len, 0, flags);
}

static PyBufferProcs block_as_buffer = {(getbufferproc)block_getbuffer, NULL};

static void block_dealloc(Block *self)
{
    if (self->buf != NULL)
        cache_give(self->cache, self->buf, self->cap);
    Py_XDECREF(self->owner);
    PyObject_Free(self);
}

static PyTypeObject BlockType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dliobench.storage._readfiles.Block",
    .tp_doc = "A named batch's memory: its files, one per row (ReadQueue.submit_named).",
    .tp_basicsize = sizeof(Block),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_as_buffer = &block_as_buffer,
    .tp_dealloc = (destructor)block_dealloc,
};

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

/* Fill b (zeroed) for n files (ids: a list of ints); 1, or 0 with an error set (b then holds
 * what it took: named_clear). */
static int named_hold(Named *b, PyObject *names, PyObject *ids, Py_ssize_t size,
                      PyObject *template, PyObject *owner, BlockCache *cache)
{
    Py_ssize_t n = PyList_GET_SIZE(ids), m = n ? n : 1;
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
    for (Py_ssize_t i = 0; i < n; i++) {
        b->ids[i] = PyLong_AsLongLong(PyList_GET_ITEM(ids, i));
        if (b->ids[i] < 0) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "submit_named: a negative file index");
            return 0;
        }
    }
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

/* (block, results, passed, misses) of n files, or NULL with an error set. */
static PyObject *named_results(Named *b, Py_ssize_t n)
{
    PyObject *results = int_list(b->results, n);
    if (results == NULL)
        return NULL;
    Py_ssize_t misses = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        misses += !b->passed[i];
    return Py_BuildValue("(ONy#n)", (PyObject *)b->block, results, b->passed, n, misses);
}
