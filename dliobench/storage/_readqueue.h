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
 * Threads at work, at most one per CPU the process may run on while reads come from the page
 * cache: a read that would wait for the device (RWF_NOWAIT, read_piece) sets `blocking`, and
 * while it is set every thread serves, so slow storage still has every thread's read in
 * flight. Threads beyond that wait as spares. Four readers taking turns on 2 vCPUs (64 KiB
 * npz, page-cached) ran at ~0.9 of two readers' rate, with the same CPU per sample: each
 * wake of a reader that had slept longest cost ~0.1 ms before it ran (perf sched).
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
    Checked c;              /* its files, buffers, templates and results (not named) */
    Named b;                /* a named batch's (submit_named) */
    int named;
    Py_ssize_t n;           /* files */
    Py_ssize_t chunk;       /* files a thread takes at once */
    Py_ssize_t claimed;     /* files taken by threads (or cancelled), from the first */
    Py_ssize_t remaining;   /* files not yet read (or cancelled) */
    PyObject *buffers;      /* the list of buffers, for the results' arrays */
    int state, cancelled;
} Ticket;

static void ticket_dealloc(Ticket *t)
{
    if (t->named)
        named_clear(&t->b);
    else
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
    if (t->named) {
        named_cancel(&t->b, lo, hi);
        return;
    }
    for (Py_ssize_t i = lo; i < hi; i++) {
        t->c.results[i] = -ECANCELED;
        t->c.kept[i].passed = 0;
    }
}

typedef struct {
    PyObject_HEAD
    pthread_mutex_t lock;
    pthread_cond_t work;     /* serving threads wait here for tickets */
    pthread_cond_t spare;    /* threads beyond `cpus` wait here while reads do not block */
    pthread_cond_t done;     /* wait() waits here for its ticket */
    Ticket *head, *tail;     /* with files no thread has taken, oldest first */
    Ticket *finished;        /* done, the queue's reference not yet dropped */
    Ticket *awaited;         /* the ticket wait() waits for: only its end wakes it */
    int idle;                /* serving threads waiting for work */
    int cpus;                /* CPUs this process may run on */
    int blocking;            /* the last work item read waited for the device */
    int spares;              /* threads waiting on `spare` */
    int serving;             /* threads in serve() */
    BlockCache blocks;       /* named batches' memory, for reuse */
    int helping;             /* wait() reads files instead of sleeping */
    Py_ssize_t helped;       /* files wait() read so */
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
    cpu_set_t set;
    q->cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    if (q->cpus < 1)
        q->cpus = 1;
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->work, NULL);
    pthread_cond_init(&q->spare, NULL);
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
    cache_clear(&q->blocks);
    pthread_mutex_destroy(&q->lock);
    pthread_cond_destroy(&q->work);
    pthread_cond_destroy(&q->spare);
    pthread_cond_destroy(&q->done);
    Py_TYPE(q)->tp_free((PyObject *)q);
}

/* A new ticket of n files (nothing held yet), or NULL (error set). */
static Ticket *ticket_new(Py_ssize_t n, Py_ssize_t chunk, int named)
{
    Ticket *t = PyObject_New(Ticket, &TicketType);
    if (t == NULL)
        return NULL;
    t->next = NULL;
    t->c = (Checked){0};
    t->b = (Named){0};
    t->named = named;
    t->n = n;
    t->chunk = chunk > 0 ? chunk : 1;
    t->claimed = 0;
    t->remaining = n;
    t->state = n ? QUEUED : DONE;  /* nothing to read: done */
    t->cancelled = 0;
    t->buffers = NULL;
    return t;
}

/* Queue t, its files held (the GIL held): t, or NULL with an error set (t dropped). */
static PyObject *queue_enqueue(ReadQueue *q, Ticket *t)
{
    if (t->n == 0)
        return (PyObject *)t;
    pthread_mutex_lock(&q->lock);
    if (q->closed) {
        pthread_mutex_unlock(&q->lock);
        PyErr_SetString(PyExc_RuntimeError, "ReadQueue.submit: the queue is closed");
        Py_DECREF(t);
        return NULL;
    }
    Py_INCREF(t);  /* the queue's, until its last file is read */
    if (q->tail == NULL)
        q->head = t;
    else
        q->tail->next = t;
    q->tail = t;
    /* a thread at work takes the new files when it is done, and wakes another for them
     * (serve): only when none is at work does this thread wake one, after unlocking */
    int wake = q->idle > 0 && q->idle + q->spares == q->serving;
    pthread_mutex_unlock(&q->lock);
    if (wake)
        pthread_cond_signal(&q->work);
    return (PyObject *)t;
}

/* Read the next `chunk` files of the oldest ticket with files untaken (the rest of a
 * cancelled one: marked, unread), the lock held on entry and on return, not while reading:
 * how many. */
static Py_ssize_t queue_work(ReadQueue *q)
{
    Ticket *t = q->head;
    Py_ssize_t n = t->n, lo = t->claimed, hi = t->cancelled ? n : lo + t->chunk;
    if (hi > n)
        hi = n;
    t->claimed = hi;
    t->state = READING;
    int cancelled = t->cancelled;
    if (hi == n)
        queue_pop(q);
    /* files left: another thread's, while fewer threads are at work than there are CPUs or
     * reads wait for the device (more threads on page-cached reads only take turns on the
     * CPUs: 4 readers on 2 vCPUs, 64 KiB, ran at ~0.88 of 2 readers' rate) */
    int more = q->head != NULL && q->idle > 0
               && (q->serving - q->idle - q->spares + q->helping < q->cpus || q->blocking);
    pthread_mutex_unlock(&q->lock);
    if (more)
        pthread_cond_signal(&q->work);
    int blocked = 0;
    if (cancelled)
        ticket_cancel_results(t, lo, hi);
    else if (t->named)
        named_read(&t->b, lo, hi, &blocked);
    else
        checked_read(&t->c, lo, hi, &blocked);
    pthread_mutex_lock(&q->lock);
    if (blocked != q->blocking)  /* spares serve, or those waiting for work become spares */
        pthread_cond_broadcast(blocked ? &q->spare : &q->work);
    q->blocking = blocked;
    queue_account(q, t, hi - lo);
    return hi - lo;
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
    int me = q->serving++;
    for (;;) {
        while (!q->closed) {  /* until there is work for this thread */
            if (me >= q->cpus && !q->blocking) {
                /* a spare: a wake for work it took goes on to a thread that is not one */
                if (q->head != NULL && q->idle > 0)
                    pthread_cond_signal(&q->work);
                q->spares++;
                pthread_cond_wait(&q->spare, &q->lock);
                q->spares--;
            } else if (q->head == NULL) {
                q->idle++;
                pthread_cond_wait(&q->work, &q->lock);
                q->idle--;
            } else {
                break;
            }
        }
        if (q->closed)
            break;
        queue_work(q);
    }
    q->serving--;
    pthread_mutex_unlock(&q->lock);
    Py_END_ALLOW_THREADS
    queue_drain(q);
    Py_RETURN_NONE;
}
