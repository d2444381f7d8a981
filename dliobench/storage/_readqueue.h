/* ReadQueue: work items of whole files read by threads that never take the GIL (included
 * once, by _readfiles.c, after _template.h).
 *
 * read_checked() releases the GIL for a whole list of files, but a Python reader thread still
 * takes it back between lists: to wait on its queue, to hand its results over, to be woken.
 * On 64 KiB samples those hand-overs, not the reads, set the loader's rate (0.43 of the
 * compiled loop on 2 cores: four reader threads and the consumer queued on one lock). Here a
 * reader thread calls serve() once and stays in C until close(): it takes tickets (one work
 * item's files, their buffers and templates, prepared under the GIL by submit()) from a
 * mutex-guarded list, reads and checks them as read_checked does, and marks them done. The
 * consumer's wait() releases the GIL until its ticket is done (waking every 50 ms to run
 * Python's signal handlers: SIGTERM and Ctrl-C still reach it) and builds read_checked's
 * results for it.
 *
 * References: the queue holds one on every ticket from submit() until a thread has finished
 * with it; a serving thread cannot drop it (no GIL), so finished tickets are kept on a list
 * that the next call holding the GIL (submit, wait, close, serve's return) empties.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>

enum { QUEUED, READING, DONE };


typedef struct Ticket {
    PyObject_HEAD
    struct Ticket *next;    /* in the queue's queued or finished list */
    Checked c;              /* its files, buffers, templates and results */
    Py_ssize_t chunk;       /* files a thread takes at once */
    Py_ssize_t claimed;     /* files taken by threads (or cancelled), from the first */
    Py_ssize_t remaining;   /* files not yet read (or cancelled) */
    PyObject *buffers;      /* the list of buffers, for the results' arrays */
    int state, cancelled;
} Ticket;

static void ticket_dealloc(Ticket *t)
{
    checked_clear(&t->c);
    Py_XDECREF(t->buffers);
    PyObject_Free(t);
}

static PyTypeObject TicketType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dliobench.storage._readfiles.Ticket",
    .tp_doc = "One batch of a ReadQueue: its files, buffers and templates.",
    .tp_basicsize = sizeof(Ticket),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = (destructor)ticket_dealloc,
};

static void ticket_cancel_results(Ticket *t, Py_ssize_t lo, Py_ssize_t hi)
{
    for (Py_ssize_t i = lo; i < hi; i++) {
        t->c.results[i] = -ECANCELED;
        t->c.kept[i].passed = 0;
    }
}

typedef struct {
    PyObject_HEAD
    pthread_mutex_t lock;
    pthread_cond_t work;     /* serving threads wait here for tickets */
    pthread_cond_t done;     /* wait() waits here for its ticket */
    Ticket *head, *tail;     /* with files no thread has taken, oldest first */
    Ticket *finished;        /* done, the queue's reference not yet dropped */
    Ticket *awaited;         /* the ticket wait() waits for: only its end wakes it */
    int idle;                /* serving threads waiting for work */
    int serving;             /* threads in serve() */
    int closed;
} ReadQueue;

/* Drop the queue's references to finished tickets (the GIL held). */
static void queue_drain(ReadQueue *q)
{
    pthread_mutex_lock(&q->lock);
    Ticket *t = q->finished;
    q->finished = NULL;
    pthread_mutex_unlock(&q->lock);
    while (t != NULL) {
        Ticket *next = t->next;
        Py_DECREF(t);
        t = next;
    }
}

/* Account `count` files of t as finished; the last makes it done, kept for queue_drain, and
 * wakes wait() if it waits for t (the lock held). */
static void queue_account(ReadQueue *q, Ticket *t, Py_ssize_t count)
{
    t->remaining -= count;
    if (t->remaining > 0)
        return;
    t->state = DONE;
    t->next = q->finished;
    q->finished = t;
    if (t == q->awaited)
        pthread_cond_broadcast(&q->done);
}

/* Take the oldest ticket off the queued list (the lock held). */
static void queue_pop(ReadQueue *q)
{
    Ticket *t = q->head;
    q->head = t->next;
    if (q->head == NULL)
        q->tail = NULL;
    t->next = NULL;
}

static PyObject *queue_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    if (PyTuple_GET_SIZE(args) != 0 || (kwds != NULL && PyDict_GET_SIZE(kwds) != 0)) {
        PyErr_SetString(PyExc_TypeError, "ReadQueue() takes no arguments");
        return NULL;
    }
    ReadQueue *q = (ReadQueue *)type->tp_alloc(type, 0);
    if (q == NULL)
        return NULL;
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->work, NULL);
    pthread_cond_init(&q->done, NULL);
    return (PyObject *)q;
}

static void queue_dealloc(ReadQueue *q)
{
    /* no thread serves it (a serving thread holds a reference): queued tickets go too */
    Ticket *t = q->head;
    q->head = q->tail = NULL;
    while (t != NULL) {
        Ticket *next = t->next;
        Py_DECREF(t);
        t = next;
    }
    queue_drain(q);
    pthread_mutex_destroy(&q->lock);
    pthread_cond_destroy(&q->work);
    pthread_cond_destroy(&q->done);
    Py_TYPE(q)->tp_free((PyObject *)q);
}

static PyObject *queue_submit(ReadQueue *q, PyObject *args)
{
    PyObject *paths, *buffers, *templates;
    Py_ssize_t chunk = 1;
    if (!PyArg_ParseTuple(args, "O!O!O!|n", &PyList_Type, &paths, &PyList_Type, &buffers,
                          &PyList_Type, &templates, &chunk)
        || !same_length(paths, buffers, "buffers") || !same_length(paths, templates, "templates"))
        return NULL;
    queue_drain(q);
    Ticket *t = PyObject_New(Ticket, &TicketType);
    if (t == NULL)
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(paths);
    t->next = NULL;
    t->c = (Checked){0};
    t->chunk = chunk > 0 ? chunk : 1;
    t->claimed = 0;
    t->remaining = n;
    t->state = QUEUED;
    t->cancelled = 0;
    Py_INCREF(buffers);
    t->buffers = buffers;
    if (!checked_hold(&t->c, paths, buffers, templates))
        goto fail;
    if (n == 0) {
        t->state = DONE;  /* nothing to read */
        return (PyObject *)t;
    }
    pthread_mutex_lock(&q->lock);
    if (q->closed) {
        pthread_mutex_unlock(&q->lock);
        PyErr_SetString(PyExc_RuntimeError, "ReadQueue.submit: the queue is closed");
        goto fail;
    }
    Py_INCREF(t);  /* the queue's, until its last file is read */
    if (q->tail == NULL)
        q->head = t;
    else
        q->tail->next = t;
    q->tail = t;
    /* a thread at work takes the new files when it is done, and wakes another for them
     * (serve): only when none is at work does this thread wake one, after unlocking */
    int wake = q->idle > 0 && q->idle == q->serving;
    pthread_mutex_unlock(&q->lock);
    if (wake)
        pthread_cond_signal(&q->work);
    return (PyObject *)t;
fail:
    Py_DECREF(t);
    return NULL;
}

static PyObject *queue_serve(ReadQueue *q, PyObject *unused)
{
#ifdef SCHED_BATCH
    /* this thread only (Linux): a reader it wakes does not preempt the consumer, which then
     * waited ~50-85 us in each submit() here on 2 vCPUs (it still gets its fair share) */
    struct sched_param param = {0};
    sched_setscheduler(0, SCHED_BATCH, &param);
#endif
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&q->lock);
    q->serving++;
    for (;;) {
        while (q->head == NULL && !q->closed) {
            q->idle++;
            pthread_cond_wait(&q->work, &q->lock);
            q->idle--;
        }
        if (q->closed)
            break;
        Ticket *t = q->head;  /* its next `chunk` files, or the rest of a cancelled one */
        Py_ssize_t n = t->c.n, lo = t->claimed, hi = t->cancelled ? n : lo + t->chunk;
        if (hi > n)
            hi = n;
        t->claimed = hi;
        t->state = READING;
        int cancelled = t->cancelled;
        if (hi == n)
            queue_pop(q);
        int more = q->head != NULL && q->idle > 0;  /* files left: another thread's */
        pthread_mutex_unlock(&q->lock);
        if (more)
            pthread_cond_signal(&q->work);
        if (cancelled)
            ticket_cancel_results(t, lo, hi);
        else
            checked_read(&t->c, lo, hi);
        pthread_mutex_lock(&q->lock);
        queue_account(q, t, hi - lo);
    }
    q->serving--;
    pthread_mutex_unlock(&q->lock);
    Py_END_ALLOW_THREADS
    queue_drain(q);
    Py_RETURN_NONE;
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
    if (t->buffers == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "ReadQueue.wait: the ticket's results were taken");
        return NULL;
    }
    PyObject *out = template_results(t->buffers, t->c.kept, t->c.results, t->c.n);
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
        ticket_cancel_results(t, t->claimed, t->c.n);
        Py_ssize_t count = t->c.n - t->claimed;
        t->claimed = t->c.n;
        queue_account(q, t, count);
    }
    pthread_cond_broadcast(&q->work);
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
    {"serve", (PyCFunction)queue_serve, METH_NOARGS,
     "serve() -> None\n\nRead queued tickets' files, oldest first, without the GIL, until "
     "close()."},
    {"wait", (PyCFunction)queue_wait, METH_O,
     "wait(ticket) -> (list, misses)\n\nread_checked's results for the ticket once it is "
     "read (cancelled or closed before it was read: every file -ECANCELED). Releases the GIL "
     "while waiting; Python's signal handlers run every 50 ms."},
    {"cancel", (PyCFunction)queue_cancel, METH_O,
     "cancel(ticket) -> None\n\nSkip the ticket's files no thread has taken yet."},
    {"close", (PyCFunction)queue_close, METH_NOARGS,
     "close() -> None\n\nStop serving: serve() returns once its current files are read; "
     "files never taken are done, unread."},
    {NULL, NULL, 0, NULL},
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
};
