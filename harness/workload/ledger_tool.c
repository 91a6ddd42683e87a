/*
 * ledger_tool.c: the fast path of the ledger tool (harness/workload/ledger_tool.py).
 *
 * Usage:  ledger_tool PYTHON SCRIPT [NAME ...]
 *
 * PYTHON is an interpreter and SCRIPT the path of ledger_tool.py; the harness
 * puts both in the tool command (harness/workload/ledger_build.py).  The
 * contract is docs/workload.md "The ledger tool's contract".  This program
 * does the work itself only for the inputs the harness's own workload sends
 * (server.py: a JSON object of tool_use_id, n, sleep_ms, fail and the
 * output spec out; other keys with string, number, boolean or null values
 * are read and ignored).  For anything else -- malformed JSON, a float or huge n, a bad out, a name or id
 * that is not plain UTF-8, FISKJ_LEDGER unset, a ledger it cannot open, any
 * doubt -- it hands the input to the script BEFORE any effect: the stdin
 * bytes it read go into a memfd (an unlinked temporary file when memfd_create
 * is unavailable) that becomes fd 0 at offset 0, FISKJ_LEDGER_FALLBACK is set
 * to the reason, and it execs ``PYTHON -I -S SCRIPT NAME ...`` in its own
 * process (same pid).  So every refusal and its message is the script's own.
 *
 * The fast path: parse; take an exclusive flock on $FISKJ_LEDGER (opened
 * O_RDWR|O_APPEND|O_CREAT|O_CLOEXEC, 0600); count the earlier lines for the
 * id; write the line in ONE write(2); fsync; close (releasing the lock);
 * sleep sleep_ms; then "fail" (exit 1), the out spec (exit 0, 1 for error) or
 * "ok NAME ID n=N" (exit 0).  A failed write or fsync is exit 3 with the
 * script's message.  Strings are kept as UTF-8 bytes, a lone surrogate as its
 * three bytes (WTF-8), which is what Python's "surrogatepass" writes back.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <langinfo.h>
#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static int g_argc;
static char **g_argv;
static unsigned char *in;   /* all of stdin */
static size_t in_len;

/* write(2) all of p, retrying EINTR and short writes; -1 on error. */
static int write_all(int fd, const void *data, size_t n)
{
    for (const char *c = data; n > 0;) {
        ssize_t k = write(fd, c, n);
        if (k < 0 && errno != EINTR)
            return -1;
        if (k > 0)
            c += k, n -= (size_t)k;
    }
    return 0;
}

/* Hand the input to the Python tool: stdin bytes -> memfd -> fd 0, exec.  Never returns. */
static void fallback(const char *why)
{
    if (in != NULL) {  /* NULL: nothing was read, fd 0 is still the caller's stdin */
        int fd = memfd_create("ledger-tool-input", MFD_CLOEXEC);
        if (fd < 0) {
            char path[] = "/tmp/fiskj-ledger-input-XXXXXX";
            fd = mkstemp(path);
            if (fd >= 0)
                unlink(path);
        }
        if (fd < 0 || write_all(fd, in, in_len) < 0 || lseek(fd, 0, SEEK_SET) != 0 || dup2(fd, 0) < 0) {
            fprintf(stderr, "ledger_tool: cannot pass the input to the Python tool: %s\n", strerror(errno));
            _exit(2);
        }
        if (fd != 0)
            close(fd);
    }
    setenv("FISKJ_LEDGER_FALLBACK", why, 1);
    char **args = calloc((size_t)g_argc + 3, sizeof *args);  /* PYTHON -I -S SCRIPT NAME ... */
    if (args != NULL) {
        args[0] = g_argv[1], args[1] = "-I", args[2] = "-S";
        memcpy(args + 3, g_argv + 2, (size_t)(g_argc - 2) * sizeof *args);
        execv(g_argv[1], args);
    }
    fprintf(stderr, "ledger_tool: cannot run the Python tool %s: %s\n", g_argv[1], strerror(errno));
    _exit(2);
}

/* ---- UTF-8 ---------------------------------------------------------------------------------- */

/* Length of the UTF-8 sequence at s (at most n bytes), 0 if invalid.  A
 * surrogate's three bytes (ED A0..BF xx) count only when *sur is not NULL, and set it. */
static size_t utf8_len(const unsigned char *s, size_t n, int *sur)
{
    unsigned c = s[0];
    size_t k = c < 0x80 ? 1 : c >= 0xC2 && c < 0xE0 ? 2 : c >= 0xE0 && c < 0xF0 ? 3 : c >= 0xF0 && c < 0xF5 ? 4 : 0;
    if (k == 0 || k > n)
        return 0;
    for (size_t i = 1; i < k; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    if ((c == 0xE0 && s[1] < 0xA0) || (c == 0xF0 && s[1] < 0x90) || (c == 0xF4 && s[1] >= 0x90))
        return 0;  /* overlong, or above U+10FFFF */
    if (c == 0xED && s[1] >= 0xA0) {  /* a surrogate */
        if (sur == NULL)
            return 0;
        *sur = 1;
    }
    return k;
}

/* True when s[0..n) is UTF-8 without surrogates; *ascii is cleared on a non-ASCII byte. */
static int plain_utf8(const char *s, size_t n, int *ascii)
{
    for (size_t i = 0, k; i < n; i += k) {
        if ((unsigned char)s[i] >= 0x80)
            *ascii = 0;
        if ((k = utf8_len((const unsigned char *)s + i, n - i, NULL)) == 0)
            return 0;
    }
    return 1;
}

/* Append c as UTF-8 (a surrogate as its three bytes); returns the end. */
static char *put_utf8(char *o, unsigned c)
{
    static const unsigned char lead[] = {0, 0, 0xC0, 0xE0, 0xF0};
    int k = c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
    for (int i = k - 1; i > 0; i--, c >>= 6)
        o[i] = (char)(0x80 | (c & 0x3F));
    o[0] = (char)(lead[k] | c);
    return o + k;
}

/* json.dumps(s) with ensure_ascii, for UTF-8 s: written to o (room for 6 * n + 2), returns the end. */
static char *quote(char *o, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *u = (const unsigned char *)s;
    *o++ = '"';
    for (size_t i = 0; i < n;) {
        unsigned c = u[i], k = 1;
        if (c >= 0x80) {  /* decode (the input is valid) */
            k = c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
            c &= 0x3F >> (k - 1);
            for (unsigned j = 1; j < k; j++)
                c = c << 6 | (u[i + j] & 0x3F);
        }
        i += k;
        const char *esc = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n" : c == '\r' ? "\\r"
                        : c == '\t' ? "\\t" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
        if (esc) {
            o = stpcpy(o, esc);
        } else if (c >= 0x20 && c < 0x7F) {
            *o++ = (char)c;
        } else {
            unsigned units[2] = {c, 0}, m = 1;
            if (c >= 0x10000) {  /* a surrogate pair, as json does */
                units[0] = 0xD800 | (c - 0x10000) >> 10;
                units[1] = 0xDC00 | (c & 0x3FF);
                m = 2;
            }
            for (unsigned j = 0; j < m; j++) {
                *o++ = '\\', *o++ = 'u';
                for (int shift = 12; shift >= 0; shift -= 4)
                    *o++ = hex[units[j] >> shift & 15];
            }
        }
    }
    *o++ = '"';
    return o;
}

/* ---- the input: a JSON object, parsed strictly; 0 from any parser = "not on the fast path" ---- */

typedef struct { char *s; size_t n; int sur; } Str;       /* decoded bytes; sur: holds a surrogate */
typedef struct { int type; Str str; const char *num; size_t numlen; int is_int; } Value;
enum { V_NONE, V_STR, V_NUM, V_TRUE, V_FALSE, V_NULL, V_OBJ };

static const unsigned char *p, *end;  /* the parser's position in `in` */
static char *arena;                   /* decoded strings; never longer than their JSON text */

static void ws(void) { while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++; }

static int hex4(unsigned *v)
{
    *v = 0;
    for (int i = 0; i < 4; i++, p++) {
        if (p >= end) return 0;
        int d = *p >= '0' && *p <= '9' ? *p - '0' : (*p | 0x20) >= 'a' && (*p | 0x20) <= 'f' ? (*p | 0x20) - 'a' + 10 : -1;
        if (d < 0) return 0;
        *v = *v << 4 | (unsigned)d;
    }
    return 1;
}

/* A JSON string at p, as json's strict scanner reads it (\uD83D\uDE00 joins; a lone surrogate stays). */
static int string(Str *out)
{
    if (p >= end || *p++ != '"') return 0;
    out->s = arena;
    out->sur = 0;
    while (p < end && *p != '"') {
        if (*p < 0x20) return 0;  /* a raw control character */
        if (*p != '\\') {
            size_t k = utf8_len(p, (size_t)(end - p), &out->sur);
            if (k == 0) return 0;
            memcpy(arena, p, k);
            arena += k;
            p += k;
            continue;
        }
        if (++p >= end) return 0;
        const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t", *at = strchr(from, *p);
        if (at && *p) {
            *arena++ = to[at - from];
            p++;
            continue;
        }
        unsigned c, lo;
        if (*p++ != 'u' || !hex4(&c)) return 0;
        if (c >= 0xD800 && c < 0xDC00 && end - p >= 6 && p[0] == '\\' && p[1] == 'u') {
            const unsigned char *back = p;
            p += 2;
            if (!hex4(&lo)) return 0;
            if (lo >= 0xDC00 && lo < 0xE000)
                c = 0x10000 + ((c - 0xD800) << 10) + (lo - 0xDC00);
            else
                p = back;  /* the next escape stands alone */
        }
        if (c >= 0xD800 && c < 0xE000) out->sur = 1;
        arena = put_utf8(arena, c);
    }
    if (p >= end) return 0;
    p++;
    out->n = (size_t)(arena - out->s);
    return 1;
}

static size_t digits(void)
{
    const unsigned char *s = p;
    while (p < end && *p >= '0' && *p <= '9') p++;
    return (size_t)(p - s);
}

/* A JSON number (-?(0|[1-9][0-9]*)(.[0-9]+)?([eE][-+]?[0-9]+)?) of at most 32 characters. */
static int number(Value *v)
{
    const unsigned char *s = p;
    v->type = V_NUM, v->num = (const char *)s, v->is_int = 1;
    if (p < end && *p == '-') p++;
    if (p < end && *p == '0') p++;
    else if (!digits()) return 0;
    if (p < end && *p == '.' && (v->is_int = 0, p++, !digits())) return 0;
    if (p < end && (*p == 'e' || *p == 'E')) {
        v->is_int = 0;
        if (++p < end && (*p == '+' || *p == '-')) p++;
        if (!digits()) return 0;
    }
    return (v->numlen = (size_t)(p - s)) <= 32;
}

static int word(const char *w)
{
    size_t n = strlen(w);
    if ((size_t)(end - p) < n || memcmp(p, w, n) != 0) return 0;
    p += n;
    return 1;
}

/* A scalar value, or (when obj_ok) the start of an object, left for the caller at '{'. */
static int value(Value *v, int obj_ok)
{
    if (p >= end) return 0;
    if (*p == '"') return v->type = V_STR, string(&v->str);
    if (*p == '{') return obj_ok && (v->type = V_OBJ);
    if (*p == 't') return v->type = V_TRUE, word("true");
    if (*p == 'f') return v->type = V_FALSE, word("false");
    if (*p == 'n') return v->type = V_NULL, word("null");
    return number(v);
}

/* Calls field(key, value) for each member of the object at p; 0 on a syntax error or a field's 0. */
static int object(int (*field)(const Str *, Value *))
{
    if (p >= end || *p++ != '{') return 0;
    ws();
    if (p < end && *p == '}') return p++, 1;
    for (;;) {
        Str key;
        Value v = {0};
        if (!string(&key)) return 0;
        ws();
        if (p >= end || *p++ != ':') return 0;
        ws();
        if (!value(&v, 1) || !field(&key, &v)) return 0;
        ws();
        if (p < end && *p == '}') return p++, 1;
        if (p >= end || *p++ != ',') return 0;
        ws();
    }
}

static int is(const Str *key, const char *name) { return key->n == strlen(name) && memcmp(key->s, name, key->n) == 0; }

/* An integer value of at most 18 digits (a long long). */
static int integer(const Value *v, long long *out)
{
    if (v->type != V_NUM || !v->is_int || v->numlen - (*v->num == '-') > 18) return 0;
    *out = strtoll(v->num, NULL, 10);
    return 1;
}

/* What the input says.  seen: a bit per known key (a repeated one leaves the fast path). */
static struct {
    unsigned seen;
    Str id, text, fill, tail;
    long long n, count;
    double sleep_ms;
    int fail;
    enum { OUT_NONE, OUT_TEXT, OUT_BASE64, OUT_ERROR, OUT_FILL } out;
} q;

static int once(unsigned bit) { return (q.seen & bit) ? 0 : (q.seen |= bit, 1); }

static int out_field(const Str *key, Value *v)
{
    static const char *keys[] = {"text", "base64", "error", "fill", "count", "tail"};
    Str *slot[] = {&q.text, &q.text, &q.text, &q.fill, NULL, &q.tail};
    for (int i = 0; i < 6; i++) {
        if (!is(key, keys[i])) continue;
        if (!once(0x100u << i)) return 0;
        if (slot[i] == NULL) return integer(v, &q.count);
        return v->type == V_STR && (*slot[i] = v->str, 1);
    }
    return 0;  /* another key */
}

static int top_field(const Str *key, Value *v)
{
    if (v->type == V_OBJ && !is(key, "out")) return 0;
    if (is(key, "tool_use_id")) return once(1) && v->type == V_STR && (q.id = v->str, 1);
    if (is(key, "n")) return once(2) && integer(v, &q.n);
    if (is(key, "fail")) return once(4) && (v->type == V_TRUE || v->type == V_FALSE) && (q.fail = v->type == V_TRUE, 1);
    if (is(key, "sleep_ms")) {
        if (!once(8) || v->type != V_NUM) return 0;
        q.sleep_ms = strtod(v->num, NULL);  /* the C locale: "." */
        return q.sleep_ms <= 1e9;  /* longer than 11 days: the script says what it makes of it */
    }
    if (!is(key, "out")) return 1;  /* another key, a scalar: ignored, as the script does */
    if (!once(16) || v->type != V_OBJ || !object(out_field)) return 0;
    unsigned s = q.seen >> 8;  /* which out keys: text 1, base64 2, error 4, fill 8, count 16, tail 32 */
    q.out = s == 1 ? OUT_TEXT : s == 2 ? OUT_BASE64 : s == 4 ? OUT_ERROR : s == 56 ? OUT_FILL : OUT_NONE;
    return q.out != OUT_NONE && (q.out != OUT_FILL || (q.count >= 0 && q.count <= 1LL << 26));
}

/* Canonical base64 (groups of 4, '=' only to pad the last) decoded in place; 0 for anything else. */
static int base64(Str *s)
{
    static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t pad = s->n >= 1 && s->s[s->n - 1] == '=' ? (s->n >= 2 && s->s[s->n - 2] == '=' ? 2 : 1) : 0;
    if (s->n % 4) return 0;
    unsigned long acc = 0;
    size_t o = 0;
    for (size_t i = 0; i < s->n - pad; i++) {
        const char *at = s->s[i] ? strchr(alphabet, s->s[i]) : NULL;
        if (at == NULL) return 0;
        acc = acc << 6 | (unsigned long)(at - alphabet);
        if (i % 4 == 3) {
            s->s[o++] = (char)(acc >> 16), s->s[o++] = (char)(acc >> 8), s->s[o++] = (char)acc;
            acc = 0;
        }
    }
    if (pad) {  /* the last group: 2 or 3 characters, 1 or 2 bytes (its spare bits ignored, as binascii does) */
        acc <<= 6 * pad;
        s->s[o++] = (char)(acc >> 16);
        if (pad == 1) s->s[o++] = (char)(acc >> 8);
    }
    s->n = o;
    return 1;
}

/* Does Python write UTF-8 on stdout/stderr here?  The C/POSIX locale (also when LANG names
 * no installed locale) is UTF-8 mode; otherwise the locale's codeset says. */
static int utf8_locale(void)
{
    const char *loc = setlocale(LC_CTYPE, "");
    return loc == NULL || !strcmp(loc, "C") || !strcmp(loc, "POSIX") || !strcmp(nl_langinfo(CODESET), "UTF-8");
}

/* ---- the run -------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    g_argc = argc, g_argv = argv;
    if (argc < 3) {
        fputs("ledger_tool: usage: ledger_tool PYTHON SCRIPT [NAME]\n", stderr);
        return 2;
    }
    /* Read all of stdin.  A read error with nothing read hands over the untouched stdin. */
    size_t cap = 1 << 12;
    unsigned char *buf = malloc(cap);
    for (ssize_t k;;) {
        if (buf == NULL || (in_len == cap && (buf = realloc(buf, cap *= 2)) == NULL)) {
            fputs("ledger_tool: out of memory reading the input\n", stderr);
            return 2;
        }
        if ((k = read(0, buf + in_len, cap - in_len)) > 0) in_len += (size_t)k;
        else if (k == 0) break;
        else if (errno != EINTR) { in = in_len ? buf : NULL; fallback("stdin cannot be read"); }
    }
    in = buf;
    if ((arena = malloc(in_len + 1)) == NULL) fallback("out of memory");
    p = in, end = in + in_len;
    if (in_len > 0) {  /* an empty input is {} */
        ws();
        if (!object(top_field)) fallback("input outside the fast path");
        ws();
        if (p != end) fallback("input outside the fast path");
    }
    if (q.out == OUT_BASE64 && !base64(&q.text)) fallback("out.base64 is not canonical base64");

    /* The environment: the ledger, the id, the leg, the name, and a locale that writes them as UTF-8. */
    const char *ledger = getenv("FISKJ_LEDGER"), *leg_s = getenv("FISKJ_HARNESS_LEG");
    const char *name = argc > 3 ? argv[3] : "ledger";
    if (ledger == NULL || !*ledger) fallback("FISKJ_LEDGER is not set");
    if (q.id.n == 0) {  /* `data.get("tool_use_id") or $FISKJ_TOOL_USE_ID` */
        q.id.s = getenv("FISKJ_TOOL_USE_ID") ? getenv("FISKJ_TOOL_USE_ID") : "";
        q.id.n = strlen(q.id.s);
    }
    int ascii = 1;
    if (q.id.sur || !plain_utf8(q.id.s, q.id.n, &ascii) || !plain_utf8(name, strlen(name), &ascii)
        || !plain_utf8(ledger, strlen(ledger), &ascii))
        fallback("a name, id or ledger path that is not UTF-8");
    if (!ascii && !utf8_locale()) fallback("non-ASCII text and a locale that is not UTF-8");
    long leg = -1;
    if (leg_s != NULL) {  /* -?[0-9]{1,9}; anything else is the script's int() */
        size_t digits = strspn(leg_s + (*leg_s == '-'), "0123456789");
        if (digits == 0 || digits > 9 || leg_s[(*leg_s == '-') + digits]) fallback("FISKJ_HARNESS_LEG is not a plain integer");
        leg = strtol(leg_s, NULL, 10);
    }

    /* The effect: flock, count, one write, fsync, close.  Until the write, a failure is the script's to say. */
    int fd = open(ledger, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) fallback("the ledger cannot be opened");
    int rc;
    while ((rc = flock(fd, LOCK_EX)) < 0 && errno == EINTR) {}
    if (rc < 0) { close(fd); fallback("the ledger cannot be locked"); }
    char *needle = malloc(6 * q.id.n + 40), *line = malloc(6 * (q.id.n + strlen(name)) + 160);
    if (needle == NULL || line == NULL) { close(fd); fallback("out of memory"); }
    char *qid = stpcpy(needle, "{\"tool_use_id\": ");
    size_t needle_len = (size_t)(stpcpy(quote(qid, q.id.s, q.id.n), ",") - needle);
    long long earlier = 0, at = 0;  /* at: bytes of the needle matched on this line, -1 after a mismatch */
    char chunk[1 << 16];
    for (ssize_t k;;) {
        if ((k = read(fd, chunk, sizeof chunk)) < 0 && errno == EINTR) continue;
        if (k < 0) { close(fd); fallback("the ledger cannot be read"); }
        if (k == 0) break;
        for (ssize_t i = 0; i < k; i++) {
            if (chunk[i] == '\n') at = 0;
            else if (at >= 0 && (size_t)at < needle_len && chunk[i] == needle[at]) earlier += (size_t)++at == needle_len;
            else if ((size_t)at != needle_len) at = -1;
        }
    }
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    char *o = line + sprintf(line, "%.*s \"attempt\": %lld, \"pid\": %ld, \"t\": %lld, \"leg\": %ld, \"tool\": ",
                             (int)needle_len, needle, earlier + 1, (long)getpid(),
                             (long long)now.tv_sec * 1000000000LL + now.tv_nsec, leg);
    o = stpcpy(quote(o, name, strlen(name)), "}\n");
    ssize_t w;
    while ((w = write(fd, line, (size_t)(o - line))) < 0 && errno == EINTR) {}  /* one write, as os.write */
    while (w >= 0 && (rc = fsync(fd)) < 0 && errno == EINTR) {}
    if (w < 0 || rc < 0) {
        fprintf(stderr, "ledger_tool: cannot write ledger %s: [Errno %d] %s\n", ledger, errno, strerror(errno));
        close(fd);
        return 3;
    }
    close(fd);  /* releases the flock */

    /* Sleep until a monotonic deadline (as time.sleep does, to the ns), then answer. */
    if (q.sleep_ms > 0) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        long long ns = until.tv_nsec + (long long)(q.sleep_ms * 1e6) + 1;
        until.tv_sec += (time_t)(ns / 1000000000LL);
        until.tv_nsec = (long)(ns % 1000000000LL);
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == EINTR) {}
    }
    signal(SIGPIPE, SIG_IGN);  /* as Python: a closed stdout is an error, not a signal */
    /* "ok NAME ID n=N\n" or the fail message: ID may hold a NUL, so it is copied, not formatted. */
    o = stpcpy(line, q.fail ? "ledger_tool: " : "ok ");
    o = stpcpy(stpcpy(o, name), " ");
    memcpy(o, q.id.s, q.id.n);
    o += q.id.n;
    if (q.fail)
        return write_all(2, line, (size_t)(stpcpy(o, " failed as asked\n") - line)), 1;
    if (q.out == OUT_NONE)
        return write_all(1, line, (size_t)(o + sprintf(o, " n=%lld\n", q.n) - line)) < 0;
    if (q.out == OUT_ERROR)
        return write_all(2, q.text.s, q.text.n), 1;
    if (q.out == OUT_FILL) {  /* unit * count + tail: a chunk of whole units, written as often as needed */
        size_t per = q.fill.n == 0 ? 0 : q.fill.n > sizeof chunk ? 1 : sizeof chunk / q.fill.n;
        for (size_t j = 0; per > 1 && j < per; j++)
            memcpy(chunk + j * q.fill.n, q.fill.s, q.fill.n);
        for (long long left = per ? q.count : 0, k; left > 0; left -= k) {
            k = left < (long long)per ? left : (long long)per;
            if (write_all(1, per == 1 ? q.fill.s : chunk, (size_t)k * q.fill.n) < 0) return 1;
        }
        return write_all(1, q.tail.s, q.tail.n) < 0;
    }
    return write_all(1, q.text.s, q.text.n) < 0;  /* text, or the decoded base64 */
}
