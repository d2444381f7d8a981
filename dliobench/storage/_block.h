/* Block: the memory of one named batch (_named.h), and the cache its memory goes back to
 * (included once, by _named.h). */

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
