/* The ReadQueue's Python face: its two ways to submit a batch, its methods and its type
 * (included once, by _readfiles.c, after _readqueue.h).
 *
 * submit() takes read_checked's lists: a path, a buffer and a template per file.
 * submit_named() takes file indices, for datasets whose files are all one size and named by
 * their index (_named.h): no Python object per file is made or converted.
 */

static PyObject *queue_submit(ReadQueue *q, PyObject *args)
{
    PyObject *paths, *buffers, *templates;
    Py_ssize_t chunk = 1;
    if (!PyArg_ParseTuple(args, "O!O!O!|n", &PyList_Type, &paths, &PyList_Type, &buffers,
                          &PyList_Type, &templates, &chunk)
        || !same_length(paths, buffers, "buffers") || !same_length(paths, templates, "templates"))
        return NULL;
    queue_drain(q);
    Ticket *t = ticket_new(PyList_GET_SIZE(paths), chunk, 0);
    if (t == NULL)
        return NULL;
    Py_INCREF(buffers);
    t->buffers = buffers;
    if (!checked_hold(&t->c, paths, buffers, templates)) {
        Py_DECREF(t);
        return NULL;
    }
    return queue_enqueue(q, t);
}

static PyObject *queue_submit_named(ReadQueue *q, PyObject *args)
{
    PyObject *names, *ids, *template;
    Py_ssize_t size, chunk = 1;
    if (!PyArg_ParseTuple(args, "O!O!nO|n", &NamesType, &names, &PyList_Type, &ids, &size,
                          &template, &chunk))
        return NULL;
    if (size < 0) {
        PyErr_SetString(PyExc_ValueError, "submit_named: a size is 0 or more");
        return NULL;
    }
    queue_drain(q);
    Ticket *t = ticket_new(PyList_GET_SIZE(ids), chunk, 1);
    if (t == NULL)
        return NULL;
    if (!named_hold(&t->b, names, ids, size, template, (PyObject *)q, &q->blocks)) {
        Py_DECREF(t);
        return NULL;
    }
    return queue_enqueue(q, t);
}

static PyMethodDef queue_methods[] = {
    {"submit", (PyCFunction)queue_submit, METH_VARARGS,
     "submit(paths, buffers, templates, chunk=1) -> Ticket\n\nQueue a batch of files, read "
     "whole into their buffers and checked against their templates as read_checked does, by "
     "the threads in serve(), each taking `chunk` consecutive files at a time."},
    {"submit_named", (PyCFunction)queue_submit_named, METH_VARARGS,
     "submit_named(names, ids, size, template, chunk=1) -> Ticket\n\nQueue a batch of files "
     "named names(i) for each index i of ids, every one `size` bytes, read into the rows of "
     "one page-aligned Block (each row `size` rounded up to 4096 bytes) and checked against "
     "the one template (None: none passes). wait() then gives (block, results, passed, "
     "misses): per file the bytes read or -errno, and a byte per file, 1 if it passed."},
    {"serve", (PyCFunction)queue_serve, METH_NOARGS,
     "serve() -> None\n\nRead queued tickets' files, oldest first, without the GIL, until "
     "close(). While reads come from the page cache, threads beyond the first `cpus` to "
     "serve wait as spares; a read that waits for the device sets `blocking` and wakes them."},
    {"wait", (PyCFunction)queue_wait, METH_O,
     "wait(ticket) -> (list, misses)\n\nread_checked's results for the ticket once it is "
     "read (cancelled or closed before it was read: every file -ECANCELED). Releases the GIL "
     "while waiting; Python's signal handlers run every 50 ms. While threads serve the "
     "queue, it reads untaken files itself (the oldest first) rather than sleep."},
    {"cancel", (PyCFunction)queue_cancel, METH_O,
     "cancel(ticket) -> None\n\nSkip the ticket's files no thread has taken yet."},
    {"close", (PyCFunction)queue_close, METH_NOARGS,
     "close() -> None\n\nStop serving: serve() returns once its current files are read; "
     "files never taken are done, unread."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef queue_members[] = {
    {"cpus", T_INT, offsetof(ReadQueue, cpus), READONLY,
     "CPUs this process may run on when the queue was made: threads at work on page-cached "
     "reads, at most."},
    {"blocking", T_INT, offsetof(ReadQueue, blocking), READONLY,
     "1 when the last work item's reads waited for the device (every thread then serves)."},
    {"helped", T_PYSSIZET, offsetof(ReadQueue, helped), READONLY,
     "Files wait() read itself, rather than sleep while a serving thread read them."},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject ReadQueueType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dliobench.storage._readfiles.ReadQueue",
    .tp_doc = "ReadQueue()\n\nWork items of whole files, read by threads in serve() that never "
              "take the GIL.",
    .tp_basicsize = sizeof(ReadQueue),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = queue_new,
    .tp_dealloc = (destructor)queue_dealloc,
    .tp_methods = queue_methods,
    .tp_members = queue_members,
};
