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
#include <string.h>

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

/* fill_columns(buffer, start, end, count, base_offset, batch_timestamp, log_append_time, timestamp_type,
 *              first_offset, end_offset, columns, cursor) -> the new cursor, or a str saying why the records
 * are corrupt.
 *
 * The same framing rules as check_records, in the same single pass, while copying the records whose
 * offset is in [first_offset, end_offset) into Arrow column buffers (`columns`, a tuple of 16
 * writable buffers in the COLUMN_* order below) from row `cursor[0]` on. `cursor` is (rows, key
 * bytes, value bytes, headers, header key bytes, header value bytes) already written; the answer is
 * the same after this batch. Timestamps are written in microseconds (the batch's maxTimestamp for
 * every record of a LogAppendTime batch); validity bitmaps get one bit per row (1: not null); the
 * header list of a record without headers is null. Buffers too small for what they must hold raise
 * ValueError (the caller sizes them from the sections' lengths, which bound every column). */

enum {
    COLUMN_OFFSETS, COLUMN_TIMESTAMPS, COLUMN_TIMESTAMP_TYPES,
    COLUMN_KEY_VALIDITY, COLUMN_KEY_OFFSETS, COLUMN_KEY_DATA,
    COLUMN_VALUE_VALIDITY, COLUMN_VALUE_OFFSETS, COLUMN_VALUE_DATA,
    COLUMN_HEADERS_VALIDITY, COLUMN_HEADERS_OFFSETS,
    COLUMN_HEADER_KEY_OFFSETS, COLUMN_HEADER_KEY_DATA,
    COLUMN_HEADER_VALUE_VALIDITY, COLUMN_HEADER_VALUE_OFFSETS, COLUMN_HEADER_VALUE_DATA,
    COLUMN_COUNT
};

static inline void set_bit(unsigned char *bitmap, Py_ssize_t index, int on)
{
    if (on)
        bitmap[index >> 3] |= (unsigned char)(1u << (index & 7));
    else
        bitmap[index >> 3] &= (unsigned char)~(1u << (index & 7));
}

static inline Py_ssize_t min_size(Py_ssize_t a, Py_ssize_t b)
{
    return a < b ? a : b;
}

/* Appends the nullable bytes buf[start:start+length] (length -1: null) to a binary column. */
static inline int append_binary(unsigned char *validity, int32_t *offsets, unsigned char *data, Py_ssize_t capacity,
                                Py_ssize_t row, Py_ssize_t *size, const unsigned char *source, int64_t length)
{
    if (validity != NULL)
        set_bit(validity, row, length >= 0);
    if (length > 0) {
        if (length > capacity - *size)
            return -1;
        memcpy(data + *size, source, (size_t)length);
        *size += (Py_ssize_t)length;
    }
    offsets[row + 1] = (int32_t)*size;
    return 0;
}

static PyObject *fill_columns(PyObject *Py_UNUSED(self), PyObject *args)
{
    Py_buffer view, columns[COLUMN_COUNT];
    Py_ssize_t start, end, count;
    long long base_offset, batch_timestamp, first_offset, end_offset;
    int log_append_time, timestamp_type;
    PyObject *column_objects, *cursor;
    Py_ssize_t rows, key_size, value_size, headers_written, header_key_size, header_value_size;
    if (!PyArg_ParseTuple(args, "y*nnnLLpiLLO!O!", &view, &start, &end, &count, &base_offset, &batch_timestamp,
                          &log_append_time, &timestamp_type, &first_offset, &end_offset, &PyTuple_Type,
                          &column_objects, &PyTuple_Type, &cursor))
        return NULL;
    int acquired = 0;
    PyObject *answer = NULL;
    if (start < 0 || end > view.len || start > end) {
        PyErr_SetString(PyExc_ValueError, "records section out of the buffer's bounds");
        goto release;
    }
    if (PyTuple_GET_SIZE(column_objects) != COLUMN_COUNT) {
        PyErr_Format(PyExc_ValueError, "expected %d column buffers", COLUMN_COUNT);
        goto release;
    }
    if (!PyArg_ParseTuple(cursor, "nnnnnn", &rows, &key_size, &value_size, &headers_written, &header_key_size,
                          &header_value_size))
        goto release;
    for (; acquired < COLUMN_COUNT; acquired++) {
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(column_objects, acquired), &columns[acquired],
                               PyBUF_WRITABLE) < 0)
            goto release;
    }
    /* How many rows and header entries the buffers hold; data buffers must fit int32 offsets. */
    Py_ssize_t row_capacity = columns[COLUMN_OFFSETS].len / 8;
    row_capacity = min_size(row_capacity, columns[COLUMN_TIMESTAMPS].len / 8);
    row_capacity = min_size(row_capacity, columns[COLUMN_TIMESTAMP_TYPES].len / 4);
    row_capacity = min_size(row_capacity, columns[COLUMN_KEY_OFFSETS].len / 4 - 1);
    row_capacity = min_size(row_capacity, columns[COLUMN_VALUE_OFFSETS].len / 4 - 1);
    row_capacity = min_size(row_capacity, columns[COLUMN_HEADERS_OFFSETS].len / 4 - 1);
    row_capacity = min_size(row_capacity, columns[COLUMN_KEY_VALIDITY].len * 8);
    row_capacity = min_size(row_capacity, columns[COLUMN_VALUE_VALIDITY].len * 8);
    row_capacity = min_size(row_capacity, columns[COLUMN_HEADERS_VALIDITY].len * 8);
    Py_ssize_t header_capacity = columns[COLUMN_HEADER_KEY_OFFSETS].len / 4 - 1;
    header_capacity = min_size(header_capacity, columns[COLUMN_HEADER_VALUE_OFFSETS].len / 4 - 1);
    header_capacity = min_size(header_capacity, columns[COLUMN_HEADER_VALUE_VALIDITY].len * 8);
    const int data_columns[] = {COLUMN_KEY_DATA, COLUMN_VALUE_DATA, COLUMN_HEADER_KEY_DATA, COLUMN_HEADER_VALUE_DATA};
    for (int i = 0; i < 4; i++) {
        if (columns[data_columns[i]].len > INT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "a data column buffer is larger than int32 offsets address");
            goto release;
        }
    }
    if (rows < 0 || headers_written < 0 || rows > row_capacity || headers_written > header_capacity
        || key_size < 0 || key_size > columns[COLUMN_KEY_DATA].len
        || value_size < 0 || value_size > columns[COLUMN_VALUE_DATA].len
        || header_key_size < 0 || header_key_size > columns[COLUMN_HEADER_KEY_DATA].len
        || header_value_size < 0 || header_value_size > columns[COLUMN_HEADER_VALUE_DATA].len) {
        PyErr_SetString(PyExc_ValueError, "cursor outside the column buffers");
        goto release;
    }
    int64_t *offsets = (int64_t *)columns[COLUMN_OFFSETS].buf;
    int64_t *timestamps = (int64_t *)columns[COLUMN_TIMESTAMPS].buf;
    int32_t *timestamp_types = (int32_t *)columns[COLUMN_TIMESTAMP_TYPES].buf;
    unsigned char *key_validity = columns[COLUMN_KEY_VALIDITY].buf;
    int32_t *key_offsets = (int32_t *)columns[COLUMN_KEY_OFFSETS].buf;
    unsigned char *key_data = columns[COLUMN_KEY_DATA].buf;
    unsigned char *value_validity = columns[COLUMN_VALUE_VALIDITY].buf;
    int32_t *value_offsets = (int32_t *)columns[COLUMN_VALUE_OFFSETS].buf;
    unsigned char *value_data = columns[COLUMN_VALUE_DATA].buf;
    unsigned char *headers_validity = columns[COLUMN_HEADERS_VALIDITY].buf;
    int32_t *headers_offsets = (int32_t *)columns[COLUMN_HEADERS_OFFSETS].buf;
    int32_t *header_key_offsets = (int32_t *)columns[COLUMN_HEADER_KEY_OFFSETS].buf;
    unsigned char *header_key_data = columns[COLUMN_HEADER_KEY_DATA].buf;
    unsigned char *header_value_validity = columns[COLUMN_HEADER_VALUE_VALIDITY].buf;
    int32_t *header_value_offsets = (int32_t *)columns[COLUMN_HEADER_VALUE_OFFSETS].buf;
    unsigned char *header_value_data = columns[COLUMN_HEADER_VALUE_DATA].buf;
    key_offsets[rows] = (int32_t)key_size;
    value_offsets[rows] = (int32_t)value_size;
    headers_offsets[rows] = (int32_t)headers_written;
    header_key_offsets[headers_written] = (int32_t)header_key_size;
    header_value_offsets[headers_written] = (int32_t)header_value_size;

    const unsigned char *buf = (const unsigned char *)view.buf;
    Py_ssize_t pos = start, index = 0, record_end = end;
    int64_t value = 0, headers, timestamp_delta, key_length, value_length;
    const char *field = "";
    int rc = OK;
    for (; index < count; index++) {
        if (pos >= end) {
            answer = PyUnicode_FromFormat("the records section ends after %zd of %zd records", index, count);
            goto release;
        }
        record_end = end;
        STEP(read_varint(buf, &pos, end, 5, &value), "length");
        if (value < 0 || value > end - pos) {
            answer = PyUnicode_FromFormat("record %zd: length %lld does not fit the %zd bytes left", index,
                                          (long long)value, end - pos);
            goto release;
        }
        record_end = pos + (Py_ssize_t)value;
        STEP(pos < record_end ? OK : VARINT_CUT, "attributes");
        pos++;
        STEP(read_varint(buf, &pos, record_end, 10, &timestamp_delta), "timestamp delta");
        STEP(read_varint(buf, &pos, record_end, 5, &value), "offset delta");
        int64_t offset = base_offset + value;
        int wanted = offset >= first_offset && offset < end_offset;
        STEP(skip_bytes(buf, &pos, record_end, -1, &value), "key length");
        key_length = value;
        const unsigned char *key = buf + pos - (key_length > 0 ? key_length : 0);
        STEP(skip_bytes(buf, &pos, record_end, -1, &value), "value length");
        value_length = value;
        const unsigned char *record_value = buf + pos - (value_length > 0 ? value_length : 0);
        STEP(read_varint(buf, &pos, record_end, 5, &headers), "header count");
        STEP(headers < 0 ? (value = headers, NEGATIVE) : OK, "header count");
        if (wanted) {
            if (rows >= row_capacity)
                goto too_small;
            offsets[rows] = offset;
            timestamps[rows] = (log_append_time ? batch_timestamp : batch_timestamp + timestamp_delta) * 1000;
            timestamp_types[rows] = timestamp_type;
            if (append_binary(key_validity, key_offsets, key_data, columns[COLUMN_KEY_DATA].len, rows, &key_size,
                              key, key_length) < 0
                || append_binary(value_validity, value_offsets, value_data, columns[COLUMN_VALUE_DATA].len, rows,
                                 &value_size, record_value, value_length) < 0)
                goto too_small;
            set_bit(headers_validity, rows, headers > 0);
        }
        for (int64_t h = 0; h < headers; h++) {
            STEP(skip_bytes(buf, &pos, record_end, 0, &value), "header key length");
            key_length = value;
            key = buf + pos - key_length;
            STEP(skip_bytes(buf, &pos, record_end, -1, &value), "header value length");
            value_length = value;
            record_value = buf + pos - (value_length > 0 ? value_length : 0);
            if (wanted) {
                if (headers_written >= header_capacity)
                    goto too_small;
                if (append_binary(NULL, header_key_offsets, header_key_data, columns[COLUMN_HEADER_KEY_DATA].len,
                                  headers_written, &header_key_size, key, key_length) < 0
                    || append_binary(header_value_validity, header_value_offsets, header_value_data,
                                     columns[COLUMN_HEADER_VALUE_DATA].len, headers_written, &header_value_size,
                                     record_value, value_length) < 0)
                    goto too_small;
                headers_written++;
            }
        }
        if (pos != record_end) {
            answer = PyUnicode_FromFormat("record %zd: ends %zd bytes before its length says", index,
                                          record_end - pos);
            goto release;
        }
        if (wanted) {
            rows++;
            headers_offsets[rows] = (int32_t)headers_written;
        }
    }
    if (pos != end)
        answer = PyUnicode_FromFormat("%zd bytes follow the last of %zd records", end - pos, count);
    else
        answer = Py_BuildValue("(nnnnnn)", rows, key_size, value_size, headers_written, header_key_size,
                               header_value_size);
    goto release;
too_small:
    PyErr_SetString(PyExc_ValueError, "the column buffers are too small for the records");
    goto release;
corrupt:
    if (rc == NEGATIVE)
        answer = PyUnicode_FromFormat("record %zd: invalid %s %lld", index, field, (long long)value);
    else if (rc == VARINT_LONG)
        answer = PyUnicode_FromFormat("record %zd: the %s varint is too long", index, field);
    else
        answer = PyUnicode_FromFormat("record %zd: the %s runs past the end of the record", index, field);
release:
    for (int i = 0; i < acquired; i++)
        PyBuffer_Release(&columns[i]);
    PyBuffer_Release(&view);
    return answer;
}

static PyMethodDef methods[] = {
    {"check_records", check_records, METH_VARARGS,
     "check_records(buffer, start, end, count) -> (offset delta fault, min and max timestamp delta, null key, "
     "high attributes), "
     "or a str saying why the records are corrupt"},
    {"fill_columns", fill_columns, METH_VARARGS,
     "fill_columns(buffer, start, end, count, base_offset, batch_timestamp, log_append_time, timestamp_type, "
     "first_offset, end_offset, columns, cursor) -> the new cursor, or a str saying why the records are corrupt"},
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
