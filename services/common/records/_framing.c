/* The compiled form of `services.common.records.reader.check_records_python`: one pass over an
 * uncompressed RecordBatch v2 records section that checks every record's framing by Kafka's
 * rules and allocates nothing per record; and `fill_columns` (below), the same pass by the same
 * record-reading functions, copying an offset range's records into Arrow column buffers.
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

/* What is wrong with a records section, found without touching Python objects (so without the GIL);
 * `defect_message` says it as a str. */
enum { SECTION_SHORT = 1, LENGTH_TOO_LONG, FIELD_BROKEN, RECORD_SHORT, SECTION_TRAILING };

typedef struct {
    int kind;
    int rc; /* FIELD_BROKEN: NEGATIVE, VARINT_LONG or another reason the field runs past the record */
    const char *field;
    Py_ssize_t index, count, left;
    int64_t value;
} Defect;

static PyObject *defect_message(const Defect *defect)
{
    switch (defect->kind) {
    case SECTION_SHORT:
        return PyUnicode_FromFormat("the records section ends after %zd of %zd records", defect->index,
                                    defect->count);
    case LENGTH_TOO_LONG:
        return PyUnicode_FromFormat("record %zd: length %lld does not fit the %zd bytes left", defect->index,
                                    (long long)defect->value, defect->left);
    case RECORD_SHORT:
        return PyUnicode_FromFormat("record %zd: ends %zd bytes before its length says", defect->index,
                                    defect->left);
    case SECTION_TRAILING:
        return PyUnicode_FromFormat("%zd bytes follow the last of %zd records", defect->left, defect->count);
    default:
        if (defect->rc == NEGATIVE)
            return PyUnicode_FromFormat("record %zd: invalid %s %lld", defect->index, defect->field,
                                        (long long)defect->value);
        if (defect->rc == VARINT_LONG)
            return PyUnicode_FromFormat("record %zd: the %s varint is too long", defect->index, defect->field);
        return PyUnicode_FromFormat("record %zd: the %s runs past the end of the record", defect->index,
                                    defect->field);
    }
}

static int field_broken(Defect *defect, int rc, Py_ssize_t index, const char *field, int64_t value)
{
    defect->kind = FIELD_BROKEN;
    defect->rc = rc;
    defect->index = index;
    defect->field = field;
    defect->value = value;
    return -1;
}

/* One record's fields up to its header count; `key` and `value` point into the buffer. */
typedef struct {
    Py_ssize_t end; /* where the record ends, by its length */
    unsigned char attributes;
    int64_t timestamp_delta, offset_delta, key_length, value_length, headers;
    const unsigned char *key, *value;
} RecordFrame;

/* Reads record `index` of `count` at *pos (its section ends at `end`) up to its header count:
 * 0, or -1 with `*defect` saying what is wrong. */
static int read_frame(const unsigned char *buf, Py_ssize_t *pos, Py_ssize_t end, Py_ssize_t index,
                      Py_ssize_t count, RecordFrame *frame, Defect *defect)
{
    int64_t value = 0;
    const char *field = "";
    int rc;
    if (*pos >= end) {
        *defect = (Defect){.kind = SECTION_SHORT, .index = index, .count = count};
        return -1;
    }
    frame->end = end;
    STEP(read_varint(buf, pos, end, 5, &value), "length");
    if (value < 0 || value > end - *pos) {
        *defect = (Defect){.kind = LENGTH_TOO_LONG, .index = index, .value = value, .left = end - *pos};
        return -1;
    }
    frame->end = *pos + (Py_ssize_t)value;
    STEP(*pos < frame->end ? OK : VARINT_CUT, "attributes");
    frame->attributes = buf[(*pos)++];
    STEP(read_varint(buf, pos, frame->end, 10, &frame->timestamp_delta), "timestamp delta");
    STEP(read_varint(buf, pos, frame->end, 5, &frame->offset_delta), "offset delta");
    STEP(skip_bytes(buf, pos, frame->end, -1, &value), "key length");
    frame->key_length = value;
    frame->key = buf + *pos - (value > 0 ? value : 0);
    STEP(skip_bytes(buf, pos, frame->end, -1, &value), "value length");
    frame->value_length = value;
    frame->value = buf + *pos - (value > 0 ? value : 0);
    STEP(read_varint(buf, pos, frame->end, 5, &value), "header count");
    STEP(value < 0 ? NEGATIVE : OK, "header count");
    frame->headers = value;
    return 0;
corrupt:
    return field_broken(defect, rc, index, field, value);
}

/* Reads one header of record `index` at *pos: its key (length >= 0) and value (-1: null). */
static int read_header(const unsigned char *buf, Py_ssize_t *pos, Py_ssize_t record_end, Py_ssize_t index,
                       const unsigned char **key, int64_t *key_length, const unsigned char **header_value,
                       int64_t *value_length, Defect *defect)
{
    int64_t value = 0;
    const char *field = "";
    int rc;
    STEP(skip_bytes(buf, pos, record_end, 0, &value), "header key length");
    *key_length = value;
    *key = buf + *pos - value;
    STEP(skip_bytes(buf, pos, record_end, -1, &value), "header value length");
    *value_length = value;
    *header_value = buf + *pos - (value > 0 ? value : 0);
    return 0;
corrupt:
    return field_broken(defect, rc, index, field, value);
}

/* Whether record `index` ended exactly where its length says (else -1 with `*defect`). */
static int record_ended(Py_ssize_t pos, const RecordFrame *frame, Py_ssize_t index, Defect *defect)
{
    if (pos == frame->end)
        return 0;
    *defect = (Defect){.kind = RECORD_SHORT, .index = index, .left = frame->end - pos};
    return -1;
}

/* Whether the last of `count` records ended exactly at the section's `end` (else -1 with `*defect`). */
static int section_ended(Py_ssize_t pos, Py_ssize_t end, Py_ssize_t count, Defect *defect)
{
    if (pos == end)
        return 0;
    *defect = (Defect){.kind = SECTION_TRAILING, .count = count, .left = end - pos};
    return -1;
}

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
    Py_ssize_t pos = start, index = 0;
    int64_t min_timestamp_delta = 0, max_timestamp_delta = 0, header_key_length, header_value_length;
    Py_ssize_t offset_delta_fault = -1, null_key = -1, high_attributes = -1;
    const unsigned char *header_key, *header_value;
    RecordFrame frame;
    Defect defect;
    PyObject *answer;
    for (; index < count; index++) {
        if (read_frame(buf, &pos, end, index, count, &frame, &defect) < 0)
            goto corrupt;
        if (frame.attributes >= 0x80 && high_attributes < 0)
            high_attributes = index;
        if (index == 0 || frame.timestamp_delta < min_timestamp_delta)
            min_timestamp_delta = frame.timestamp_delta;
        if (index == 0 || frame.timestamp_delta > max_timestamp_delta)
            max_timestamp_delta = frame.timestamp_delta;
        if (frame.offset_delta != index && offset_delta_fault < 0)
            offset_delta_fault = index;
        if (frame.key_length == -1 && null_key < 0)
            null_key = index;
        for (int64_t h = 0; h < frame.headers; h++) {
            if (read_header(buf, &pos, frame.end, index, &header_key, &header_key_length, &header_value,
                            &header_value_length, &defect) < 0)
                goto corrupt;
        }
        if (record_ended(pos, &frame, index, &defect) < 0)
            goto corrupt;
    }
    if (section_ended(pos, end, count, &defect) < 0)
        goto corrupt;
    answer = Py_BuildValue("(nLLnn)", offset_delta_fault, (long long)min_timestamp_delta,
                           (long long)max_timestamp_delta, null_key, high_attributes);
    goto done;
corrupt:
    answer = defect_message(&defect);
done:
    PyBuffer_Release(&view);
    return answer;
}

/* fill_columns(buffer, start, end, count, base_offset, batch_timestamp, log_append_time, timestamp_type,
 *              first_offset, end_offset, columns, cursor) -> the new cursor, or a str saying why the records
 * are corrupt.
 *
 * The same framing rules as check_records, read by the same functions in a single pass, while copying
 * the records whose offset is in [first_offset, end_offset) into Arrow column buffers (`columns`, a
 * tuple of 16 writable buffers in the COLUMN_* order below) from row `cursor[0]` on. `cursor` is
 * (rows, key bytes, value bytes, headers, header key bytes, header value bytes) already written; the
 * answer is the same after this batch. Timestamps are written in microseconds (the batch's
 * maxTimestamp for every record of a LogAppendTime batch); validity bitmaps get one bit per row (1:
 * not null); the header list of a record without headers is null. Buffers too small for what they
 * must hold raise ValueError (the caller sizes them from the sections' lengths, which bound every
 * column). The pass runs without the GIL: it touches no Python object until it is done. */

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

/* One Arrow binary column being filled: validity bitmap (NULL: never null), int32 offsets, bytes. */
typedef struct {
    unsigned char *validity;
    int32_t *offsets;
    unsigned char *data;
    Py_ssize_t capacity, size;
} BinaryColumn;

static void binary_column(BinaryColumn *column, Py_buffer *columns, int validity, int offsets, int data,
                          Py_ssize_t size)
{
    column->validity = validity < 0 ? NULL : (unsigned char *)columns[validity].buf;
    column->offsets = (int32_t *)columns[offsets].buf;
    column->data = (unsigned char *)columns[data].buf;
    column->capacity = columns[data].len;
    column->size = size;
}

/* Appends the nullable bytes source[0:length] (length -1: null) as element `row`; -1 when they do not fit. */
static inline int append_binary(BinaryColumn *column, Py_ssize_t row, const unsigned char *source, int64_t length)
{
    if (column->validity != NULL)
        set_bit(column->validity, row, length >= 0);
    if (length > 0) {
        if (length > column->capacity - column->size)
            return -1;
        memcpy(column->data + column->size, source, (size_t)length);
        column->size += (Py_ssize_t)length;
    }
    column->offsets[row + 1] = (int32_t)column->size;
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
    const Py_ssize_t data_sizes[] = {key_size, value_size, header_key_size, header_value_size};
    for (int i = 0; i < 4; i++) {
        if (columns[data_columns[i]].len > INT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "a data column buffer is larger than int32 offsets address");
            goto release;
        }
        if (data_sizes[i] < 0 || data_sizes[i] > columns[data_columns[i]].len) {
            PyErr_SetString(PyExc_ValueError, "cursor outside the column buffers");
            goto release;
        }
    }
    if (rows < 0 || headers_written < 0 || rows > row_capacity || headers_written > header_capacity) {
        PyErr_SetString(PyExc_ValueError, "cursor outside the column buffers");
        goto release;
    }
    int64_t *offsets = (int64_t *)columns[COLUMN_OFFSETS].buf;
    int64_t *timestamps = (int64_t *)columns[COLUMN_TIMESTAMPS].buf;
    int32_t *timestamp_types = (int32_t *)columns[COLUMN_TIMESTAMP_TYPES].buf;
    unsigned char *headers_validity = columns[COLUMN_HEADERS_VALIDITY].buf;
    int32_t *headers_offsets = (int32_t *)columns[COLUMN_HEADERS_OFFSETS].buf;
    BinaryColumn keys, values, header_keys, header_values;
    binary_column(&keys, columns, COLUMN_KEY_VALIDITY, COLUMN_KEY_OFFSETS, COLUMN_KEY_DATA, key_size);
    binary_column(&values, columns, COLUMN_VALUE_VALIDITY, COLUMN_VALUE_OFFSETS, COLUMN_VALUE_DATA, value_size);
    binary_column(&header_keys, columns, -1, COLUMN_HEADER_KEY_OFFSETS, COLUMN_HEADER_KEY_DATA, header_key_size);
    binary_column(&header_values, columns, COLUMN_HEADER_VALUE_VALIDITY, COLUMN_HEADER_VALUE_OFFSETS,
                  COLUMN_HEADER_VALUE_DATA, header_value_size);
    keys.offsets[rows] = (int32_t)key_size;
    values.offsets[rows] = (int32_t)value_size;
    headers_offsets[rows] = (int32_t)headers_written;
    header_keys.offsets[headers_written] = (int32_t)header_key_size;
    header_values.offsets[headers_written] = (int32_t)header_value_size;

    const unsigned char *buf = (const unsigned char *)view.buf;
    const unsigned char *header_key, *header_value;
    int64_t header_key_length, header_value_length;
    Py_ssize_t pos = start;
    RecordFrame frame;
    Defect defect;
    int outcome = 0; /* -1: corrupt records, -2: buffers too small */
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t index = 0; index < count && outcome == 0; index++) {
        if (read_frame(buf, &pos, end, index, count, &frame, &defect) < 0) {
            outcome = -1;
            break;
        }
        int64_t offset = base_offset + frame.offset_delta;
        int wanted = offset >= first_offset && offset < end_offset;
        if (wanted) {
            if (rows >= row_capacity) {
                outcome = -2;
                break;
            }
            offsets[rows] = offset;
            timestamps[rows] = (log_append_time ? batch_timestamp : batch_timestamp + frame.timestamp_delta) * 1000;
            timestamp_types[rows] = timestamp_type;
            if (append_binary(&keys, rows, frame.key, frame.key_length) < 0
                || append_binary(&values, rows, frame.value, frame.value_length) < 0) {
                outcome = -2;
                break;
            }
            set_bit(headers_validity, rows, frame.headers > 0);
        }
        for (int64_t h = 0; h < frame.headers; h++) {
            if (read_header(buf, &pos, frame.end, index, &header_key, &header_key_length, &header_value,
                            &header_value_length, &defect) < 0) {
                outcome = -1;
                break;
            }
            if (wanted) {
                if (headers_written >= header_capacity
                    || append_binary(&header_keys, headers_written, header_key, header_key_length) < 0
                    || append_binary(&header_values, headers_written, header_value, header_value_length) < 0) {
                    outcome = -2;
                    break;
                }
                headers_written++;
            }
        }
        if (outcome == 0 && record_ended(pos, &frame, index, &defect) < 0)
            outcome = -1;
        if (outcome == 0 && wanted)
            headers_offsets[++rows] = (int32_t)headers_written;
    }
    if (outcome == 0 && section_ended(pos, end, count, &defect) < 0)
        outcome = -1;
    Py_END_ALLOW_THREADS
    if (outcome == -1)
        answer = defect_message(&defect);
    else if (outcome == -2)
        PyErr_SetString(PyExc_ValueError, "the column buffers are too small for the records");
    else
        answer = Py_BuildValue("(nnnnnn)", rows, keys.size, values.size, headers_written, header_keys.size,
                               header_values.size);
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
    PyModuleDef_HEAD_INIT, "_framing", "Compiled RecordBatch v2 record framing check and Arrow column fill.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__framing(void)
{
    return PyModule_Create(&module);
}
