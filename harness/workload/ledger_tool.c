/*
 * ledger_tool.c: the ledger tool (harness/workload/ledger_tool.py) without an
 * interpreter start.  C99 and libc only; built once per source version by
 * harness/workload/ledger_build.py and run as ``ledger_tool NAME``.
 *
 * The contract is ledger_tool.py's docstring, byte for byte: the same ledger
 * line, the same stdout, stderr and exit status for the same input and
 * environment (tests/test_ledger_tool.py runs both on generated inputs).
 * One execution:
 *
 *   1. reads the tool input (UTF-8 JSON, a lone surrogate as its three bytes)
 *      from stdin and parses it exactly as the Python tool's scanner does
 *      (json's C scanner, strict): the same values, the same refusals and the
 *      same messages for them (exit 2);
 *   2. renders the output spec ``out``, if any (exit 2 when bad);
 *   3. opens $FISKJ_LEDGER O_RDWR|O_APPEND|O_CREAT|O_CLOEXEC 0600, takes an
 *      exclusive flock, counts the earlier lines for its tool_use_id, writes
 *      its whole line in ONE write(2), fsyncs, closes (which releases the
 *      lock) -- exit 3 when any of that fails;
 *   4. sleeps sleep_ms, then fails (exit 1) or prints its result (exit 0, or 1
 *      for an error spec).
 *
 * Values are kept as Python would hold them: strings as code points (so a
 * lone surrogate stays one character, and \uD83D\uDE00 escapes join into one),
 * integers as their decimal text (any size), floats as doubles.  Where the
 * Python tool prints a value (``n=``, a non-string tool_use_id) the value is
 * formatted as Python's str() does (repr() inside lists and objects).  Where
 * the Python tool dies of an uncaught exception (a lone surrogate its stdout
 * cannot encode, a sleep too long for a timestamp) this tool exits 1 too and
 * prints the exception's last traceback line only.
 *
 * It follows CPython 3.11 (the version the harness runs; its Unicode 14.0
 * tables for str.isprintable() and int()), and assumes a UTF-8 locale: C,
 * POSIX and C.UTF-8 give stdout errors=surrogateescape as in Python, any
 * other locale errors=strict (a non-UTF-8 locale's encoding is not followed).
 */

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Small helpers: growable buffers of code points and of bytes.             */
/* ------------------------------------------------------------------------ */

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (q == NULL) {
        static const char msg[] = "MemoryError\n";
        (void)!write(2, msg, sizeof msg - 1);
        _exit(1);
    }
    return q;
}

/* A string as Python holds it: a sequence of code points (surrogates included). */
typedef struct {
    uint32_t *cp;
    size_t len, cap;
} Str;

static void str_push(Str *s, uint32_t c)
{
    if (s->len == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 16;
        s->cp = xrealloc(s->cp, s->cap * sizeof *s->cp);
    }
    s->cp[s->len++] = c;
}

static void str_ascii(Str *s, const char *text)
{
    while (*text)
        str_push(s, (unsigned char)*text++);
}

static void str_cat(Str *s, const Str *t)
{
    for (size_t i = 0; i < t->len; i++)
        str_push(s, t->cp[i]);
}

static int str_eq_ascii(const Str *s, const char *text)
{
    size_t n = strlen(text);
    if (s->len != n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (s->cp[i] != (unsigned char)text[i])
            return 0;
    return 1;
}

static int str_eq(const Str *a, const Str *b)
{
    return a->len == b->len && (a->len == 0 || memcmp(a->cp, b->cp, a->len * sizeof *a->cp) == 0);
}

typedef struct {
    char *b;
    size_t len, cap;
} Bytes;

static void bytes_push(Bytes *o, const void *data, size_t n)
{
    if (o->len + n > o->cap) {
        while (o->len + n > o->cap)
            o->cap = o->cap ? 2 * o->cap : 256;
        o->b = xrealloc(o->b, o->cap);
    }
    memcpy(o->b + o->len, data, n);
    o->len += n;
}

static void bytes_str(Bytes *o, const char *text) { bytes_push(o, text, strlen(text)); }

/* One code point as UTF-8; a surrogate as its three bytes (Python's "surrogatepass"). */
static void utf8_put(Bytes *o, uint32_t c)
{
    unsigned char b[4];
    size_t n;
    if (c < 0x80) {
        b[0] = (unsigned char)c;
        n = 1;
    } else if (c < 0x800) {
        b[0] = (unsigned char)(0xC0 | (c >> 6));
        b[1] = (unsigned char)(0x80 | (c & 0x3F));
        n = 2;
    } else if (c < 0x10000) {
        b[0] = (unsigned char)(0xE0 | (c >> 12));
        b[1] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
        b[2] = (unsigned char)(0x80 | (c & 0x3F));
        n = 3;
    } else {
        b[0] = (unsigned char)(0xF0 | (c >> 18));
        b[1] = (unsigned char)(0x80 | ((c >> 12) & 0x3F));
        b[2] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
        b[3] = (unsigned char)(0x80 | (c & 0x3F));
        n = 4;
    }
    bytes_push(o, b, n);
}

static void utf8_surrogatepass(Bytes *o, const Str *s)
{
    for (size_t i = 0; i < s->len; i++)
        utf8_put(o, s->cp[i]);
}

static int is_surrogate(uint32_t c) { return c >= 0xD800 && c <= 0xDFFF; }

/* Write all of a buffer to a descriptor (EINTR retried); -1 on error. */
static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Decoding bytes as Python does.                                           */
/* ------------------------------------------------------------------------ */

/* Length of the valid UTF-8 sequence at s[0..n) (no surrogates, no overlongs,
 * at most U+10FFFF), storing the code point; 0 when there is none. */
static size_t utf8_valid(const unsigned char *s, size_t n, uint32_t *out)
{
    unsigned c = s[0];
#define CONT(k) ((k) < n && (s[k] & 0xC0) == 0x80)
    if (c < 0x80) {
        *out = c;
        return 1;
    }
    if (c >= 0xC2 && c < 0xE0 && CONT(1)) {
        *out = ((c & 0x1Fu) << 6) | (s[1] & 0x3Fu);
        return 2;
    }
    if (c >= 0xE0 && c < 0xF0 && CONT(1) && CONT(2)) {
        uint32_t v = ((c & 0x0Fu) << 12) | ((s[1] & 0x3Fu) << 6) | (s[2] & 0x3Fu);
        if (v < 0x800 || is_surrogate(v))
            return 0;
        *out = v;
        return 3;
    }
    if (c >= 0xF0 && c < 0xF5 && CONT(1) && CONT(2) && CONT(3)) {
        uint32_t v = ((c & 0x07u) << 18) | ((s[1] & 0x3Fu) << 12) | ((s[2] & 0x3Fu) << 6) | (s[3] & 0x3Fu);
        if (v < 0x10000 || v > 0x10FFFF)
            return 0;
        *out = v;
        return 4;
    }
#undef CONT
    return 0;
}

/* os.fsdecode / os.environ: UTF-8 with "surrogateescape" (a byte that starts
 * no valid sequence becomes U+DC80..U+DCFF). */
static Str decode_surrogateescape(const char *text)
{
    Str s = {0};
    const unsigned char *p = (const unsigned char *)text;
    size_t n = strlen(text), i = 0;
    while (i < n) {
        uint32_t c;
        size_t k = utf8_valid(p + i, n - i, &c);
        if (k == 0) {
            str_push(&s, 0xDC00 + p[i]);
            i++;
        } else {
            str_push(&s, c);
            i += k;
        }
    }
    return s;
}

/* bytes.decode("utf-8", "surrogatepass"): 0 on success, else -1 with Python's
 * UnicodeDecodeError message in msg.  The error positions follow CPython's
 * decoder (Objects/stringlib/codecs.h): the first byte that cannot start or
 * continue a sequence is reported; a sequence cut by the end of the input is
 * "unexpected end of data" over the rest of the input. */
static int decode_surrogatepass(const unsigned char *s, size_t n, Str *out, char *msg, size_t msgsize)
{
    size_t i = 0;
    while (i < n) {
        uint32_t c;
        size_t k = utf8_valid(s + i, n - i, &c);
        if (k) {
            str_push(out, c);
            i += k;
            continue;
        }
        /* An encoded surrogate ED A0..BF 80..BF passes. */
        if (n - i >= 3 && s[i] == 0xED && s[i + 1] >= 0xA0 && s[i + 1] <= 0xBF && (s[i + 2] & 0xC0) == 0x80) {
            str_push(out, 0xD000u | ((s[i + 1] & 0x3Fu) << 6) | (s[i + 2] & 0x3Fu));
            i += 3;
            continue;
        }
        /* Classify the error as CPython does. */
        unsigned b = s[i];
        size_t rem = n - i, end = i + 1; /* error range [i, end) */
        const char *why = "invalid continuation byte";
#define ISC(x) (((x) & 0xC0) == 0x80)
        if (b < 0xC2 || b >= 0xF5) {
            why = "invalid start byte";
        } else if (b < 0xE0) {
            if (rem < 2) {
                why = "unexpected end of data";
                end = n;
            }
        } else if (b < 0xF0) {
            unsigned c2 = rem >= 2 ? s[i + 1] : 0;
            int bad2 = rem >= 2 && (!ISC(c2) || (b == 0xE0 && c2 < 0xA0) || (b == 0xED && c2 >= 0xA0));
            if (rem < 2 || (rem < 3 && !bad2)) {
                why = "unexpected end of data";
                end = n;
            } else if (!bad2) {
                end = i + 2; /* the third byte */
            }
        } else {
            unsigned c2 = rem >= 2 ? s[i + 1] : 0;
            int bad2 = rem >= 2 && (!ISC(c2) || (b == 0xF0 && c2 < 0x90) || (b == 0xF4 && c2 >= 0x90));
            if (rem < 2) {
                why = "unexpected end of data";
                end = n;
            } else if (bad2) {
                /* end = i + 1 */
            } else if (rem < 3) {
                why = "unexpected end of data";
                end = n;
            } else if (!ISC(s[i + 2])) {
                end = i + 2;
            } else if (rem < 4) {
                why = "unexpected end of data";
                end = n;
            } else {
                end = i + 3; /* the fourth byte */
            }
        }
#undef ISC
        if (end == i + 1)
            snprintf(msg, msgsize, "'utf-8' codec can't decode byte 0x%02x in position %zu: %s", b, i, why);
        else
            snprintf(msg, msgsize, "'utf-8' codec can't decode bytes in position %zu-%zu: %s", i, end - 1, why);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* JSON values and the parser (a transcription of CPython 3.11's             */
/* Modules/_json.c scan_once_unicode, strict mode).                          */
/* ------------------------------------------------------------------------ */

typedef enum { J_NULL, J_FALSE, J_TRUE, J_INT, J_FLOAT, J_STR, J_ARR, J_OBJ } Kind;

typedef struct Value Value;
struct Value {
    Kind kind;
    char *digits; /* J_INT: decimal text, "-" and no leading zeros ("-0" is "0") */
    double f;     /* J_FLOAT */
    Str s;        /* J_STR */
    size_t n;     /* J_ARR, J_OBJ: number of items */
    Value **items;
    Str *keys;    /* J_OBJ: keys[i] names items[i]; a repeated key keeps its first place, last value */
};

/* How a parse failed, named by the exception the Python tool's _loads sees. */
typedef enum {
    P_OK,
    P_STOP,      /* StopIteration: no value where one must start */
    P_DECODE,    /* the scanner's own error path, which surfaces as SystemError */
    P_VALUE,     /* ValueError: an integer of more than 4300 digits */
    P_RECURSION, /* RecursionError: containers nested too deep */
} Status;

/* The Python tool's scanner is entered from <module> -> main -> _loads, so
 * 996 nested containers parse and the 997th raises RecursionError (measured
 * against CPython 3.11 with the default recursion limit of 1000). */
#define MAX_DEPTH 996
/* sys.int_info.default_max_str_digits: a longer integer literal is a ValueError. */
#define MAX_INT_DIGITS 4300

typedef struct {
    const uint32_t *t;
    size_t len;
    int depth;
} Parser;

static Status scan_once(Parser *p, size_t idx, Value **out, size_t *next);

static Value *new_value(Kind k)
{
    Value *v = xrealloc(NULL, sizeof *v);
    memset(v, 0, sizeof *v);
    v->kind = k;
    return v;
}

static int is_ws(uint32_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static int is_digit(uint32_t c) { return c >= '0' && c <= '9'; }

static int hexval(uint32_t c)
{
    if (c >= '0' && c <= '9')
        return (int)(c - '0');
    if (c >= 'a' && c <= 'f')
        return (int)(c - 'a' + 10);
    if (c >= 'A' && c <= 'F')
        return (int)(c - 'A' + 10);
    return -1;
}

/* scanstring_unicode: the string whose opening quote is at end - 1. */
static Status scan_string(Parser *p, size_t end, Str *out, size_t *next_out)
{
    const uint32_t *t = p->t;
    size_t len = p->len;
    for (;;) {
        size_t next = end;
        uint32_t c = 0;
        for (; next < len; next++) {
            c = t[next];
            if (c == '"' || c == '\\')
                break;
            if (c <= 0x1F)
                return P_DECODE; /* "Invalid control character at" */
            str_push(out, c);
        }
        if (next >= len)
            return P_DECODE; /* "Unterminated string starting at" */
        if (c == '"') {
            *next_out = next + 1;
            return P_OK;
        }
        next++; /* past the backslash */
        if (next == len)
            return P_DECODE;
        c = t[next];
        if (c != 'u') {
            end = next + 1;
            switch (c) {
            case '"': case '\\': case '/': break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'n': c = '\n'; break;
            case 'r': c = '\r'; break;
            case 't': c = '\t'; break;
            default: return P_DECODE; /* "Invalid \\escape" */
            }
        } else {
            next++;
            end = next + 4;
            if (end >= len)
                return P_DECODE; /* "Invalid \\uXXXX escape" */
            c = 0;
            for (; next < end; next++) {
                int h = hexval(t[next]);
                if (h < 0)
                    return P_DECODE;
                c = (c << 4) | (uint32_t)h;
            }
            /* A high surrogate escape directly followed by a low surrogate
             * escape is one character; otherwise each stays on its own. */
            if (c >= 0xD800 && c <= 0xDBFF && end + 6 < len && t[next] == '\\' && t[next + 1] == 'u') {
                uint32_t c2 = 0;
                next += 2;
                end += 6;
                for (; next < end; next++) {
                    int h = hexval(t[next]);
                    if (h < 0)
                        return P_DECODE;
                    c2 = (c2 << 4) | (uint32_t)h;
                }
                if (c2 >= 0xDC00 && c2 <= 0xDFFF)
                    c = 0x10000 + (((c - 0xD800) << 10) | (c2 - 0xDC00));
                else
                    end -= 6;
            }
        }
        str_push(out, c);
    }
}

static void obj_set(Value *obj, Str key, Value *val)
{
    for (size_t i = 0; i < obj->n; i++)
        if (str_eq(&obj->keys[i], &key)) {
            obj->items[i] = val;
            return;
        }
    obj->keys = xrealloc(obj->keys, (obj->n + 1) * sizeof *obj->keys);
    obj->items = xrealloc(obj->items, (obj->n + 1) * sizeof *obj->items);
    obj->keys[obj->n] = key;
    obj->items[obj->n] = val;
    obj->n++;
}

/* _parse_object_unicode: the object whose '{' is at idx - 1. */
static Status parse_object(Parser *p, size_t idx, Value **out, size_t *next_out)
{
    const uint32_t *t = p->t;
    size_t len = p->len;
    Value *obj = new_value(J_OBJ);
    while (idx < len && is_ws(t[idx]))
        idx++;
    if (idx >= len || t[idx] != '}') {
        for (;;) {
            Str key = {0};
            Value *val;
            size_t next;
            Status st;
            if (idx >= len || t[idx] != '"')
                return P_DECODE; /* "Expecting property name enclosed in double quotes" */
            if ((st = scan_string(p, idx + 1, &key, &next)) != P_OK)
                return st;
            idx = next;
            while (idx < len && is_ws(t[idx]))
                idx++;
            if (idx >= len || t[idx] != ':')
                return P_DECODE; /* "Expecting ':' delimiter" */
            idx++;
            while (idx < len && is_ws(t[idx]))
                idx++;
            if ((st = scan_once(p, idx, &val, &next)) != P_OK)
                return st;
            obj_set(obj, key, val);
            idx = next;
            while (idx < len && is_ws(t[idx]))
                idx++;
            if (idx < len && t[idx] == '}')
                break;
            if (idx >= len || t[idx] != ',')
                return P_DECODE; /* "Expecting ',' delimiter" */
            idx++;
            while (idx < len && is_ws(t[idx]))
                idx++;
        }
    }
    *out = obj;
    *next_out = idx + 1;
    return P_OK;
}

/* _parse_array_unicode: the array whose '[' is at idx - 1. */
static Status parse_array(Parser *p, size_t idx, Value **out, size_t *next_out)
{
    const uint32_t *t = p->t;
    size_t len = p->len;
    Value *arr = new_value(J_ARR);
    while (idx < len && is_ws(t[idx]))
        idx++;
    if (idx >= len || t[idx] != ']') {
        for (;;) {
            Value *val;
            size_t next;
            Status st = scan_once(p, idx, &val, &next);
            if (st != P_OK)
                return st;
            arr->items = xrealloc(arr->items, (arr->n + 1) * sizeof *arr->items);
            arr->items[arr->n++] = val;
            idx = next;
            while (idx < len && is_ws(t[idx]))
                idx++;
            if (idx < len && t[idx] == ']')
                break;
            if (idx >= len || t[idx] != ',')
                return P_DECODE; /* "Expecting ',' delimiter" */
            idx++;
            while (idx < len && is_ws(t[idx]))
                idx++;
        }
    }
    *out = arr;
    *next_out = idx + 1;
    return P_OK;
}

/* _match_number_unicode: an int or float literal at idx (StopIteration if none). */
static Status match_number(Parser *p, size_t start, Value **out, size_t *next_out)
{
    const uint32_t *t = p->t;
    size_t idx = start, end_idx = p->len - 1; /* len > 0 here */
    int is_float = 0;
    if (t[idx] == '-') {
        idx++;
        if (idx > end_idx)
            return P_STOP;
    }
    if (t[idx] >= '1' && t[idx] <= '9') {
        idx++;
        while (idx <= end_idx && is_digit(t[idx]))
            idx++;
    } else if (t[idx] == '0') {
        idx++;
    } else {
        return P_STOP;
    }
    if (idx < end_idx && t[idx] == '.' && is_digit(t[idx + 1])) {
        is_float = 1;
        idx += 2;
        while (idx <= end_idx && is_digit(t[idx]))
            idx++;
    }
    if (idx < end_idx && (t[idx] == 'e' || t[idx] == 'E')) {
        size_t e_start = idx;
        idx++;
        if (idx < end_idx && (t[idx] == '-' || t[idx] == '+'))
            idx++;
        while (idx <= end_idx && is_digit(t[idx]))
            idx++;
        if (is_digit(t[idx - 1]))
            is_float = 1;
        else
            idx = e_start; /* no exponent digits: back off */
    }
    size_t n = idx - start;
    char *text = xrealloc(NULL, n + 1);
    for (size_t i = 0; i < n; i++)
        text[i] = (char)t[start + i];
    text[n] = '\0';
    Value *v;
    if (is_float) {
        v = new_value(J_FLOAT);
        v->f = strtod(text, NULL); /* correctly rounded, overflow to inf: as float() */
        free(text);
    } else {
        int neg = text[0] == '-';
        if (n - (size_t)neg > MAX_INT_DIGITS) {
            free(text);
            return P_VALUE;
        }
        v = new_value(J_INT);
        if (neg && strcmp(text, "-0") == 0)
            text[0] = '0', text[1] = '\0';
        v->digits = text;
    }
    *out = v;
    *next_out = idx;
    return P_OK;
}

/* Does t[idx..] spell `word` (with at least one character after it, as _json checks)? */
static int spells(Parser *p, size_t idx, const char *word)
{
    size_t n = strlen(word);
    if (!(idx + n - 1 < p->len)) /* _json: idx + (n - 1) < length */
        return 0;
    for (size_t i = 0; i < n; i++)
        if (p->t[idx + i] != (unsigned char)word[i])
            return 0;
    return 1;
}

static Status scan_once(Parser *p, size_t idx, Value **out, size_t *next)
{
    Status st;
    if (idx >= p->len)
        return P_STOP;
    switch (p->t[idx]) {
    case '"': {
        Value *v = new_value(J_STR);
        st = scan_string(p, idx + 1, &v->s, next);
        *out = v;
        return st;
    }
    case '{':
    case '[':
        if (p->depth >= MAX_DEPTH)
            return P_RECURSION;
        p->depth++;
        st = p->t[idx] == '{' ? parse_object(p, idx + 1, out, next) : parse_array(p, idx + 1, out, next);
        p->depth--;
        return st;
    case 'n':
        if (spells(p, idx, "null")) {
            *out = new_value(J_NULL);
            *next = idx + 4;
            return P_OK;
        }
        break;
    case 't':
        if (spells(p, idx, "true")) {
            *out = new_value(J_TRUE);
            *next = idx + 4;
            return P_OK;
        }
        break;
    case 'f':
        if (spells(p, idx, "false")) {
            *out = new_value(J_FALSE);
            *next = idx + 5;
            return P_OK;
        }
        break;
    case 'N':
        if (spells(p, idx, "NaN")) {
            *out = new_value(J_FLOAT);
            (*out)->f = NAN;
            *next = idx + 3;
            return P_OK;
        }
        break;
    case 'I':
        if (spells(p, idx, "Infinity")) {
            *out = new_value(J_FLOAT);
            (*out)->f = INFINITY;
            *next = idx + 8;
            return P_OK;
        }
        break;
    case '-':
        if (spells(p, idx, "-Infinity")) {
            *out = new_value(J_FLOAT);
            (*out)->f = -INFINITY;
            *next = idx + 9;
            return P_OK;
        }
        break;
    }
    return match_number(p, idx, out, next);
}

/* The Python tool's _loads: 0 with the value, or -1 with its error message. */
static int json_loads(const Str *text, Value **out, char *msg, size_t msgsize)
{
    Parser p = {text->cp, text->len, 0};
    size_t i = 0, end = 0;
    while (i < p.len && is_ws(p.t[i]))
        i++;
    switch (scan_once(&p, i, out, &end)) {
    case P_OK:
        break;
    case P_STOP:
        snprintf(msg, msgsize, "no JSON value at offset %zu", i);
        return -1;
    case P_DECODE:
        snprintf(msg, msgsize, "invalid JSON (SystemError)");
        return -1;
    case P_VALUE:
        snprintf(msg, msgsize, "invalid JSON (ValueError)");
        return -1;
    case P_RECURSION:
        snprintf(msg, msgsize, "invalid JSON (RecursionError)");
        return -1;
    }
    for (size_t j = end; j < p.len; j++)
        if (!is_ws(p.t[j])) {
            snprintf(msg, msgsize, "extra data at offset %zu", end);
            return -1;
        }
    return 0;
}

static Value *obj_get(const Value *obj, const char *key)
{
    for (size_t i = 0; i < obj->n; i++)
        if (str_eq_ascii(&obj->keys[i], key))
            return obj->items[i];
    return NULL;
}

/* Python truthiness of a JSON value. */
static int truthy(const Value *v)
{
    switch (v->kind) {
    case J_NULL: case J_FALSE: return 0;
    case J_TRUE: return 1;
    case J_INT: return strcmp(v->digits, "0") != 0;
    case J_FLOAT: return v->f != 0.0; /* NaN is true */
    case J_STR: return v->s.len > 0;
    default: return v->n > 0;
    }
}

/* ------------------------------------------------------------------------ */
/* Python's str() and repr() of a JSON value.                               */
/* ------------------------------------------------------------------------ */

/* The code points above U+007F that str.isprintable() rejects in CPython 3.11
 * (Unicode 14.0: categories Cc Cf Cs Co Cn Zl Zp Zs but the space), as sorted
 * inclusive ranges.  Generated with, under Python 3.11:
 *   [c for c in range(0x80, 0x110000) if not chr(c).isprintable()], merged into ranges. */
static const uint32_t NONPRINTABLE[][2] = {
    {0x80, 0xA0}, {0xAD, 0xAD}, {0x378, 0x379}, {0x380, 0x383}, {0x38B, 0x38B}, {0x38D, 0x38D}, {0x3A2, 0x3A2},
    {0x530, 0x530}, {0x557, 0x558}, {0x58B, 0x58C}, {0x590, 0x590}, {0x5C8, 0x5CF}, {0x5EB, 0x5EE}, {0x5F5, 0x605},
    {0x61C, 0x61C}, {0x6DD, 0x6DD}, {0x70E, 0x70F}, {0x74B, 0x74C}, {0x7B2, 0x7BF}, {0x7FB, 0x7FC}, {0x82E, 0x82F},
    {0x83F, 0x83F}, {0x85C, 0x85D}, {0x85F, 0x85F}, {0x86B, 0x86F}, {0x88F, 0x897}, {0x8E2, 0x8E2}, {0x984, 0x984},
    {0x98D, 0x98E}, {0x991, 0x992}, {0x9A9, 0x9A9}, {0x9B1, 0x9B1}, {0x9B3, 0x9B5}, {0x9BA, 0x9BB}, {0x9C5, 0x9C6},
    {0x9C9, 0x9CA}, {0x9CF, 0x9D6}, {0x9D8, 0x9DB}, {0x9DE, 0x9DE}, {0x9E4, 0x9E5}, {0x9FF, 0xA00}, {0xA04, 0xA04},
    {0xA0B, 0xA0E}, {0xA11, 0xA12}, {0xA29, 0xA29}, {0xA31, 0xA31}, {0xA34, 0xA34}, {0xA37, 0xA37}, {0xA3A, 0xA3B},
    {0xA3D, 0xA3D}, {0xA43, 0xA46}, {0xA49, 0xA4A}, {0xA4E, 0xA50}, {0xA52, 0xA58}, {0xA5D, 0xA5D}, {0xA5F, 0xA65},
    {0xA77, 0xA80}, {0xA84, 0xA84}, {0xA8E, 0xA8E}, {0xA92, 0xA92}, {0xAA9, 0xAA9}, {0xAB1, 0xAB1}, {0xAB4, 0xAB4},
    {0xABA, 0xABB}, {0xAC6, 0xAC6}, {0xACA, 0xACA}, {0xACE, 0xACF}, {0xAD1, 0xADF}, {0xAE4, 0xAE5}, {0xAF2, 0xAF8},
    {0xB00, 0xB00}, {0xB04, 0xB04}, {0xB0D, 0xB0E}, {0xB11, 0xB12}, {0xB29, 0xB29}, {0xB31, 0xB31}, {0xB34, 0xB34},
    {0xB3A, 0xB3B}, {0xB45, 0xB46}, {0xB49, 0xB4A}, {0xB4E, 0xB54}, {0xB58, 0xB5B}, {0xB5E, 0xB5E}, {0xB64, 0xB65},
    {0xB78, 0xB81}, {0xB84, 0xB84}, {0xB8B, 0xB8D}, {0xB91, 0xB91}, {0xB96, 0xB98}, {0xB9B, 0xB9B}, {0xB9D, 0xB9D},
    {0xBA0, 0xBA2}, {0xBA5, 0xBA7}, {0xBAB, 0xBAD}, {0xBBA, 0xBBD}, {0xBC3, 0xBC5}, {0xBC9, 0xBC9}, {0xBCE, 0xBCF},
    {0xBD1, 0xBD6}, {0xBD8, 0xBE5}, {0xBFB, 0xBFF}, {0xC0D, 0xC0D}, {0xC11, 0xC11}, {0xC29, 0xC29}, {0xC3A, 0xC3B},
    {0xC45, 0xC45}, {0xC49, 0xC49}, {0xC4E, 0xC54}, {0xC57, 0xC57}, {0xC5B, 0xC5C}, {0xC5E, 0xC5F}, {0xC64, 0xC65},
    {0xC70, 0xC76}, {0xC8D, 0xC8D}, {0xC91, 0xC91}, {0xCA9, 0xCA9}, {0xCB4, 0xCB4}, {0xCBA, 0xCBB}, {0xCC5, 0xCC5},
    {0xCC9, 0xCC9}, {0xCCE, 0xCD4}, {0xCD7, 0xCDC}, {0xCDF, 0xCDF}, {0xCE4, 0xCE5}, {0xCF0, 0xCF0}, {0xCF3, 0xCFF},
    {0xD0D, 0xD0D}, {0xD11, 0xD11}, {0xD45, 0xD45}, {0xD49, 0xD49}, {0xD50, 0xD53}, {0xD64, 0xD65}, {0xD80, 0xD80},
    {0xD84, 0xD84}, {0xD97, 0xD99}, {0xDB2, 0xDB2}, {0xDBC, 0xDBC}, {0xDBE, 0xDBF}, {0xDC7, 0xDC9}, {0xDCB, 0xDCE},
    {0xDD5, 0xDD5}, {0xDD7, 0xDD7}, {0xDE0, 0xDE5}, {0xDF0, 0xDF1}, {0xDF5, 0xE00}, {0xE3B, 0xE3E}, {0xE5C, 0xE80},
    {0xE83, 0xE83}, {0xE85, 0xE85}, {0xE8B, 0xE8B}, {0xEA4, 0xEA4}, {0xEA6, 0xEA6}, {0xEBE, 0xEBF}, {0xEC5, 0xEC5},
    {0xEC7, 0xEC7}, {0xECE, 0xECF}, {0xEDA, 0xEDB}, {0xEE0, 0xEFF}, {0xF48, 0xF48}, {0xF6D, 0xF70}, {0xF98, 0xF98},
    {0xFBD, 0xFBD}, {0xFCD, 0xFCD}, {0xFDB, 0xFFF}, {0x10C6, 0x10C6}, {0x10C8, 0x10CC}, {0x10CE, 0x10CF},
    {0x1249, 0x1249}, {0x124E, 0x124F}, {0x1257, 0x1257}, {0x1259, 0x1259}, {0x125E, 0x125F}, {0x1289, 0x1289},
    {0x128E, 0x128F}, {0x12B1, 0x12B1}, {0x12B6, 0x12B7}, {0x12BF, 0x12BF}, {0x12C1, 0x12C1}, {0x12C6, 0x12C7},
    {0x12D7, 0x12D7}, {0x1311, 0x1311}, {0x1316, 0x1317}, {0x135B, 0x135C}, {0x137D, 0x137F}, {0x139A, 0x139F},
    {0x13F6, 0x13F7}, {0x13FE, 0x13FF}, {0x1680, 0x1680}, {0x169D, 0x169F}, {0x16F9, 0x16FF}, {0x1716, 0x171E},
    {0x1737, 0x173F}, {0x1754, 0x175F}, {0x176D, 0x176D}, {0x1771, 0x1771}, {0x1774, 0x177F}, {0x17DE, 0x17DF},
    {0x17EA, 0x17EF}, {0x17FA, 0x17FF}, {0x180E, 0x180E}, {0x181A, 0x181F}, {0x1879, 0x187F}, {0x18AB, 0x18AF},
    {0x18F6, 0x18FF}, {0x191F, 0x191F}, {0x192C, 0x192F}, {0x193C, 0x193F}, {0x1941, 0x1943}, {0x196E, 0x196F},
    {0x1975, 0x197F}, {0x19AC, 0x19AF}, {0x19CA, 0x19CF}, {0x19DB, 0x19DD}, {0x1A1C, 0x1A1D}, {0x1A5F, 0x1A5F},
    {0x1A7D, 0x1A7E}, {0x1A8A, 0x1A8F}, {0x1A9A, 0x1A9F}, {0x1AAE, 0x1AAF}, {0x1ACF, 0x1AFF}, {0x1B4D, 0x1B4F},
    {0x1B7F, 0x1B7F}, {0x1BF4, 0x1BFB}, {0x1C38, 0x1C3A}, {0x1C4A, 0x1C4C}, {0x1C89, 0x1C8F}, {0x1CBB, 0x1CBC},
    {0x1CC8, 0x1CCF}, {0x1CFB, 0x1CFF}, {0x1F16, 0x1F17}, {0x1F1E, 0x1F1F}, {0x1F46, 0x1F47}, {0x1F4E, 0x1F4F},
    {0x1F58, 0x1F58}, {0x1F5A, 0x1F5A}, {0x1F5C, 0x1F5C}, {0x1F5E, 0x1F5E}, {0x1F7E, 0x1F7F}, {0x1FB5, 0x1FB5},
    {0x1FC5, 0x1FC5}, {0x1FD4, 0x1FD5}, {0x1FDC, 0x1FDC}, {0x1FF0, 0x1FF1}, {0x1FF5, 0x1FF5}, {0x1FFF, 0x200F},
    {0x2028, 0x202F}, {0x205F, 0x206F}, {0x2072, 0x2073}, {0x208F, 0x208F}, {0x209D, 0x209F}, {0x20C1, 0x20CF},
    {0x20F1, 0x20FF}, {0x218C, 0x218F}, {0x2427, 0x243F}, {0x244B, 0x245F}, {0x2B74, 0x2B75}, {0x2B96, 0x2B96},
    {0x2CF4, 0x2CF8}, {0x2D26, 0x2D26}, {0x2D28, 0x2D2C}, {0x2D2E, 0x2D2F}, {0x2D68, 0x2D6E}, {0x2D71, 0x2D7E},
    {0x2D97, 0x2D9F}, {0x2DA7, 0x2DA7}, {0x2DAF, 0x2DAF}, {0x2DB7, 0x2DB7}, {0x2DBF, 0x2DBF}, {0x2DC7, 0x2DC7},
    {0x2DCF, 0x2DCF}, {0x2DD7, 0x2DD7}, {0x2DDF, 0x2DDF}, {0x2E5E, 0x2E7F}, {0x2E9A, 0x2E9A}, {0x2EF4, 0x2EFF},
    {0x2FD6, 0x2FEF}, {0x2FFC, 0x3000}, {0x3040, 0x3040}, {0x3097, 0x3098}, {0x3100, 0x3104}, {0x3130, 0x3130},
    {0x318F, 0x318F}, {0x31E4, 0x31EF}, {0x321F, 0x321F}, {0xA48D, 0xA48F}, {0xA4C7, 0xA4CF}, {0xA62C, 0xA63F},
    {0xA6F8, 0xA6FF}, {0xA7CB, 0xA7CF}, {0xA7D2, 0xA7D2}, {0xA7D4, 0xA7D4}, {0xA7DA, 0xA7F1}, {0xA82D, 0xA82F},
    {0xA83A, 0xA83F}, {0xA878, 0xA87F}, {0xA8C6, 0xA8CD}, {0xA8DA, 0xA8DF}, {0xA954, 0xA95E}, {0xA97D, 0xA97F},
    {0xA9CE, 0xA9CE}, {0xA9DA, 0xA9DD}, {0xA9FF, 0xA9FF}, {0xAA37, 0xAA3F}, {0xAA4E, 0xAA4F}, {0xAA5A, 0xAA5B},
    {0xAAC3, 0xAADA}, {0xAAF7, 0xAB00}, {0xAB07, 0xAB08}, {0xAB0F, 0xAB10}, {0xAB17, 0xAB1F}, {0xAB27, 0xAB27},
    {0xAB2F, 0xAB2F}, {0xAB6C, 0xAB6F}, {0xABEE, 0xABEF}, {0xABFA, 0xABFF}, {0xD7A4, 0xD7AF}, {0xD7C7, 0xD7CA},
    {0xD7FC, 0xF8FF}, {0xFA6E, 0xFA6F}, {0xFADA, 0xFAFF}, {0xFB07, 0xFB12}, {0xFB18, 0xFB1C}, {0xFB37, 0xFB37},
    {0xFB3D, 0xFB3D}, {0xFB3F, 0xFB3F}, {0xFB42, 0xFB42}, {0xFB45, 0xFB45}, {0xFBC3, 0xFBD2}, {0xFD90, 0xFD91},
    {0xFDC8, 0xFDCE}, {0xFDD0, 0xFDEF}, {0xFE1A, 0xFE1F}, {0xFE53, 0xFE53}, {0xFE67, 0xFE67}, {0xFE6C, 0xFE6F},
    {0xFE75, 0xFE75}, {0xFEFD, 0xFF00}, {0xFFBF, 0xFFC1}, {0xFFC8, 0xFFC9}, {0xFFD0, 0xFFD1}, {0xFFD8, 0xFFD9},
    {0xFFDD, 0xFFDF}, {0xFFE7, 0xFFE7}, {0xFFEF, 0xFFFB}, {0xFFFE, 0xFFFF}, {0x1000C, 0x1000C}, {0x10027, 0x10027},
    {0x1003B, 0x1003B}, {0x1003E, 0x1003E}, {0x1004E, 0x1004F}, {0x1005E, 0x1007F}, {0x100FB, 0x100FF},
    {0x10103, 0x10106}, {0x10134, 0x10136}, {0x1018F, 0x1018F}, {0x1019D, 0x1019F}, {0x101A1, 0x101CF},
    {0x101FE, 0x1027F}, {0x1029D, 0x1029F}, {0x102D1, 0x102DF}, {0x102FC, 0x102FF}, {0x10324, 0x1032C},
    {0x1034B, 0x1034F}, {0x1037B, 0x1037F}, {0x1039E, 0x1039E}, {0x103C4, 0x103C7}, {0x103D6, 0x103FF},
    {0x1049E, 0x1049F}, {0x104AA, 0x104AF}, {0x104D4, 0x104D7}, {0x104FC, 0x104FF}, {0x10528, 0x1052F},
    {0x10564, 0x1056E}, {0x1057B, 0x1057B}, {0x1058B, 0x1058B}, {0x10593, 0x10593}, {0x10596, 0x10596},
    {0x105A2, 0x105A2}, {0x105B2, 0x105B2}, {0x105BA, 0x105BA}, {0x105BD, 0x105FF}, {0x10737, 0x1073F},
    {0x10756, 0x1075F}, {0x10768, 0x1077F}, {0x10786, 0x10786}, {0x107B1, 0x107B1}, {0x107BB, 0x107FF},
    {0x10806, 0x10807}, {0x10809, 0x10809}, {0x10836, 0x10836}, {0x10839, 0x1083B}, {0x1083D, 0x1083E},
    {0x10856, 0x10856}, {0x1089F, 0x108A6}, {0x108B0, 0x108DF}, {0x108F3, 0x108F3}, {0x108F6, 0x108FA},
    {0x1091C, 0x1091E}, {0x1093A, 0x1093E}, {0x10940, 0x1097F}, {0x109B8, 0x109BB}, {0x109D0, 0x109D1},
    {0x10A04, 0x10A04}, {0x10A07, 0x10A0B}, {0x10A14, 0x10A14}, {0x10A18, 0x10A18}, {0x10A36, 0x10A37},
    {0x10A3B, 0x10A3E}, {0x10A49, 0x10A4F}, {0x10A59, 0x10A5F}, {0x10AA0, 0x10ABF}, {0x10AE7, 0x10AEA},
    {0x10AF7, 0x10AFF}, {0x10B36, 0x10B38}, {0x10B56, 0x10B57}, {0x10B73, 0x10B77}, {0x10B92, 0x10B98},
    {0x10B9D, 0x10BA8}, {0x10BB0, 0x10BFF}, {0x10C49, 0x10C7F}, {0x10CB3, 0x10CBF}, {0x10CF3, 0x10CF9},
    {0x10D28, 0x10D2F}, {0x10D3A, 0x10E5F}, {0x10E7F, 0x10E7F}, {0x10EAA, 0x10EAA}, {0x10EAE, 0x10EAF},
    {0x10EB2, 0x10EFF}, {0x10F28, 0x10F2F}, {0x10F5A, 0x10F6F}, {0x10F8A, 0x10FAF}, {0x10FCC, 0x10FDF},
    {0x10FF7, 0x10FFF}, {0x1104E, 0x11051}, {0x11076, 0x1107E}, {0x110BD, 0x110BD}, {0x110C3, 0x110CF},
    {0x110E9, 0x110EF}, {0x110FA, 0x110FF}, {0x11135, 0x11135}, {0x11148, 0x1114F}, {0x11177, 0x1117F},
    {0x111E0, 0x111E0}, {0x111F5, 0x111FF}, {0x11212, 0x11212}, {0x1123F, 0x1127F}, {0x11287, 0x11287},
    {0x11289, 0x11289}, {0x1128E, 0x1128E}, {0x1129E, 0x1129E}, {0x112AA, 0x112AF}, {0x112EB, 0x112EF},
    {0x112FA, 0x112FF}, {0x11304, 0x11304}, {0x1130D, 0x1130E}, {0x11311, 0x11312}, {0x11329, 0x11329},
    {0x11331, 0x11331}, {0x11334, 0x11334}, {0x1133A, 0x1133A}, {0x11345, 0x11346}, {0x11349, 0x1134A},
    {0x1134E, 0x1134F}, {0x11351, 0x11356}, {0x11358, 0x1135C}, {0x11364, 0x11365}, {0x1136D, 0x1136F},
    {0x11375, 0x113FF}, {0x1145C, 0x1145C}, {0x11462, 0x1147F}, {0x114C8, 0x114CF}, {0x114DA, 0x1157F},
    {0x115B6, 0x115B7}, {0x115DE, 0x115FF}, {0x11645, 0x1164F}, {0x1165A, 0x1165F}, {0x1166D, 0x1167F},
    {0x116BA, 0x116BF}, {0x116CA, 0x116FF}, {0x1171B, 0x1171C}, {0x1172C, 0x1172F}, {0x11747, 0x117FF},
    {0x1183C, 0x1189F}, {0x118F3, 0x118FE}, {0x11907, 0x11908}, {0x1190A, 0x1190B}, {0x11914, 0x11914},
    {0x11917, 0x11917}, {0x11936, 0x11936}, {0x11939, 0x1193A}, {0x11947, 0x1194F}, {0x1195A, 0x1199F},
    {0x119A8, 0x119A9}, {0x119D8, 0x119D9}, {0x119E5, 0x119FF}, {0x11A48, 0x11A4F}, {0x11AA3, 0x11AAF},
    {0x11AF9, 0x11BFF}, {0x11C09, 0x11C09}, {0x11C37, 0x11C37}, {0x11C46, 0x11C4F}, {0x11C6D, 0x11C6F},
    {0x11C90, 0x11C91}, {0x11CA8, 0x11CA8}, {0x11CB7, 0x11CFF}, {0x11D07, 0x11D07}, {0x11D0A, 0x11D0A},
    {0x11D37, 0x11D39}, {0x11D3B, 0x11D3B}, {0x11D3E, 0x11D3E}, {0x11D48, 0x11D4F}, {0x11D5A, 0x11D5F},
    {0x11D66, 0x11D66}, {0x11D69, 0x11D69}, {0x11D8F, 0x11D8F}, {0x11D92, 0x11D92}, {0x11D99, 0x11D9F},
    {0x11DAA, 0x11EDF}, {0x11EF9, 0x11FAF}, {0x11FB1, 0x11FBF}, {0x11FF2, 0x11FFE}, {0x1239A, 0x123FF},
    {0x1246F, 0x1246F}, {0x12475, 0x1247F}, {0x12544, 0x12F8F}, {0x12FF3, 0x12FFF}, {0x1342F, 0x143FF},
    {0x14647, 0x167FF}, {0x16A39, 0x16A3F}, {0x16A5F, 0x16A5F}, {0x16A6A, 0x16A6D}, {0x16ABF, 0x16ABF},
    {0x16ACA, 0x16ACF}, {0x16AEE, 0x16AEF}, {0x16AF6, 0x16AFF}, {0x16B46, 0x16B4F}, {0x16B5A, 0x16B5A},
    {0x16B62, 0x16B62}, {0x16B78, 0x16B7C}, {0x16B90, 0x16E3F}, {0x16E9B, 0x16EFF}, {0x16F4B, 0x16F4E},
    {0x16F88, 0x16F8E}, {0x16FA0, 0x16FDF}, {0x16FE5, 0x16FEF}, {0x16FF2, 0x16FFF}, {0x187F8, 0x187FF},
    {0x18CD6, 0x18CFF}, {0x18D09, 0x1AFEF}, {0x1AFF4, 0x1AFF4}, {0x1AFFC, 0x1AFFC}, {0x1AFFF, 0x1AFFF},
    {0x1B123, 0x1B14F}, {0x1B153, 0x1B163}, {0x1B168, 0x1B16F}, {0x1B2FC, 0x1BBFF}, {0x1BC6B, 0x1BC6F},
    {0x1BC7D, 0x1BC7F}, {0x1BC89, 0x1BC8F}, {0x1BC9A, 0x1BC9B}, {0x1BCA0, 0x1CEFF}, {0x1CF2E, 0x1CF2F},
    {0x1CF47, 0x1CF4F}, {0x1CFC4, 0x1CFFF}, {0x1D0F6, 0x1D0FF}, {0x1D127, 0x1D128}, {0x1D173, 0x1D17A},
    {0x1D1EB, 0x1D1FF}, {0x1D246, 0x1D2DF}, {0x1D2F4, 0x1D2FF}, {0x1D357, 0x1D35F}, {0x1D379, 0x1D3FF},
    {0x1D455, 0x1D455}, {0x1D49D, 0x1D49D}, {0x1D4A0, 0x1D4A1}, {0x1D4A3, 0x1D4A4}, {0x1D4A7, 0x1D4A8},
    {0x1D4AD, 0x1D4AD}, {0x1D4BA, 0x1D4BA}, {0x1D4BC, 0x1D4BC}, {0x1D4C4, 0x1D4C4}, {0x1D506, 0x1D506},
    {0x1D50B, 0x1D50C}, {0x1D515, 0x1D515}, {0x1D51D, 0x1D51D}, {0x1D53A, 0x1D53A}, {0x1D53F, 0x1D53F},
    {0x1D545, 0x1D545}, {0x1D547, 0x1D549}, {0x1D551, 0x1D551}, {0x1D6A6, 0x1D6A7}, {0x1D7CC, 0x1D7CD},
    {0x1DA8C, 0x1DA9A}, {0x1DAA0, 0x1DAA0}, {0x1DAB0, 0x1DEFF}, {0x1DF1F, 0x1DFFF}, {0x1E007, 0x1E007},
    {0x1E019, 0x1E01A}, {0x1E022, 0x1E022}, {0x1E025, 0x1E025}, {0x1E02B, 0x1E0FF}, {0x1E12D, 0x1E12F},
    {0x1E13E, 0x1E13F}, {0x1E14A, 0x1E14D}, {0x1E150, 0x1E28F}, {0x1E2AF, 0x1E2BF}, {0x1E2FA, 0x1E2FE},
    {0x1E300, 0x1E7DF}, {0x1E7E7, 0x1E7E7}, {0x1E7EC, 0x1E7EC}, {0x1E7EF, 0x1E7EF}, {0x1E7FF, 0x1E7FF},
    {0x1E8C5, 0x1E8C6}, {0x1E8D7, 0x1E8FF}, {0x1E94C, 0x1E94F}, {0x1E95A, 0x1E95D}, {0x1E960, 0x1EC70},
    {0x1ECB5, 0x1ED00}, {0x1ED3E, 0x1EDFF}, {0x1EE04, 0x1EE04}, {0x1EE20, 0x1EE20}, {0x1EE23, 0x1EE23},
    {0x1EE25, 0x1EE26}, {0x1EE28, 0x1EE28}, {0x1EE33, 0x1EE33}, {0x1EE38, 0x1EE38}, {0x1EE3A, 0x1EE3A},
    {0x1EE3C, 0x1EE41}, {0x1EE43, 0x1EE46}, {0x1EE48, 0x1EE48}, {0x1EE4A, 0x1EE4A}, {0x1EE4C, 0x1EE4C},
    {0x1EE50, 0x1EE50}, {0x1EE53, 0x1EE53}, {0x1EE55, 0x1EE56}, {0x1EE58, 0x1EE58}, {0x1EE5A, 0x1EE5A},
    {0x1EE5C, 0x1EE5C}, {0x1EE5E, 0x1EE5E}, {0x1EE60, 0x1EE60}, {0x1EE63, 0x1EE63}, {0x1EE65, 0x1EE66},
    {0x1EE6B, 0x1EE6B}, {0x1EE73, 0x1EE73}, {0x1EE78, 0x1EE78}, {0x1EE7D, 0x1EE7D}, {0x1EE7F, 0x1EE7F},
    {0x1EE8A, 0x1EE8A}, {0x1EE9C, 0x1EEA0}, {0x1EEA4, 0x1EEA4}, {0x1EEAA, 0x1EEAA}, {0x1EEBC, 0x1EEEF},
    {0x1EEF2, 0x1EFFF}, {0x1F02C, 0x1F02F}, {0x1F094, 0x1F09F}, {0x1F0AF, 0x1F0B0}, {0x1F0C0, 0x1F0C0},
    {0x1F0D0, 0x1F0D0}, {0x1F0F6, 0x1F0FF}, {0x1F1AE, 0x1F1E5}, {0x1F203, 0x1F20F}, {0x1F23C, 0x1F23F},
    {0x1F249, 0x1F24F}, {0x1F252, 0x1F25F}, {0x1F266, 0x1F2FF}, {0x1F6D8, 0x1F6DC}, {0x1F6ED, 0x1F6EF},
    {0x1F6FD, 0x1F6FF}, {0x1F774, 0x1F77F}, {0x1F7D9, 0x1F7DF}, {0x1F7EC, 0x1F7EF}, {0x1F7F1, 0x1F7FF},
    {0x1F80C, 0x1F80F}, {0x1F848, 0x1F84F}, {0x1F85A, 0x1F85F}, {0x1F888, 0x1F88F}, {0x1F8AE, 0x1F8AF},
    {0x1F8B2, 0x1F8FF}, {0x1FA54, 0x1FA5F}, {0x1FA6E, 0x1FA6F}, {0x1FA75, 0x1FA77}, {0x1FA7D, 0x1FA7F},
    {0x1FA87, 0x1FA8F}, {0x1FAAD, 0x1FAAF}, {0x1FABB, 0x1FABF}, {0x1FAC6, 0x1FACF}, {0x1FADA, 0x1FADF},
    {0x1FAE8, 0x1FAEF}, {0x1FAF7, 0x1FAFF}, {0x1FB93, 0x1FB93}, {0x1FBCB, 0x1FBEF}, {0x1FBFA, 0x1FFFF},
    {0x2A6E0, 0x2A6FF}, {0x2B739, 0x2B73F}, {0x2B81E, 0x2B81F}, {0x2CEA2, 0x2CEAF}, {0x2EBE1, 0x2F7FF},
    {0x2FA1E, 0x2FFFF}, {0x3134B, 0xE00FF}, {0xE01F0, 0x10FFFF},
};

static int printable(uint32_t c)
{
    size_t lo = 0, hi = sizeof NONPRINTABLE / sizeof NONPRINTABLE[0];
    if (c < 0x80)
        return c >= 0x20 && c < 0x7F;
    while (lo < hi) { /* binary search for the range that could hold c */
        size_t mid = (lo + hi) / 2;
        if (c < NONPRINTABLE[mid][0])
            hi = mid;
        else if (c > NONPRINTABLE[mid][1])
            lo = mid + 1;
        else
            return 0;
    }
    return 1;
}

static void push_hex(Str *o, const char *prefix, uint32_t c, int width)
{
    char buf[16];
    snprintf(buf, sizeof buf, "%s%0*x", prefix, width, (unsigned)c);
    str_ascii(o, buf);
}

/* repr(str): single quotes unless the text holds ' and no ". */
static void repr_str(Str *o, const Str *s)
{
    int sq = 0, dq = 0;
    for (size_t i = 0; i < s->len; i++) {
        sq |= s->cp[i] == '\'';
        dq |= s->cp[i] == '"';
    }
    uint32_t quote = (sq && !dq) ? '"' : '\'';
    str_push(o, quote);
    for (size_t i = 0; i < s->len; i++) {
        uint32_t c = s->cp[i];
        if (c == quote || c == '\\') {
            str_push(o, '\\');
            str_push(o, c);
        } else if (c == '\t') {
            str_ascii(o, "\\t");
        } else if (c == '\n') {
            str_ascii(o, "\\n");
        } else if (c == '\r') {
            str_ascii(o, "\\r");
        } else if (printable(c)) {
            str_push(o, c);
        } else if (c <= 0xFF) {
            push_hex(o, "\\x", c, 2);
        } else if (c <= 0xFFFF) {
            push_hex(o, "\\u", c, 4);
        } else {
            push_hex(o, "\\U", c, 8);
        }
    }
    str_push(o, quote);
}

/* repr(float): the shortest digits that read back as x, laid out as Python
 * does (exponent form when the decimal point would be before -4 or after 16). */
static void repr_float(Str *o, double x)
{
    if (isnan(x)) {
        str_ascii(o, "nan");
        return;
    }
    if (isinf(x)) {
        str_ascii(o, x < 0 ? "-inf" : "inf");
        return;
    }
    char buf[64];
    int prec;
    for (prec = 0; prec < 17; prec++) {
        snprintf(buf, sizeof buf, "%.*e", prec, x);
        if (strtod(buf, NULL) == x)
            break;
    }
    /* buf is [-]d[.ddd]e[+-]XX: split it into digits and a decimal exponent. */
    char digits[32];
    size_t nd = 0;
    const char *q = buf;
    int neg = 0;
    if (*q == '-') {
        neg = 1;
        q++;
    }
    for (; *q && *q != 'e'; q++)
        if (*q != '.')
            digits[nd++] = *q;
    int exp10 = atoi(q + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = '\0';
    int decpt = exp10 + 1; /* digits d1 d2 ... mean 0.d1d2... x 10^decpt */
    if (x == 0.0)
        decpt = 1;
    if (neg)
        str_push(o, '-');
    if (decpt <= -4 || decpt > 16) {
        str_push(o, (unsigned char)digits[0]);
        if (nd > 1) {
            str_push(o, '.');
            for (size_t i = 1; i < nd; i++)
                str_push(o, (unsigned char)digits[i]);
        }
        char e[16];
        snprintf(e, sizeof e, "e%c%02d", decpt - 1 < 0 ? '-' : '+', abs(decpt - 1));
        str_ascii(o, e);
    } else if (decpt <= 0) {
        str_ascii(o, "0.");
        for (int i = 0; i < -decpt; i++)
            str_push(o, '0');
        str_ascii(o, digits);
    } else if ((size_t)decpt >= nd) {
        str_ascii(o, digits);
        for (size_t i = nd; i < (size_t)decpt; i++)
            str_push(o, '0');
        str_ascii(o, ".0");
    } else {
        for (size_t i = 0; i < nd; i++) {
            if (i == (size_t)decpt)
                str_push(o, '.');
            str_push(o, (unsigned char)digits[i]);
        }
    }
}

static void py_repr(Str *o, const Value *v);

static void py_str(Str *o, const Value *v)
{
    if (v->kind == J_STR)
        str_cat(o, &v->s);
    else
        py_repr(o, v);
}

static void py_repr(Str *o, const Value *v)
{
    switch (v->kind) {
    case J_NULL: str_ascii(o, "None"); break;
    case J_FALSE: str_ascii(o, "False"); break;
    case J_TRUE: str_ascii(o, "True"); break;
    case J_INT: str_ascii(o, v->digits); break;
    case J_FLOAT: repr_float(o, v->f); break;
    case J_STR: repr_str(o, &v->s); break;
    case J_ARR:
        str_push(o, '[');
        for (size_t i = 0; i < v->n; i++) {
            if (i)
                str_ascii(o, ", ");
            py_repr(o, v->items[i]);
        }
        str_push(o, ']');
        break;
    case J_OBJ:
        str_push(o, '{');
        for (size_t i = 0; i < v->n; i++) {
            if (i)
                str_ascii(o, ", ");
            repr_str(o, &v->keys[i]);
            str_ascii(o, ": ");
            py_repr(o, v->items[i]);
        }
        str_push(o, '}');
        break;
    }
}

/* json's encode_basestring_ascii: "..." with everything outside printable
 * ASCII escaped, a character above U+FFFF as its surrogate pair. */
static void json_quote(Bytes *o, const Str *s)
{
    static const char hex[] = "0123456789abcdef";
    bytes_str(o, "\"");
    for (size_t i = 0; i < s->len; i++) {
        uint32_t c = s->cp[i];
        char e[16];
        if (c >= ' ' && c <= '~' && c != '\\' && c != '"') {
            char ch = (char)c;
            bytes_push(o, &ch, 1);
            continue;
        }
        switch (c) {
        case '\\': bytes_str(o, "\\\\"); continue;
        case '"': bytes_str(o, "\\\""); continue;
        case '\b': bytes_str(o, "\\b"); continue;
        case '\f': bytes_str(o, "\\f"); continue;
        case '\n': bytes_str(o, "\\n"); continue;
        case '\r': bytes_str(o, "\\r"); continue;
        case '\t': bytes_str(o, "\\t"); continue;
        }
        if (c >= 0x10000) {
            uint32_t v = c - 0x10000;
            uint32_t hi = 0xD800 | (v >> 10), lo = 0xDC00 | (v & 0x3FF);
            snprintf(e, sizeof e, "\\u%c%c%c%c", hex[hi >> 12], hex[(hi >> 8) & 15], hex[(hi >> 4) & 15], hex[hi & 15]);
            bytes_str(o, e);
            c = lo;
        }
        snprintf(e, sizeof e, "\\u%c%c%c%c", hex[c >> 12], hex[(c >> 8) & 15], hex[(c >> 4) & 15], hex[c & 15]);
        bytes_str(o, e);
    }
    bytes_str(o, "\"");
}

/* ------------------------------------------------------------------------ */
/* The standard streams, encoded as Python's sys.stdout / sys.stderr are.   */
/* ------------------------------------------------------------------------ */

/* Python uses errors="surrogateescape" on stdout in the C and POSIX locales
 * (and their UTF-8 coercion targets), errors="strict" in any other. */
static int stdout_surrogateescape;

static void decide_stdout_errors(void)
{
    const char *loc = setlocale(LC_CTYPE, "");
    if (loc == NULL)
        loc = setlocale(LC_CTYPE, NULL);
    stdout_surrogateescape = loc == NULL || strcmp(loc, "C") == 0 || strcmp(loc, "POSIX") == 0
                             || strcmp(loc, "C.UTF-8") == 0 || strcmp(loc, "C.utf8") == 0 || strcmp(loc, "UTF-8") == 0;
}

/* sys.stderr.write(text): UTF-8, errors="backslashreplace". */
static void write_stderr_text(const Str *s)
{
    Bytes o = {0};
    for (size_t i = 0; i < s->len; i++) {
        if (is_surrogate(s->cp[i])) {
            char e[8];
            snprintf(e, sizeof e, "\\u%04x", (unsigned)s->cp[i]);
            bytes_str(&o, e);
        } else {
            utf8_put(&o, s->cp[i]);
        }
    }
    (void)write_all(2, o.b, o.len);
}

static void errmsg(const char *text)
{
    (void)write_all(2, text, strlen(text));
}

/* sys.stdout.write(text); flush: 0, or 1 after printing the UnicodeEncodeError
 * the Python tool would die of (its traceback's last line). */
static int write_stdout_text(const Str *s)
{
    Bytes o = {0};
    for (size_t i = 0; i < s->len; i++) {
        uint32_t c = s->cp[i];
        if (!is_surrogate(c)) {
            utf8_put(&o, c);
            continue;
        }
        /* A run of surrogates: surrogateescape turns U+DC80..U+DCFF back into
         * bytes and fails on the first other one, strict on the first. */
        size_t end = i;
        while (end < s->len && is_surrogate(s->cp[end]))
            end++;
        size_t k = i;
        if (stdout_surrogateescape) {
            while (k < end && s->cp[k] >= 0xDC80 && s->cp[k] <= 0xDCFF) {
                char b = (char)(s->cp[k] & 0xFF);
                bytes_push(&o, &b, 1);
                k++;
            }
            if (k == end) {
                i = end - 1;
                continue;
            }
        }
        char line[200];
        if (end - k == 1)
            snprintf(line, sizeof line, "UnicodeEncodeError: 'utf-8' codec can't encode character '\\u%04x' in "
                     "position %zu: surrogates not allowed\n", (unsigned)s->cp[k], k);
        else
            snprintf(line, sizeof line, "UnicodeEncodeError: 'utf-8' codec can't encode characters in position "
                     "%zu-%zu: surrogates not allowed\n", k, end - 1);
        errmsg(line);
        return 1;
    }
    if (write_all(1, o.b, o.len) < 0) {
        errmsg("BrokenPipeError: [Errno 32] Broken pipe\n");
        return 1;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The output spec (render_out) and base64.                                 */
/* ------------------------------------------------------------------------ */

/* binascii.a2b_base64(data, strict_mode=True) (CPython 3.11): 0 with the
 * bytes appended to out, or -1 when data is not strict base64 (or not ASCII). */
static int base64_strict(const Str *s, Bytes *out)
{
    int quad = 0, pads = 0, padding_started = 0;
    unsigned left = 0;
    for (size_t i = 0; i < s->len; i++) {
        if (s->cp[i] > 0x7F)
            return -1; /* .encode("ascii") fails */
    }
    if (s->len > 0 && s->cp[0] == '=')
        return -1; /* leading padding */
    for (size_t i = 0; i < s->len; i++) {
        uint32_t c = s->cp[i];
        int v;
        if (c == '=') {
            padding_started = 1; /* (3.11 lets a pad after a whole quad pass) */
            if (quad >= 2 && quad + ++pads >= 4) {
                if (i + 1 < s->len)
                    return -1; /* excess data after padding */
                return 0;
            }
            continue;
        }
        if (c >= 'A' && c <= 'Z') v = (int)(c - 'A');
        else if (c >= 'a' && c <= 'z') v = (int)(c - 'a' + 26);
        else if (c >= '0' && c <= '9') v = (int)(c - '0' + 52);
        else if (c == '+') v = 62;
        else if (c == '/') v = 63;
        else return -1; /* only base64 data is allowed */
        if (padding_started)
            return -1; /* discontinuous padding */
        pads = 0;
        unsigned char b;
        switch (quad) {
        case 0: quad = 1; left = (unsigned)v; break;
        case 1: quad = 2; b = (unsigned char)((left << 2) | ((unsigned)v >> 4)); bytes_push(out, &b, 1); left = (unsigned)v & 0x0F; break;
        case 2: quad = 3; b = (unsigned char)((left << 4) | ((unsigned)v >> 2)); bytes_push(out, &b, 1); left = (unsigned)v & 0x03; break;
        case 3: quad = 0; b = (unsigned char)((left << 6) | (unsigned)v); bytes_push(out, &b, 1); left = 0; break;
        }
    }
    return quad == 0 ? 0 : -1; /* incorrect padding / a lone extra character */
}

/* What `out` makes the tool print. */
typedef struct {
    Bytes out, err; /* stdout and stderr bytes; for a fill, out holds the unit */
    Bytes tail;     /* a fill's tail (printed after count units) */
    long count;     /* a fill's count, else -1 */
    int status;
} Rendered;

static const char *OUT_SHAPE = "out must be an object with one of text, base64, error, or fill/count/tail";

/* render_out: 0, or -1 with msg set to the ValueError's text. */
static int render_out(const Value *out, Rendered *r, const char **msg)
{
    memset(r, 0, sizeof *r);
    r->count = -1;
    *msg = OUT_SHAPE;
    if (out->kind != J_OBJ)
        return -1;
    if (out->n == 1 && str_eq_ascii(&out->keys[0], "text") && out->items[0]->kind == J_STR) {
        utf8_surrogatepass(&r->out, &out->items[0]->s);
        return 0;
    }
    if (out->n == 1 && str_eq_ascii(&out->keys[0], "base64") && out->items[0]->kind == J_STR) {
        if (base64_strict(&out->items[0]->s, &r->out) < 0) {
            *msg = "out.base64 is not base64";
            return -1;
        }
        return 0;
    }
    if (out->n == 1 && str_eq_ascii(&out->keys[0], "error") && out->items[0]->kind == J_STR) {
        utf8_surrogatepass(&r->err, &out->items[0]->s);
        r->status = 1;
        return 0;
    }
    if (out->n == 3) {
        const Value *unit = obj_get(out, "fill"), *count = obj_get(out, "count"), *tail = obj_get(out, "tail");
        if (unit && count && tail && unit->kind == J_STR && tail->kind == J_STR && count->kind == J_INT
            && count->digits[0] != '-' && strlen(count->digits) <= 8 && atol(count->digits) <= (1L << 26)) {
            utf8_surrogatepass(&r->out, &unit->s);
            utf8_surrogatepass(&r->tail, &tail->s);
            r->count = atol(count->digits);
            return 0;
        }
    }
    return -1;
}

/* ------------------------------------------------------------------------ */
/* int(os.environ.get("FISKJ_HARNESS_LEG", "-1")), with -1 on ValueError.   */
/* ------------------------------------------------------------------------ */

/* The first code point (digit zero) of each run of ten Unicode decimal digits. */
static const uint32_t DIGIT_ZEROS[] = {
    0x30, 0x660, 0x6F0, 0x7C0, 0x966, 0x9E6, 0xA66, 0xAE6, 0xB66, 0xBE6, 0xC66, 0xCE6, 0xD66, 0xDE6,
    0xE50, 0xED0, 0xF20, 0x1040, 0x1090, 0x17E0, 0x1810, 0x1946, 0x19D0, 0x1A80, 0x1A90, 0x1B50,
    0x1BB0, 0x1C40, 0x1C50, 0xA620, 0xA8D0, 0xA900, 0xA9D0, 0xA9F0, 0xAA50, 0xABF0, 0xFF10, 0x104A0,
    0x10D30, 0x11066, 0x110F0, 0x11136, 0x111D0, 0x112F0, 0x11450, 0x114D0, 0x11650, 0x116C0,
    0x11730, 0x118E0, 0x11950, 0x11C50, 0x11D50, 0x11DA0, 0x16A60, 0x16AC0, 0x16B50, 0x1D7CE,
    0x1D7D8, 0x1D7E2, 0x1D7EC, 0x1D7F6, 0x1E140, 0x1E2F0, 0x1E950, 0x1FBF0,
};

static int decimal_value(uint32_t c)
{
    for (size_t i = 0; i < sizeof DIGIT_ZEROS / sizeof DIGIT_ZEROS[0]; i++)
        if (c >= DIGIT_ZEROS[i] && c < DIGIT_ZEROS[i] + 10)
            return (int)(c - DIGIT_ZEROS[i]);
    return -1;
}

static int py_isspace(uint32_t c)
{
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680
           || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/* The decimal text of int(text) (surrounding whitespace, a sign, digits of any
 * script with single underscores between them), or "-1" when int() refuses. */
static const char *parse_leg(const char *env)
{
    Str s = decode_surrogateescape(env);
    size_t i = 0, j = s.len;
    while (i < j && py_isspace(s.cp[i]))
        i++;
    while (j > i && py_isspace(s.cp[j - 1]))
        j--;
    int neg = 0;
    if (i < j && (s.cp[i] == '+' || s.cp[i] == '-'))
        neg = s.cp[i++] == '-';
    char *digits = xrealloc(NULL, j - i + 2);
    size_t nd = 0;
    int prev_digit = 0;
    for (size_t k = i; k < j; k++) {
        int d = decimal_value(s.cp[k]);
        if (d >= 0) {
            if (!(nd == 0 && d == 0))  /* drop leading zeros */
                digits[nd++] = (char)('0' + d);
            prev_digit = 1;
        } else if (s.cp[k] == '_' && prev_digit && k + 1 < j && decimal_value(s.cp[k + 1]) >= 0) {
            prev_digit = 0;
        } else {
            return "-1";
        }
    }
    if (i == j)
        return "-1"; /* no digits */
    size_t total = 0;
    for (size_t k = i; k < j; k++)
        total += s.cp[k] != '_';
    if (total > MAX_INT_DIGITS)
        return "-1";
    if (nd == 0)
        return "0";
    digits[nd] = '\0';
    if (!neg)
        return digits;
    char *signed_digits = xrealloc(NULL, nd + 2);
    signed_digits[0] = '-';
    memcpy(signed_digits + 1, digits, nd + 1);
    return signed_digits;
}

/* ------------------------------------------------------------------------ */
/* The execution.                                                           */
/* ------------------------------------------------------------------------ */

/* str(OSError) for a failing call: "[Errno N] text" plus ": 'filename'" if one. */
static void os_error(Str *o, int err, const Str *filename)
{
    char buf[256];
    snprintf(buf, sizeof buf, "[Errno %d] %s", err, strerror(err));
    str_ascii(o, buf);
    if (filename) {
        str_ascii(o, ": ");
        repr_str(o, filename);
    }
}

static void fail_line(const char *prefix, const Str *path, int err, int with_filename)
{
    Str m = {0};
    str_ascii(&m, prefix);
    str_cat(&m, path);
    str_ascii(&m, ": ");
    os_error(&m, err, with_filename ? path : NULL);
    str_push(&m, '\n');
    write_stderr_text(&m);
}

/* The ledger step: 0, or 3 after printing why the effect did not happen. */
static int append_effect(const char *ledger, const Str *tool_use_id, const Str *tool, const char *leg)
{
    Str path = decode_surrogateescape(ledger);
    int fd = open(ledger, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        fail_line("ledger_tool: cannot open ledger ", &path, errno, 1);
        return 3;
    }
    int err = 0;
    Bytes old = {0}, needle = {0}, line = {0};
    while (flock(fd, LOCK_EX) < 0) {
        if (errno != EINTR) {
            err = errno;
            goto out;
        }
    }
    /* Every earlier line (the text before the first newline and after each
     * one) that starts with {"tool_use_id": ID, is an earlier attempt. */
    for (;;) {
        char chunk[1 << 16];
        ssize_t k = read(fd, chunk, sizeof chunk);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            err = errno;
            goto out;
        }
        if (k == 0)
            break;
        bytes_push(&old, chunk, (size_t)k);
    }
    bytes_str(&needle, "{\"tool_use_id\": ");
    json_quote(&needle, tool_use_id);
    bytes_str(&needle, ",");
    long earlier = 0;
    for (size_t at = 0; at <= old.len;) {
        if (old.len - at >= needle.len && memcmp(old.b + at, needle.b, needle.len) == 0)
            earlier++;
        char *nl = old.len > at ? memchr(old.b + at, '\n', old.len - at) : NULL;
        if (nl == NULL)
            break;
        at = (size_t)(nl - old.b) + 1;
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    char num[160];
    bytes_str(&line, "{\"tool_use_id\": ");
    json_quote(&line, tool_use_id);
    snprintf(num, sizeof num, ", \"attempt\": %ld, \"pid\": %ld, \"t\": %lld, \"leg\": ", earlier + 1, (long)getpid(),
             (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
    bytes_str(&line, num);
    bytes_str(&line, leg);
    bytes_str(&line, ", \"tool\": ");
    json_quote(&line, tool);
    bytes_str(&line, "}\n");
    /* One write of the whole line (O_APPEND), then fsync, before anything else. */
    while (write(fd, line.b, line.len) < 0) {
        if (errno != EINTR) {
            err = errno;
            goto out;
        }
    }
    if (fsync(fd) < 0)
        err = errno;
out:
    close(fd); /* releases the flock */
    if (err) {
        fail_line("ledger_tool: cannot write ledger ", &path, err, 0);
        return 3;
    }
    return 0;
}

/* time.sleep(sleep_ms / 1000.0) when sleep_ms is a positive number: 0, or 1
 * after printing the OverflowError the Python tool would die of. */
static int sleep_as_asked(const Value *v)
{
    double ms;
    if (v == NULL || !truthy(v))
        return 0;
    if (v->kind == J_TRUE) {
        ms = 1.0;
    } else if (v->kind == J_INT) {
        if (v->digits[0] == '-')
            return 0;
        ms = strtod(v->digits, NULL);
        if (isinf(ms)) {
            errmsg("OverflowError: int too large to convert to float\n");
            return 1;
        }
    } else if (v->kind == J_FLOAT) {
        ms = v->f;
        if (!(ms > 0))
            return 0;
    } else {
        return 0;
    }
    double ns = ms / 1000.0 * 1e9;
    if (!(ns < 9223372036854775808.0)) { /* doubles this large are whole: no rounding up to do */
        errmsg("OverflowError: timestamp out of range for platform time_t\n");
        return 1;
    }
    if ((double)(long long)ns < ns) /* round up, as time.sleep does (without libm's ceil) */
        ns = (double)((long long)ns + 1);
    struct timespec ts = {(time_t)(ns / 1e9), 0};
    ts.tv_nsec = (long)(ns - (double)ts.tv_sec * 1e9);
    if (ts.tv_nsec < 0)
        ts.tv_nsec = 0;
    if (ts.tv_nsec > 999999999)
        ts.tv_nsec = 999999999;
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
    return 0;
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN); /* as Python: a closed pipe is an error, not a signal */
    decide_stdout_errors();
    Str tool = decode_surrogateescape(argc > 1 ? argv[1] : "ledger");

    /* 1. The input. */
    Bytes raw = {0};
    for (;;) {
        char chunk[1 << 16];
        ssize_t k = read(0, chunk, sizeof chunk);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        bytes_push(&raw, chunk, (size_t)k);
    }
    char msg[256];
    Str text = {0};
    Value *data = NULL;
    if (decode_surrogatepass((const unsigned char *)raw.b, raw.len, &text, msg, sizeof msg) == 0) {
        if (text.len == 0)
            str_ascii(&text, "{}");
        if (json_loads(&text, &data, msg, sizeof msg) < 0)
            data = NULL;
    }
    if (data == NULL) {
        errmsg("ledger_tool: input is not JSON: ");
        errmsg(msg);
        errmsg("\n");
        return 2;
    }
    if (data->kind != J_OBJ) {
        errmsg("ledger_tool: input must be a JSON object\n");
        return 2;
    }

    /* 2. The output spec. */
    Rendered r;
    int have_out = 0;
    const Value *out = obj_get(data, "out");
    if (out) {
        const char *why;
        if (render_out(out, &r, &why) < 0) {
            errmsg("ledger_tool: bad out: ");
            errmsg(why);
            errmsg("\n");
            return 2;
        }
        have_out = 1;
    }
    const char *ledger = getenv("FISKJ_LEDGER");
    if (ledger == NULL || ledger[0] == '\0') {
        errmsg("ledger_tool: FISKJ_LEDGER is not set\n");
        return 2;
    }
    Str tool_use_id = {0};
    const Value *id = obj_get(data, "tool_use_id");
    if (id && truthy(id)) {
        py_str(&tool_use_id, id);
    } else {
        const char *env = getenv("FISKJ_TOOL_USE_ID");
        tool_use_id = decode_surrogateescape(env ? env : "");
    }
    const char *leg_env = getenv("FISKJ_HARNESS_LEG");
    const char *leg = parse_leg(leg_env ? leg_env : "-1");

    /* 3. The effect. */
    int status = append_effect(ledger, &tool_use_id, &tool, leg);
    if (status)
        return status;

    /* 4. The work after the effect, and the result. */
    if (sleep_as_asked(obj_get(data, "sleep_ms")))
        return 1;
    const Value *fail = obj_get(data, "fail");
    if (fail && truthy(fail)) {
        Str m = {0};
        str_ascii(&m, "ledger_tool: ");
        str_cat(&m, &tool);
        str_push(&m, ' ');
        str_cat(&m, &tool_use_id);
        str_ascii(&m, " failed as asked\n");
        write_stderr_text(&m);
        return 1;
    }
    if (!have_out) {
        Str m = {0};
        const Value *n = obj_get(data, "n");
        str_ascii(&m, "ok ");
        str_cat(&m, &tool);
        str_push(&m, ' ');
        str_cat(&m, &tool_use_id);
        str_ascii(&m, " n=");
        if (n)
            py_str(&m, n);
        else
            str_push(&m, '0');
        str_push(&m, '\n');
        return write_stdout_text(&m);
    }
    if (r.count >= 0) {
        /* U * K + T, written in chunks of whole units. */
        Bytes chunk = {0};
        long left = r.count;
        while (left > 0 && r.out.len > 0) {
            chunk.len = 0;
            for (; left > 0 && chunk.len < (1u << 20); left--)
                bytes_push(&chunk, r.out.b, r.out.len);
            if (write_all(1, chunk.b, chunk.len) < 0)
                goto broken;
        }
        if (write_all(1, r.tail.b, r.tail.len) < 0)
            goto broken;
    } else if (write_all(1, r.out.b, r.out.len) < 0) {
        goto broken;
    }
    (void)write_all(2, r.err.b, r.err.len);
    return r.status;
broken:
    errmsg("BrokenPipeError: [Errno 32] Broken pipe\n");
    return 1;
}
