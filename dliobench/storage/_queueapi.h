/* The ReadQueue's Python face: its two ways to submit a batch, wait, cancel and close, its
 * methods and its type (included once, by _readfiles.c, after _readqueue.h).
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
    if (!PyArg_ParseTuple(args, "O!OnO|n", &NamesType, &names, &ids, &size, &template, &chunk))
        return NULL;
    Py_ssize_t n = named_count(ids);
    if (n < 0)
        return NULL;
    if (size < 0) {
        PyErr_SetString(PyExc_ValueError, "submit_named: a size is 0 or more");
        return NULL;
    }
    queue_drain(q);
    Ticket *t = ticket_new(n, chunk, 1);
    if (t == NULL)
        return NULL;
    if (!named_hold(&t->b, names, ids, n, size, template, (PyObject *)q, &q->blocks)) {
        Py_DECREF(t);
        return NULL;
    }
    return queue_enqueue(q, t);
}

static PyObject *queue_wait(ReadQueue *q, PyObject *arg)
{
    if (!PyObject_TypeCheck(arg, &TicketType)) {
        PyErr_SetString(PyExc_TypeError, "ReadQueue.wait: a Ticket of submit()");
        return NULL;
    }
    Ticket *t = (Ticket *)arg;
    for (;;) {
        int state;
        Py_BEGIN_ALLOW_THREADS
        pthread_mutex_lock(&q->lock);
        if (q->serving > 0 && !q->blocking) {
            /* read untaken files instead of sleeping, for 50 ms at most: a sleep and a wake
             * per batch took ~8 % of the CPU on 64 KiB samples. Not while reads wait for the
             * device (every thread serves then, and a read could hold off SIGTERM) */
            struct timespec from, now;
            clock_gettime(CLOCK_MONOTONIC, &from);
            q->helping = 1;
            while (t->state != DONE && q->head != NULL && !q->closed && !q->blocking) {
                q->helped += queue_work(q);
                clock_gettime(CLOCK_MONOTONIC, &now);
                if ((now.tv_sec - from.tv_sec) * 1000000000L + now.tv_nsec - from.tv_nsec
                    > 50 * 1000 * 1000L)
                    break;
            }
            q->helping = 0;
        }
        if (t->state != DONE) {
            q->awaited = t;
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_nsec += 50 * 1000 * 1000;  /* then Python's signal handlers run */
            if (until.tv_nsec >= 1000000000L) {
                until.tv_sec += 1;
                until.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&q->done, &q->lock, &until);
            q->awaited = NULL;
        }
        state = t->state;
        pthread_mutex_unlock(&q->lock);
        Py_END_ALLOW_THREADS
        if (state == DONE)
            break;
        if (PyErr_CheckSignals() < 0)
            return NULL;
    }
    queue_drain(q);
    if (t->named)
        return named_results(&t->b, t->n);
    if (t->buffers == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "ReadQueue.wait: the ticket's results were taken");
        return NULL;
    }
    PyObject *out = template_results(t->buffers, t->c.kept, t->c.results, t->n);
    /* the results' arrays keep what they use: the ticket lets go of the buffers now, so
     * pooled memory goes back as soon as the samples are dropped */
    checked_let_go(&t->c);
    Py_CLEAR(t->buffers);
    return out;
}

static PyObject *queue_cancel(ReadQueue *q, PyObject *arg)
{
    if (!PyObject_TypeCheck(arg, &TicketType)) {
        PyErr_SetString(PyExc_TypeError, "ReadQueue.cancel: a Ticket of submit()");
        return NULL;
    }
    pthread_mutex_lock(&q->lock);
    ((Ticket *)arg)->cancelled = 1;  /* its files no thread has taken are not read */
    pthread_mutex_unlock(&q->lock);
    Py_RETURN_NONE;
}

static PyObject *queue_close(ReadQueue *q, PyObject *unused)
{

    pthread_mutex_lock(&q->lock);
    q->closed = 1;
    while (q->head != NULL) {  /* files never taken: done, unread */
        Ticket *t = q->head;
        queue_pop(q);
        ticket_cancel_results(t, t->claimed, t->n);
        Py_ssize_t count = t->n - t->claimed;
        t->claimed = t->n;
        queue_account(q, t, count);
    }
    pthread_cond_broadcast(&q->work);
    pthread_cond_broadcast(&q->spare);
    pthread_cond_broadcast(&q->done);
    pthread_mutex_unlock(&q->lock);
    queue_drain(q);
    Py_RETURN_NONE;
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
     "the one template (None: none passes); ids: a list of ints or an int64 array. wait() "
     "then gives (block, results, passed, misses, nbytes): per file the bytes read or "
     "-errno, a byte per file, 1 if it passed, how many did not, and the bytes read."},
    {"serve", (PyCFunction)queue_serve, METH_NOARGS,
     "serve() -> None\n\nRead queued tickets' files, oldest first, without the GIL, until "
     "close(). While reads come from the page cache, threads beyond the first `cpus` to "
     "serve wait as spares; a read that waits for the device sets `blocking` and wakes them."},
    {"wait", (PyCFunction)queue_wait, METH_O,
     "wait(ticket) -> (list, misses)\n\nread_checked's results for the ticket once it is "
     "read; a submit_named() ticket's: (block, results, passed, misses, nbytes) (cancelled "
     "or closed before it was read: every file -ECANCELED). Releases the GIL "
     "while waiting; Python's signal handlers run every 50 ms. While threads serve the "
     "queue and reads come from the page cache, it reads untaken files itself (the oldest "
     "first) rather than sleep."},
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
