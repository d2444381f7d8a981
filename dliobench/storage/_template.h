/* read_checked's templates (included once, by _readfiles.c, after Python.h).
 *
 * A template is what every file of a dataset holds before its data, byte for byte, when a
 * format writes its headers identically in each, but for a span the format ignores or checks
 * otherwise (npy: none; npz: the zip entry's time and CRC-32):
 * the caller parses one file through its format and hands the bytes before its data here, so
 * the others are checked with a memcmp and, for npz, their CRC-32, without the GIL.
 */
#include <stdint.h>
#include <string.h>

#include "_crc32.h"

typedef struct {
    PyObject *held;     /* the template tuple (a reference), NULL for none */
    const char *head;   /* the file's bytes before its data, as the template has them */
    Py_ssize_t head_len, skip_at, skip_len, crc_at, crc_start, data_start, data_end;
    PyObject *slice;    /* data_start:data_end (a reference), shared with the previous file */
    int owns_slice;
    int passed;
} Template;

/* Parse templates[i] into t (prev: the previous file's, reused when the same object);
 * 1, or 0 with an error set. */
static int template_parse(PyObject *obj, Template *t, const Template *prev)
{
    if (obj == Py_None)
        return 1;
    if (prev != NULL && prev->held == obj) {
        *t = *prev;
        Py_INCREF(obj);
        t->owns_slice = 0;
        return 1;
    }
    Py_ssize_t len;
    if (!PyTuple_Check(obj)) {
        PyErr_SetString(PyExc_TypeError, "read_checked: a template is a tuple or None");
        return 0;
    }
    if (!PyArg_ParseTuple(obj, "y#nnnnnn;a template is (head, skip_at, skip_len, crc_at, "
                          "crc_start, data_start, data_end)", &t->head, &len, &t->skip_at,
                          &t->skip_len, &t->crc_at, &t->crc_start, &t->data_start,
                          &t->data_end))
        return 0;
    t->head_len = len;
    Py_ssize_t skip_end = t->skip_at + t->skip_len;
    if (t->skip_at < 0 || t->skip_len < 0 || skip_end > len || t->crc_at < -1
        || (t->crc_at >= 0 && (t->crc_at < t->skip_at || t->crc_at + 4 > skip_end))
        || len > t->data_end || t->crc_start < 0 || t->crc_start > t->data_end
        || t->data_start < 0 || t->data_start > t->data_end) {
        PyErr_SetString(PyExc_ValueError, "read_checked: a template's offsets are out of order");
        t->head = NULL;
        return 0;
    }
    t->slice = PySlice_New(PyTuple_GET_ITEM(obj, 5), PyTuple_GET_ITEM(obj, 6), NULL);
    if (t->slice == NULL) {
        t->head = NULL;
        return 0;
    }
    Py_INCREF(obj);
    t->held = obj;
    t->owns_slice = 1;
    return 1;
}

static void template_clear(Template *t)
{
    Py_XDECREF(t->held);
    if (t->owns_slice)
        Py_XDECREF(t->slice);
}

/* Whether a file of n bytes read into buf (of len bytes) passes t (no GIL needed); crc: the
 * CRC-32 of its bytes [crc_start:data_end], computed as it was read. */
static int template_passes(const Template *t, const char *buf, Py_ssize_t n, Py_ssize_t len,
                           uint32_t crc)
{
    if (t->held == NULL || n != len || n < t->data_end)
        return 0;
    Py_ssize_t after = t->skip_at + t->skip_len;
    if (memcmp(buf, t->head, (size_t)t->skip_at) != 0
        || memcmp(buf + after, t->head + after, (size_t)(t->head_len - after)) != 0)
        return 0;
    if (t->crc_at < 0)
        return 1;
    const unsigned char *at = (const unsigned char *)buf + t->crc_at;
    uint32_t want = (uint32_t)at[0] | (uint32_t)at[1] << 8 | (uint32_t)at[2] << 16
                    | (uint32_t)at[3] << 24;
    return crc == want;  /* of [crc_start:data_end], folded in as the file was read */
}

/* One file's entry: (buffer[data_start:data_end], n) when it passed, else n. */
static PyObject *template_entry(PyObject *buffer, const Template *t, Py_ssize_t n)
{
    if (!t->passed)
        return PyLong_FromSsize_t(n);
    PyObject *data = PyObject_GetItem(buffer, t->slice);
    if (data == NULL)
        return NULL;
    PyObject *count = PyLong_FromSsize_t(n);
    if (count == NULL) {
        Py_DECREF(data);
        return NULL;
    }
    PyObject *pair = PyTuple_New(2);
    if (pair == NULL) {
        Py_DECREF(data);
        Py_DECREF(count);
        return NULL;
    }
    PyTuple_SET_ITEM(pair, 0, data);
    PyTuple_SET_ITEM(pair, 1, count);
    return pair;
}

/* (entries, misses) of read_checked, or NULL with an error set. */
static PyObject *template_results(PyObject *buffers, const Template *kept,
                                  const Py_ssize_t *results, Py_ssize_t n)
{
    PyObject *out = PyList_New(n);
    Py_ssize_t misses = 0;
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        PyObject *entry = template_entry(PyList_GET_ITEM(buffers, i), &kept[i], results[i]);
        if (entry == NULL)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, i, entry);
        misses += !kept[i].passed;
    }
    if (out == NULL)
        return NULL;
    return Py_BuildValue("(Nn)", out, misses);
}

static PyObject *crc32_py(PyObject *self, PyObject *args)
{
    Py_buffer data;
    unsigned int value = 0;
    int level = 2;
    if (!PyArg_ParseTuple(args, "y*|Ii", &data, &value, &level))
        return NULL;
    uint32_t crc;
    Py_BEGIN_ALLOW_THREADS
    crc = crc32_update_at(level, value, data.buf, (size_t)data.len);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    return PyLong_FromUnsignedLong(crc);
}
