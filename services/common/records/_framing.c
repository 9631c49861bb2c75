/* The compiled form of `services.common.records.reader.check_records_python`: one pass over an
 * uncompressed RecordBatch v2 records section that checks every record's framing by Kafka's
 * rules and allocates nothing per record.
 *
 * check_records(buffer, start, end, count) -> a str saying what is wrong (the caller raises
 * CorruptRecordError with it), or, when the `count` records fill buffer[start:end] exactly and each
 * is well formed, what the leader's record rules need, gathered by the same pass:
 * (index of the first record whose offset delta is not its index, the smallest and the largest
 * timestamp delta, index of the first record with a null key, index of the first record whose
 * attributes byte has its high bit set), an index -1 when there is none and both deltas 0 when
 * there are no records. The framing rules, in record order:
 *
 *   length           varint   >= 0, the record ends within the section
 *   attributes       int8
 *   timestampDelta   varlong
 *   offsetDelta      varint
 *   keyLength        varint   -1 null, other negatives corrupt; the key fits the record
 *   valueLength      varint   the same
 *   headersCount     varint   >= 0
 *   header key len   varint   >= 0, fits; header value length -1 null, other negatives corrupt
 *   the record ends exactly where its length says; the last record ends exactly at `end`.
 *
 * A varint is at most 5 bytes, a varlong at most 10, as Kafka reads them.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

enum { OK = 0, VARINT_CUT, VARINT_LONG, NEGATIVE, PAST_RECORD };

/* Reads the zigzag varint at *pos (not past limit, at most max_bytes long). */
static int read_varint(const unsigned char *buf, Py_ssize_t *pos, Py_ssize_t limit, int max_bytes,
                       int64_t *value)
{
    uint64_t raw = 0;
    int shift = 0;
    Py_ssize_t p = *pos;
    for (int i = 0; i < max_bytes; i++) {
        if (p >= limit)
            return VARINT_CUT;
        unsigned char byte = buf[p++];
        raw |= (uint64_t)(byte & 0x7F) << shift;
        if (byte < 0x80) {
            *value = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
            *pos = p;
            return OK;
        }
        shift += 7;
    }
    return VARINT_LONG;
}

/* Reads a length of at least `min_length` and skips the bytes it announces, within the record. */
static int skip_bytes(const unsigned char *buf, Py_ssize_t *pos, Py_ssize_t record_end, int64_t min_length,
                      int64_t *length)
{
    int rc = read_varint(buf, pos, record_end, 5, length);
    if (rc != OK)
        return rc;
    if (*length < min_length)
        return NEGATIVE;
    if (*length > record_end - *pos)
        return PAST_RECORD;
    if (*length > 0)
        *pos += (Py_ssize_t)*length;
    return OK;
}

#define STEP(call, name)          \
    do {                          \
        rc = (call);              \
        if (rc != OK) {           \
            field = (name);       \
            goto corrupt;         \
        }                         \
    } while (0)

static PyObject *check_records(PyObject *Py_UNUSED(self), PyObject *args)
{
    Py_buffer view;
    Py_ssize_t start, end, count;
    if (!PyArg_ParseTuple(args, "y*nnn", &view, &start, &end, &count))
        return NULL;
    if (start < 0 || end > view.len || start > end) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "records section out of the buffer's bounds");
        return NULL;
    }
    const unsigned char *buf = (const unsigned char *)view.buf;
    Py_ssize_t pos = start, index = 0, record_end = end;
    int64_t value = 0, headers, min_timestamp_delta = 0, max_timestamp_delta = 0;
    Py_ssize_t offset_delta_fault = -1, null_key = -1, high_attributes = -1;
    const char *field = "";
    int rc = OK;
    PyObject *defect;
    for (; index < count; index++) {
        if (pos >= end) {
            defect = PyUnicode_FromFormat("the records section ends after %zd of %zd records", index, count);
            goto done;
        }
        record_end = end;
        STEP(read_varint(buf, &pos, end, 5, &value), "length");
        if (value < 0 || value > end - pos) {
            defect = PyUnicode_FromFormat("record %zd: length %lld does not fit the %zd bytes left", index,
                                          (long long)value, end - pos);
            goto done;
        }
        record_end = pos + (Py_ssize_t)value;
        STEP(pos < record_end ? OK : VARINT_CUT, "attributes");
        if (buf[pos] >= 0x80 && high_attributes < 0)
            high_attributes = index;
        pos++;
        STEP(read_varint(buf, &pos, record_end, 10, &value), "timestamp delta");
        if (index == 0 || value < min_timestamp_delta)
            min_timestamp_delta = value;
        if (index == 0 || value > max_timestamp_delta)
            max_timestamp_delta = value;
        STEP(read_varint(buf, &pos, record_end, 5, &value), "offset delta");
        if (value != index && offset_delta_fault < 0)
            offset_delta_fault = index;
        STEP(skip_bytes(buf, &pos, record_end, -1, &value), "key length");
        if (value == -1 && null_key < 0)
            null_key = index;
        STEP(skip_bytes(buf, &pos, record_end, -1, &value), "value length");
        STEP(read_varint(buf, &pos, record_end, 5, &headers), "header count");
        STEP(headers < 0 ? (value = headers, NEGATIVE) : OK, "header count");
        for (int64_t h = 0; h < headers; h++) {
            STEP(skip_bytes(buf, &pos, record_end, 0, &value), "header key length");
            STEP(skip_bytes(buf, &pos, record_end, -1, &value), "header value length");
        }
        if (pos != record_end) {
            defect = PyUnicode_FromFormat("record %zd: ends %zd bytes before its length says", index,
                                          record_end - pos);
            goto done;
        }
    }
    if (pos != end)
        defect = PyUnicode_FromFormat("%zd bytes follow the last of %zd records", end - pos, count);
    else
        defect = Py_BuildValue("(nLLnn)", offset_delta_fault, (long long)min_timestamp_delta,
                               (long long)max_timestamp_delta, null_key, high_attributes);
    goto done;
corrupt:
    if (rc == NEGATIVE)
        defect = PyUnicode_FromFormat("record %zd: invalid %s %lld", index, field, (long long)value);
    else if (rc == VARINT_LONG)
        defect = PyUnicode_FromFormat("record %zd: the %s varint is too long", index, field);
    else
        defect = PyUnicode_FromFormat("record %zd: the %s runs past the end of the record", index, field);
done:
    PyBuffer_Release(&view);
    return defect;
}

static PyMethodDef methods[] = {
    {"check_records", check_records, METH_VARARGS,
     "check_records(buffer, start, end, count) -> (offset delta fault, min and max timestamp delta, null key, "
     "high attributes), "
     "or a str saying why the records are corrupt"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_framing", "Compiled RecordBatch v2 record framing check.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__framing(void)
{
    return PyModule_Create(&module);
}
