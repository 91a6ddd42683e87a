/* fiskj-observe: record and fault the durability-relevant system calls of a
 * whole program tree (any language, processes, threads) from outside it,
 * with ptrace and a seccomp-bpf filter that stops only the relevant calls.
 *
 *   fiskj-observe --log PATH --root DIR [--root DIR ...] [--fault SPEC ...]
 *                 [--control-in FD --control-out FD [--announce-waits]] [--ops all|durable] -- PROG ARGS...
 *
 * The log format, the faults and every limit are in docs/observer.md.
 * Built by harness/observer/build.py (gcc -O2 -Wall -Werror). */
#if !defined(__x86_64__) || !defined(__linux__)
#error "fiskj-observe supports x86_64 Linux only (syscall numbers and registers are x86_64's)"
#endif
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SETUP_FAILED 125              /* our own usage or setup error */
#define DRAIN_NS 500000000LL          /* how long a kill waits for in-flight ops */
#define MAX_ROOTS 32
#define MAX_FAULTS 64
#define MAX_IOV 1024

/* ---- op kinds: bit i of a kinds mask is kind i ------------------------- */
enum kind { K_OPEN, K_WRITE, K_FSYNC, K_FDATASYNC, K_SFR, K_FTRUNCATE, K_RENAME,
            K_MKDIR, K_UNLINK, K_RMDIR, K_FLOCK, K_LOCK, K_CLOSE, K_LINK, K_SYMLINK,
            K_FALLOCATE, K_STAT, K_ACCESS, K_READ, NKINDS };
static const char *const KIND[NKINDS] = {
    "open", "write", "fsync", "fdatasync", "sync_file_range", "ftruncate", "rename",
    "mkdir", "unlink", "rmdir", "flock", "lock", "close", "link", "symlink",
    "fallocate", "stat", "access", "read"};
#define DURABLE ((1u << K_STAT) - 1)  /* counted by default: all but stat, access, read */

/* How a syscall names its file: a path (cwd-relative), dirfd + path, an fd,
 * two paths (rename, link), or a symlink's target + link path. */
enum shape { S_PATH, S_AT, S_FD, S_2PATH, S_2AT, S_SYMLINK, S_SYMLINKAT, S_STATAT };
struct sc { int nr; unsigned char kind, shape, a; };
static const struct sc SC[] = {
    {SYS_open, K_OPEN, S_PATH, 0}, {SYS_openat, K_OPEN, S_AT, 0},
    {SYS_openat2, K_OPEN, S_AT, 0}, {SYS_creat, K_OPEN, S_PATH, 0},
    {SYS_write, K_WRITE, S_FD, 0}, {SYS_pwrite64, K_WRITE, S_FD, 0},
    {SYS_writev, K_WRITE, S_FD, 0}, {SYS_pwritev, K_WRITE, S_FD, 0},
    {SYS_pwritev2, K_WRITE, S_FD, 0}, {SYS_fsync, K_FSYNC, S_FD, 0},
    {SYS_fdatasync, K_FDATASYNC, S_FD, 0}, {SYS_sync_file_range, K_SFR, S_FD, 0},
    {SYS_ftruncate, K_FTRUNCATE, S_FD, 0}, {SYS_truncate, K_FTRUNCATE, S_PATH, 0},
    {SYS_rename, K_RENAME, S_2PATH, 0}, {SYS_renameat, K_RENAME, S_2AT, 0},
    {SYS_renameat2, K_RENAME, S_2AT, 0}, {SYS_mkdir, K_MKDIR, S_PATH, 0},
    {SYS_mkdirat, K_MKDIR, S_AT, 0}, {SYS_unlink, K_UNLINK, S_PATH, 0},
    {SYS_unlinkat, K_UNLINK, S_AT, 0}, {SYS_rmdir, K_RMDIR, S_PATH, 0},
    {SYS_flock, K_FLOCK, S_FD, 0}, {SYS_fcntl, K_LOCK, S_FD, 0},
    {SYS_close, K_CLOSE, S_FD, 0}, {SYS_link, K_LINK, S_2PATH, 0},
    {SYS_linkat, K_LINK, S_2AT, 0}, {SYS_symlink, K_SYMLINK, S_SYMLINK, 0},
    {SYS_symlinkat, K_SYMLINK, S_SYMLINKAT, 0}, {SYS_fallocate, K_FALLOCATE, S_FD, 0},
    {SYS_stat, K_STAT, S_PATH, 0}, {SYS_lstat, K_STAT, S_PATH, 0},
    {SYS_newfstatat, K_STAT, S_STATAT, 3}, {SYS_statx, K_STAT, S_STATAT, 2},
    {SYS_access, K_ACCESS, S_PATH, 0}, {SYS_faccessat, K_ACCESS, S_AT, 0},
    {SYS_faccessat2, K_ACCESS, S_AT, 0}, {SYS_read, K_READ, S_FD, 0},
    {SYS_pread64, K_READ, S_FD, 0}, {SYS_readv, K_READ, S_FD, 0},
};
#define NSC (sizeof SC / sizeof SC[0])
static const int LOCK_CMDS[] = {F_SETLK, F_SETLKW, F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW};

/* ---- faults ------------------------------------------------------------ */
enum action { A_KILL_BEFORE, A_KILL_AFTER, A_EIO, A_ENOSPC, A_SHORT, A_PAUSE, A_SIGINT_AFTER, A_SIGTERM_AFTER,
              NACTIONS };
static const char *const ACTION[NACTIONS] = {"kill-before", "kill-after", "eio", "enospc",
                                             "short-write", "pause", "sigint-after", "sigterm-after"};
struct fault { int action; long k, count; unsigned kinds; int released; const char *glob; };  /* glob: the paths counted */

/* ---- per-thread state -------------------------------------------------- */
struct op {                       /* the one recorded syscall a thread is in */
    long seq; int nr, kind, fd, created, isdir, has_fd, skip_err, iov_patched;
    unsigned faults;              /* bit per enum action injected here */
    long pause_k;
    unsigned long long a[6], flags, mode, count;
    long long off, len, t0;
    struct iovec saved_iov; unsigned long iov_at;
    struct flock fl;
    char path[PATH_MAX], path2[PATH_MAX];
};
struct task { pid_t tid, tgid; int in_op, held, paused, announced, early, waiting; struct op op; };

static struct { struct task **v; int n; } T;      /* the traced threads */
static const struct sc *BYNR[512];
static char *roots[MAX_ROOTS]; static int nroots;
static struct fault faults[MAX_FAULTS]; static int nfaults;
static int logfd = -1, ctl_in = -1, ctl_out = -1, sigfd = -1;
static pid_t main_pid;
static pid_t attach_pid;               /* --attach PID: trace a process that installed the filter and stopped */
static int print_filter;               /* --print-filter: write the filter program to stdout, exit */
static int announce_waits;             /* --announce-waits: a "waits" control line at a lock call that may wait */
static long seq;
static int dying, killed, main_done, main_status;
static long long deadline;
static int short_pending; static char short_path[PATH_MAX];

static void die(const char *fmt, ...) {
    va_list ap; va_start(ap, fmt);
    fputs("fiskj-observe: ", stderr); vfprintf(stderr, fmt, ap); fputc('\n', stderr);
    va_end(ap); exit(SETUP_FAILED);
}

static long long now_ns(void) {   /* CLOCK_MONOTONIC, as Python's time.monotonic_ns() */
    struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* ---- the JSON line being built, written with one write(2) -------------- */
static struct { char *p; size_t n, cap; int first; } J;

static void jb_need(size_t more) {
    if (J.n + more <= J.cap) return;
    J.cap = (J.n + more) * 2;
    if (!(J.p = realloc(J.p, J.cap))) die("out of memory");
}
static void jb_raw(const char *s, size_t n) { jb_need(n); memcpy(J.p + J.n, s, n); J.n += n; }
static void jb_fmt(const char *fmt, ...) {
    va_list ap; va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap); va_end(ap);
    jb_need(n + 1); va_start(ap, fmt); vsnprintf(J.p + J.n, n + 1, fmt, ap); va_end(ap);
    J.n += n;
}
static void jb_begin(void) { J.n = 0; J.first = 1; jb_raw("{", 1); }
static void jb_key(const char *k) {
    if (!J.first) jb_raw(",", 1);
    J.first = 0; jb_raw("\"", 1); jb_raw(k, strlen(k)); jb_raw("\":", 2);
}
static void jb_int(const char *k, long long v) {   /* no printf: this runs for every field */
    char b[24], *e = b + sizeof b, *p = e; unsigned long long u = v < 0 ? -(unsigned long long)v : (unsigned long long)v;
    do *--p = '0' + u % 10; while (u /= 10);
    if (v < 0) *--p = '-';
    jb_key(k); jb_raw(p, e - p);
}
static void jb_bool(const char *k, int v) { jb_key(k); jb_raw(v ? "true" : "false", v ? 4 : 5); }
static void jb_null(const char *k) { jb_key(k); jb_raw("null", 4); }

/* Length of the valid UTF-8 sequence at s (0 if invalid). */
static int utf8_len(const unsigned char *s) {
    int n = s[0] >= 0xF0 && s[0] <= 0xF4 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC2 && s[0] < 0xE0 ? 2 : 0;
    for (int i = 1; i < n; i++) if ((s[i] & 0xC0) != 0x80) return 0;
    if ((s[0] == 0xE0 && s[1] < 0xA0) || (s[0] == 0xED && s[1] >= 0xA0) ||
        (s[0] == 0xF0 && s[1] < 0x90) || (s[0] == 0xF4 && s[1] >= 0x90)) return 0;
    return n;
}
/* A JSON string; bytes that are not UTF-8 become \udcXX (Python's surrogateescape). */
static void jb_sval(const char *str) {
    const unsigned char *s = (const unsigned char *)str;
    jb_raw("\"", 1);
    while (*s) {
        int n = *s < 0x80 ? 1 : utf8_len(s);
        if (*s == '"' || *s == '\\') { jb_raw("\\", 1); jb_raw((const char *)s, 1); }
        else if (*s < 0x20) jb_fmt("\\u%04x", *s);
        else if (n == 0) { jb_fmt("\\udc%02x", *s); n = 1; }
        else jb_raw((const char *)s, n);
        s += n ? n : 1;
    }
    jb_raw("\"", 1);
}
static void jb_str(const char *k, const char *s) { jb_key(k); jb_sval(s); }
static void jb_b64(const char *k, const unsigned char *d, size_t n) {
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    jb_key(k); jb_need(4 * (n / 3 + 1) + 2);
    char *o = J.p + J.n; *o++ = '"';
    size_t i = 0;
    for (; i + 2 < n; i += 3) {
        *o++ = A[d[i] >> 2]; *o++ = A[(d[i] & 3) << 4 | d[i + 1] >> 4];
        *o++ = A[(d[i + 1] & 15) << 2 | d[i + 2] >> 6]; *o++ = A[d[i + 2] & 63];
    }
    if (i < n) {
        *o++ = A[d[i] >> 2];
        *o++ = A[(d[i] & 3) << 4 | (i + 1 < n ? d[i + 1] >> 4 : 0)];
        *o++ = i + 1 < n ? A[(d[i + 1] & 15) << 2] : '=';
        *o++ = '=';
    }
    *o++ = '"'; J.n = o - J.p;
}
/* Finish the line and append it to the log with ONE write(2) (O_APPEND). */
static void jb_emit(void) {
    jb_raw("}\n", 2);
    for (size_t off = 0; off < J.n;) {
        ssize_t w = write(logfd, J.p + off, J.n - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) { perror("fiskj-observe: log write"); return; }
        off += w;
    }
}

/* ---- reading the tracee ------------------------------------------------ */
static ssize_t peek(pid_t tid, unsigned long addr, void *buf, size_t n) {
    struct iovec l = {buf, n}, r = {(void *)addr, n};
    return process_vm_readv(tid, &l, 1, &r, 1, 0);
}
/* A NUL-terminated string of the tracee, page by page (never past its end). */
static int peek_str(pid_t tid, unsigned long addr, char *buf, size_t cap) {
    for (size_t got = 0; got < cap;) {
        size_t chunk = 4096 - ((addr + got) & 4095);
        if (chunk > cap - got) chunk = cap - got;
        if (!addr || peek(tid, addr + got, buf + got, chunk) != (ssize_t)chunk) return -1;
        if (memchr(buf + got, 0, chunk)) return 0;
        got += chunk;
    }
    return -1;
}
/* readlink of /proc/TID/<what> into buf; " (deleted)" dropped. */
static int proc_link(pid_t tid, const char *what, char *buf) {
    char p[64]; snprintf(p, sizeof p, "/proc/%d/%s", tid, what);
    ssize_t n = readlink(p, buf, PATH_MAX - 1);
    if (n <= 0) return -1;
    buf[n] = 0;
    if (n > 10 && !strcmp(buf + n - 10, " (deleted)")) buf[n - 10] = 0;
    return 0;
}
static int fd_path(pid_t tid, int fd, char *buf) {
    char w[32]; snprintf(w, sizeof w, "fd/%d", fd);
    return fd < 0 ? -1 : proc_link(tid, w, buf);
}
/* The fd's position and open flags, from /proc/TID/fdinfo/FD. */
static int fd_info(pid_t tid, int fd, long long *pos, unsigned *flags) {
    char p[64], b[256]; snprintf(p, sizeof p, "/proc/%d/fdinfo/%d", tid, fd);
    int f = open(p, O_RDONLY | O_CLOEXEC);
    if (f < 0) return -1;
    ssize_t n = read(f, b, sizeof b - 1); close(f);
    if (n <= 0) return -1;
    b[n] = 0;
    return sscanf(b, "pos: %lld flags: %o", pos, flags) == 2 ? 0 : -1;
}
static int fd_stat(pid_t tid, int fd, struct stat *st) {
    char p[64]; snprintf(p, sizeof p, "/proc/%d/fd/%d", tid, fd);
    return stat(p, st);
}

/* ---- paths ------------------------------------------------------------- */
/* out = base/rel (or rel if absolute), with ".", ".." and "//" removed lexically. */
static int join_norm(const char *base, const char *rel, char *out) {
    char tmp[2 * PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s/%s", rel[0] == '/' ? "" : base, rel);
    size_t n = 0;
    for (char *c = strtok(tmp, "/"); c; c = strtok(NULL, "/")) {
        if (!strcmp(c, ".")) continue;
        if (!strcmp(c, "..")) { while (n && out[--n] != '/'); continue; }
        size_t l = strlen(c);
        if (n + l + 2 > PATH_MAX) return -1;
        out[n++] = '/'; memcpy(out + n, c, l); n += l;
    }
    if (!n) out[n++] = '/';
    out[n] = 0;
    return 0;
}
/* Absolute path of the tracee's path argument at addr, relative to dirfd. */
static int at_path(pid_t tid, int dirfd, unsigned long addr, char *out) {
    char rel[PATH_MAX], base[PATH_MAX] = "/";
    if (peek_str(tid, addr, rel, sizeof rel) < 0) return -1;
    if (rel[0] != '/' && (dirfd == AT_FDCWD ? proc_link(tid, "cwd", base) : fd_path(tid, dirfd, base)) < 0)
        return -1;
    return join_norm(base, rel, out);
}
static int under_root(const char *p) {
    for (int i = 0; i < nroots; i++) {
        size_t l = strlen(roots[i]);
        if (l == 1 || (!strncmp(p, roots[i], l) && (p[l] == '/' || !p[l]))) return 1;
    }
    return 0;
}

/* ---- tasks ------------------------------------------------------------- */
static struct task *task_find(pid_t tid) {
    for (int i = 0; i < T.n; i++) if (T.v[i]->tid == tid) return T.v[i];
    return NULL;
}
static struct task *task_get(pid_t tid) {
    struct task *t = task_find(tid);
    if (t) return t;
    if (!(t = calloc(1, sizeof *t)) || !(T.v = realloc(T.v, (T.n + 1) * sizeof *T.v))) die("out of memory");
    t->tid = tid;
    return T.v[T.n++] = t;
}
static void task_del(struct task *t) {
    for (int i = 0; i < T.n; i++) if (T.v[i] == t) { T.v[i] = T.v[--T.n]; break; }
    free(t);
}
/* The thread group of t (read from /proc when the clone event was not seen yet). */
static pid_t task_tgid(struct task *t) {
    if (t->tgid) return t->tgid;
    char p[64], b[512]; snprintf(p, sizeof p, "/proc/%d/status", t->tid);
    FILE *f = fopen(p, "re");
    t->tgid = t->tid;
    if (f) {
        while (fgets(b, sizeof b, f)) if (sscanf(b, "Tgid: %d", &t->tgid) == 1) break;
        fclose(f);
    }
    return t->tgid;
}
static void resume(struct task *t, int req, int sig) {
    if (dying || t->held) { t->held = 1; return; }     /* a kill is coming: stay stopped */
    ptrace(req, t->tid, 0, (void *)(long)sig);         /* ESRCH: it died; waitpid says so */
}
/* SIGKILL every traced process (kill() of any tid kills its whole thread group). */
static void kill_all(void) {
    killed = 1;
    for (int i = 0; i < T.n; i++) kill(T.v[i]->tid, SIGKILL);
}
static int in_flight(void) {
    int n = 0;
    for (int i = 0; i < T.n; i++) n += T.v[i]->in_op && !T.v[i]->held;
    return n;
}
static void start_dying(void) { if (!dying) { dying = 1; deadline = now_ns() + DRAIN_NS; } }

/* ---- lifecycle lines ----------------------------------------------------- */
static void log_life(const char *op, struct task *t, pid_t ppid) {
    jb_begin(); jb_str("op", op); jb_int("pid", task_tgid(t)); jb_int("tid", t->tid);
    if (ppid) jb_int("ppid", ppid);
    if (!strcmp(op, "exec")) {                 /* argv from /proc/PID/cmdline */
        char p[64], b[8192]; snprintf(p, sizeof p, "/proc/%d/cmdline", t->tid);
        int f = open(p, O_RDONLY | O_CLOEXEC); ssize_t n = f < 0 ? 0 : read(f, b, sizeof b - 1);
        if (f >= 0) close(f);
        b[n < 0 ? 0 : n] = 0;
        jb_key("argv"); jb_raw("[", 1);
        for (ssize_t i = 0; i < n; i += strlen(b + i) + 1) { if (i) jb_raw(",", 1); jb_sval(b + i); }
        jb_raw("]", 1);
    }
}

/* ---- entry: which syscall, which file ------------------------------------ */
/* Fill op->path (and path2/fd) from the syscall's arguments; 1 if under a root. */
static int decode(struct task *t, struct op *op, const struct sc *d) {
    pid_t tid = t->tid; unsigned long long *a = op->a; int ok = -1;
    op->path2[0] = 0; op->has_fd = 0;
    switch (d->shape) {
    case S_PATH: ok = at_path(tid, AT_FDCWD, a[0], op->path); break;
    case S_AT: ok = at_path(tid, (int)a[0], a[1], op->path); break;
    case S_2PATH: ok = at_path(tid, AT_FDCWD, a[0], op->path) | at_path(tid, AT_FDCWD, a[1], op->path2); break;
    case S_2AT: ok = at_path(tid, (int)a[0], a[1], op->path) | at_path(tid, (int)a[2], a[3], op->path2); break;
    case S_SYMLINK: case S_SYMLINKAT:
        ok = peek_str(tid, a[0], op->path2, PATH_MAX) |
             (d->shape == S_SYMLINK ? at_path(tid, AT_FDCWD, a[1], op->path) : at_path(tid, (int)a[1], a[2], op->path));
        break;
    case S_STATAT: {
        char c = 0;
        if ((a[d->a] & AT_EMPTY_PATH) && (!a[1] || (peek(tid, a[1], &c, 1) == 1 && !c))) {
            op->fd = (int)a[0]; op->has_fd = 1; ok = fd_path(tid, op->fd, op->path);  /* fstat */
        } else ok = at_path(tid, (int)a[0], a[1], op->path);
        break; }
    case S_FD: op->fd = (int)a[0]; op->has_fd = 1; ok = fd_path(tid, op->fd, op->path); break;
    }
    if (ok < 0) return 0;
    if (d->shape == S_2PATH || d->shape == S_2AT) return under_root(op->path) || under_root(op->path2);
    return under_root(op->path);
}

/* Sum of the iovec lengths at addr (count entries); -1 if unreadable. */
static long long iov_total(pid_t tid, unsigned long addr, unsigned long cnt) {
    static struct iovec v[MAX_IOV];
    if (cnt > MAX_IOV || (cnt && peek(tid, addr, v, cnt * sizeof *v) != (ssize_t)(cnt * sizeof *v))) return -1;
    long long s = 0;
    for (unsigned long i = 0; i < cnt; i++) s += v[i].iov_len;
    return s;
}

/* Per-kind arguments at entry: flags, mode, offsets, lengths, lock details. */
static void entry_details(struct task *t, struct op *op) {
    unsigned long long *a = op->a; int nr = op->nr; struct stat st;
    op->off = -1; op->len = -1; op->flags = 0; op->mode = 0; op->created = 0; op->isdir = 0;
    switch (op->kind) {
    case K_OPEN:
        if (nr == SYS_open) { op->flags = a[1]; op->mode = a[2]; }
        else if (nr == SYS_creat) { op->flags = O_CREAT | O_WRONLY | O_TRUNC; op->mode = a[1]; }
        else if (nr == SYS_openat) { op->flags = a[2]; op->mode = a[3]; }
        else { unsigned long long how[3] = {0}; peek(t->tid, a[2], how, sizeof how); op->flags = how[0]; op->mode = how[1]; }
        /* created: O_CREAT|O_EXCL decides at exit; plain O_CREAT if the path did not exist just before */
        op->created = (op->flags & O_CREAT) && !(op->flags & O_EXCL) && stat(op->path, &st) < 0;
        break;
    case K_WRITE: case K_READ:
        op->count = (nr == SYS_writev || nr == SYS_pwritev || nr == SYS_pwritev2 || nr == SYS_readv)
                    ? (unsigned long long)iov_total(t->tid, a[1], a[2]) : a[2];
        if (nr == SYS_pwrite64 || nr == SYS_pread64 || nr == SYS_pwritev || (nr == SYS_pwritev2 && (long long)a[3] != -1))
            op->off = a[3];
        if (nr == SYS_pwritev2) op->flags = a[5];
        break;
    case K_FSYNC: case K_FDATASYNC: op->isdir = fd_stat(t->tid, op->fd, &st) == 0 && S_ISDIR(st.st_mode); break;
    case K_SFR: op->off = a[1]; op->len = a[2]; op->flags = a[3]; break;
    case K_FTRUNCATE: op->len = a[1]; break;
    case K_RENAME: case K_LINK: op->flags = nr == SYS_renameat2 || nr == SYS_linkat ? a[4] : 0; break;
    case K_MKDIR: op->mode = nr == SYS_mkdir ? a[1] : a[2]; break;
    case K_UNLINK: if (nr == SYS_unlinkat && (a[2] & AT_REMOVEDIR)) op->kind = K_RMDIR; break;
    case K_FLOCK: op->flags = a[1]; break;
    case K_LOCK: op->flags = a[1]; memset(&op->fl, 0, sizeof op->fl); peek(t->tid, a[2], &op->fl, sizeof op->fl); break;
    case K_FALLOCATE: op->mode = a[1]; op->off = a[2]; op->len = a[3]; break;
    case K_ACCESS: op->mode = nr == SYS_access ? a[1] : a[2]; break;
    }
    if (op->kind == K_RMDIR) op->isdir = 1;
}

/* ---- faults at entry ---------------------------------------------------- */
/* Skip the syscall: orig_rax = -1, and it returns -err. */
static void inject_errno(struct task *t, struct op *op, int err) {
    struct user_regs_struct r;
    if (ptrace(PTRACE_GETREGS, t->tid, 0, &r) < 0) return;
    r.orig_rax = -1; r.rax = -err;
    if (ptrace(PTRACE_SETREGS, t->tid, 0, &r) == 0) op->skip_err = err;
}
/* Let a write put only the first half of its bytes (the count, or one iovec, shortened). */
static void short_write(struct task *t, struct op *op) {
    struct user_regs_struct r; unsigned long long half = op->count / 2;
    if (op->kind != K_WRITE || (long long)op->count < 0) { inject_errno(t, op, ENOSPC); return; }
    if (ptrace(PTRACE_GETREGS, t->tid, 0, &r) < 0) return;
    if (op->nr == SYS_write || op->nr == SYS_pwrite64) r.rdx = half;
    else {                                   /* vectored: trim iovec j, drop the rest */
        struct iovec v; unsigned long j = 0, addr = op->a[1];
        for (;; j++) {
            if (peek(t->tid, addr + j * sizeof v, &v, sizeof v) != sizeof v) return;
            if (v.iov_len >= half || j + 1 == op->a[2]) break;
            half -= v.iov_len;
        }
        op->saved_iov = v; op->iov_at = addr + j * sizeof v;
        v.iov_len = half;
        struct iovec l = {&v, sizeof v}, rr = {(void *)op->iov_at, sizeof v};
        if (process_vm_writev(t->tid, &l, 1, &rr, 1, 0) != sizeof v) { inject_errno(t, op, ENOSPC); return; }
        op->iov_patched = 1; r.rdx = j + 1;
    }
    ptrace(PTRACE_SETREGS, t->tid, 0, &r);
    short_pending = 1; snprintf(short_path, sizeof short_path, "%s", op->path);
}
static void control_line(const char *fmt, ...) {
    char b[PATH_MAX + 256]; va_list ap; va_start(ap, fmt);
    int n = vsnprintf(b, sizeof b, fmt, ap); va_end(ap);
    if (ctl_out >= 0 && write(ctl_out, b, n < (int)sizeof b ? n : (int)sizeof b - 1) < 0) { /* reader gone */ }
}
/* Count this op against every fault; inject what fires. */
static void apply_faults(struct task *t, struct op *op) {
    int pause_fault = -1;
    if (op->kind == K_WRITE && short_pending && !strcmp(short_path, op->path)) {
        short_pending = 0; op->faults |= 1u << A_SHORT; inject_errno(t, op, ENOSPC);  /* after a short write */
        return;
    }
    for (int i = 0; i < nfaults; i++) {
        struct fault *f = &faults[i];
        if (!(f->kinds & (1u << op->kind))) continue;
        if (f->glob && fnmatch(f->glob, op->path, 0)) continue;  /* only the calls on a path it matches */
        if (++f->count != f->k) continue;
        op->faults |= 1u << f->action;
        if (f->action == A_PAUSE) pause_fault = i;
    }
    if (op->faults & (1u << A_KILL_BEFORE)) { t->held = 1; start_dying(); return; }
    if (op->faults & (1u << A_EIO)) inject_errno(t, op, EIO);
    else if (op->faults & (1u << A_ENOSPC)) inject_errno(t, op, ENOSPC);
    else if (op->faults & (1u << A_SHORT)) short_write(t, op);
    if (pause_fault >= 0) {
        op->pause_k = faults[pause_fault].k;
        t->paused = t->held = !faults[pause_fault].released;
        control_line("paused %ld %ld %d %d %s %s\n", op->pause_k, op->seq, task_tgid(t), t->tid,
                     KIND[op->kind], op->path);
    }
}

/* Writes to one file run one at a time (the others wait at their entry), so that
 * the fd position read after a write is that write's: threads sharing an
 * O_APPEND description would otherwise move it in between. */
static int writing(struct task *t, const char *path) {
    if (t->op.kind != K_WRITE) return 0;
    for (int i = 0; i < T.n; i++) {
        struct task *u = T.v[i];
        if (u != t && u->in_op && !u->held && !u->waiting && u->op.kind == K_WRITE && !strcmp(u->op.path, path))
            return 1;
    }
    return 0;
}
/* The write to path is done: start the earliest write waiting for it (even while
 * a kill drains: it entered before the kill, so it must complete). */
static void wake_writer(const char *path) {
    struct task *w = NULL;
    for (int i = 0; i < T.n; i++)
        if (T.v[i]->waiting && !strcmp(T.v[i]->op.path, path) && (!w || T.v[i]->op.seq < w->op.seq)) w = T.v[i];
    if (w) { w->waiting = 0; ptrace(PTRACE_SYSCALL, w->tid, 0, 0); }
}

/* A lock call that waits while another holds the lock: flock without LOCK_NB, F_SETLKW, F_OFD_SETLKW
 * (an unlock never waits). */
static int lock_may_wait(const struct op *op) {
    if (op->kind == K_FLOCK) return !(op->flags & (LOCK_NB | LOCK_UN)) && (op->flags & (LOCK_SH | LOCK_EX));
    if (op->kind == K_LOCK) return (op->flags == F_SETLKW || op->flags == F_OFD_SETLKW) && op->fl.l_type != F_UNLCK;
    return 0;
}

/* A seccomp stop: the entry of one of the filtered syscalls. */
static void on_entry(struct task *t) {
    struct __ptrace_syscall_info si; long long t0 = now_ns(); struct op *op = &t->op;
    if (ptrace(PTRACE_GET_SYSCALL_INFO, t->tid, sizeof si, &si) <= 0 || si.op != PTRACE_SYSCALL_INFO_SECCOMP ||
        si.seccomp.nr >= 512 || !BYNR[si.seccomp.nr]) { resume(t, PTRACE_CONT, 0); return; }
    if (dying) { t->held = 1; return; }                  /* never runs: no seq */
    const struct sc *d = BYNR[si.seccomp.nr];
    op->nr = d->nr; op->kind = d->kind;
    memcpy(op->a, si.seccomp.args, sizeof op->a);
    if (!decode(t, op, d)) { resume(t, PTRACE_CONT, 0); return; }
    op->seq = ++seq; op->t0 = t0; op->faults = 0; op->skip_err = 0; op->iov_patched = 0;
    t->in_op = 1; t->held = 0;
    entry_details(t, op);
    apply_faults(t, op);
    if (announce_waits && !t->held && lock_may_wait(op))
        control_line("waits %ld %d %d %s %s\n", op->seq, task_tgid(t), t->tid, KIND[op->kind], op->path);
    if (!t->held && writing(t, op->path)) { t->waiting = 1; return; }  /* runs after that write */
    resume(t, PTRACE_SYSCALL, 0);                         /* to its exit stop */
}

/* ---- exit: result, bytes, log line ---------------------------------------- */
static unsigned char *write_data(struct task *t, struct op *op, long long n) {
    static struct iovec r[MAX_IOV];
    unsigned char *buf = malloc(n ? n : 1); unsigned long cnt = 1;
    if (!buf) die("out of memory");
    if (op->nr == SYS_write || op->nr == SYS_pwrite64) { r[0].iov_base = (void *)op->a[1]; r[0].iov_len = n; }
    else {
        cnt = op->a[2] > MAX_IOV ? MAX_IOV : op->a[2];
        if (peek(t->tid, op->a[1], r, cnt * sizeof *r) != (ssize_t)(cnt * sizeof *r)) cnt = 0;
        long long left = n;
        for (unsigned long i = 0; i < cnt; i++) { if ((long long)r[i].iov_len > left) r[i].iov_len = left; left -= r[i].iov_len; }
    }
    struct iovec l = {buf, n};
    if (process_vm_readv(t->tid, &l, 1, r, cnt, 0) != n) memset(buf, 0, n);
    return buf;
}
/* Where a write's bytes went: fd position after it minus the bytes, or the pwrite
 * offset (an O_APPEND fd or RWF_APPEND appends anyway: file size minus the bytes). */
static long long write_offset(struct task *t, struct op *op, long long n) {
    long long pos = -1; unsigned fl = 0; struct stat st;
    fd_info(t->tid, op->fd, &pos, &fl);
    if (op->off < 0) return pos < 0 ? -1 : pos - n;
    if (((fl & O_APPEND) || (op->flags & 0x10 /* RWF_APPEND */)) && fd_stat(t->tid, op->fd, &st) == 0)
        return st.st_size - n;
    return op->off;
}
static const char *flags_s(unsigned long long f) {
    static const struct { unsigned long long bit; const char *name; } F[] = {
        {O_CREAT, "O_CREAT"}, {O_EXCL, "O_EXCL"}, {O_NOCTTY, "O_NOCTTY"}, {O_TRUNC, "O_TRUNC"},
        {O_APPEND, "O_APPEND"}, {O_NONBLOCK, "O_NONBLOCK"}, {O_SYNC, "O_SYNC"}, {O_DSYNC, "O_DSYNC"},
        {O_DIRECT, "O_DIRECT"}, {0100000, "O_LARGEFILE"}, {O_TMPFILE, "O_TMPFILE"},
        {O_DIRECTORY, "O_DIRECTORY"}, {O_NOFOLLOW, "O_NOFOLLOW"}, {O_NOATIME, "O_NOATIME"},
        {O_CLOEXEC, "O_CLOEXEC"}, {O_PATH, "O_PATH"}};
    static char b[512]; size_t n;
    n = snprintf(b, sizeof b, "%s", (f & 3) == O_WRONLY ? "O_WRONLY" : (f & 3) == O_RDWR ? "O_RDWR" : "O_RDONLY");
    f &= ~3ULL;
    for (size_t i = 0; i < sizeof F / sizeof F[0]; i++)
        if ((f & F[i].bit) == F[i].bit) { n += snprintf(b + n, sizeof b - n, "|%s", F[i].name); f &= ~F[i].bit; }
    if (f) snprintf(b + n, sizeof b - n, "|0x%llx", f);
    return b;
}
static const char *flock_s(unsigned long long f) {
    static char b[64];
    snprintf(b, sizeof b, "%s%s", f & LOCK_UN ? "LOCK_UN" : f & LOCK_EX ? "LOCK_EX" : f & LOCK_SH ? "LOCK_SH" : "0",
             f & LOCK_NB ? "|LOCK_NB" : "");
    return b;
}
static const char *fault_s(unsigned f) {
    static char b[128]; size_t n = 0; b[0] = 0;
    for (int i = 0; i < NACTIONS; i++)
        if (f & (1u << i)) n += snprintf(b + n, sizeof b - n, "%s%s", n ? "," : "", ACTION[i]);
    return b;
}
/* The kind-specific fields of an op line. */
static void log_fields(struct op *op, int done, long long ret, const unsigned char *data) {
    if (op->has_fd) jb_int("fd", op->fd);
    switch (op->kind) {
    case K_OPEN:
        if (done && ret >= 0) jb_int("fd", ret);
        jb_int("flags", op->flags); jb_str("flags_s", flags_s(op->flags)); jb_int("mode", op->mode);
        jb_bool("created", done && ret >= 0 && (op->flags & O_CREAT) && ((op->flags & O_EXCL) || op->created));
        break;
    case K_WRITE:
        jb_int("off", op->off); jb_int("count", op->count); jb_int("len", done && ret > 0 ? ret : 0);
        jb_b64("data", data, done && ret > 0 ? ret : 0);
        if (op->nr == SYS_pwritev2) jb_int("flags", op->flags);
        break;
    case K_READ: if (op->off >= 0) jb_int("off", op->off);
        jb_int("len", op->count); break;
    case K_FSYNC: case K_FDATASYNC: case K_RMDIR: jb_bool("dir", op->isdir); break;
    case K_SFR: case K_FALLOCATE:
        jb_int("off", op->off); jb_int("len", op->len);
        jb_int(op->kind == K_SFR ? "flags" : "mode", op->kind == K_SFR ? op->flags : op->mode); break;
    case K_FTRUNCATE: jb_int("len", op->len); break;
    case K_RENAME: case K_LINK: jb_str("path2", op->path2); if (op->flags) jb_int("flags", op->flags); break;
    case K_SYMLINK: jb_str("target", op->path2); break;
    case K_MKDIR: case K_ACCESS: jb_int("mode", op->mode); break;
    case K_FLOCK: jb_str("how", flock_s(op->flags)); break;
    case K_LOCK: {
        static const char *C[] = {[F_SETLK] = "F_SETLK", [F_SETLKW] = "F_SETLKW", [F_OFD_GETLK] = "F_OFD_GETLK",
                                  [F_OFD_SETLK] = "F_OFD_SETLK", [F_OFD_SETLKW] = "F_OFD_SETLKW"};
        jb_str("cmd", op->flags < 39 && C[op->flags] ? C[op->flags] : "?");
        jb_str("how", op->fl.l_type == F_RDLCK ? "F_RDLCK" : op->fl.l_type == F_WRLCK ? "F_WRLCK" : "F_UNLCK");
        jb_int("whence", op->fl.l_whence); jb_int("start", op->fl.l_start); jb_int("len", op->fl.l_len); break; }
    }
}
/* One op line: done=0 when the thread died inside the call (ret null). */
static void log_op(struct task *t, struct op *op, int done, long long ret, const unsigned char *data) {
    jb_begin();
    jb_int("seq", op->seq); jb_int("pid", task_tgid(t)); jb_int("tid", t->tid);
    jb_str("op", KIND[op->kind]); jb_str("path", op->path);
    log_fields(op, done, ret, data);
    if (done) { jb_int("ret", ret < 0 ? -1 : ret); jb_int("errno", ret < 0 ? -ret : 0); }
    else { jb_null("ret"); jb_int("errno", 0); }
    if (op->faults) jb_str("fault", fault_s(op->faults));
    jb_int("t0", op->t0); jb_int("t1", now_ns());
    jb_emit();
}

/* The syscall-exit stop of a recorded op. */
static void on_exit_stop(struct task *t) {
    struct __ptrace_syscall_info si; struct op *op = &t->op; unsigned char *data = NULL;
    if (!t->in_op) { resume(t, PTRACE_CONT, 0); return; }
    long long ret = ptrace(PTRACE_GET_SYSCALL_INFO, t->tid, sizeof si, &si) > 0 && si.op == PTRACE_SYSCALL_INFO_EXIT
                    ? si.exit.rval : -ENOSYS;
    if (op->skip_err && ret != -op->skip_err) {        /* make sure the skipped call says -err */
        struct user_regs_struct r;
        if (ptrace(PTRACE_GETREGS, t->tid, 0, &r) == 0) { r.rax = -op->skip_err; ptrace(PTRACE_SETREGS, t->tid, 0, &r); }
        ret = -op->skip_err;
    }
    if (op->kind == K_WRITE) {
        long long n = ret > 0 ? ret : 0;
        if (n) data = write_data(t, op, n);
        op->off = write_offset(t, op, n);
    }
    if (op->iov_patched) {                               /* put the program's iovec back */
        struct iovec l = {&op->saved_iov, sizeof op->saved_iov}, r = {(void *)op->iov_at, sizeof op->saved_iov};
        process_vm_writev(t->tid, &l, 1, &r, 1, 0);
    }
    log_op(t, op, 1, ret, data);
    free(data);
    t->in_op = 0;
    if (op->kind == K_WRITE) wake_writer(op->path);
    if (op->faults & (1u << A_KILL_AFTER)) { t->held = 1; start_dying(); return; }
    /* a suspend request at a durability event: the signal goes to the program's main process (not a tool),
     * queued before the op's thread sees its result; it is delivered at its signal-delivery stop */
    if (op->faults & (1u << A_SIGINT_AFTER)) kill(main_pid, SIGINT);
    if (op->faults & (1u << A_SIGTERM_AFTER)) kill(main_pid, SIGTERM);
    resume(t, PTRACE_CONT, 0);
}

/* ---- other stops ---------------------------------------------------------- */
/* fork/vfork/clone: the new task is traced already; log it. */
static void on_spawn(struct task *t, int ev) {
    unsigned long msg = 0; struct user_regs_struct r; unsigned long long fl = 0;
    ptrace(PTRACE_GETEVENTMSG, t->tid, 0, &msg);
    struct task *c = task_get((pid_t)msg);
    if (ev == PTRACE_EVENT_CLONE && ptrace(PTRACE_GETREGS, t->tid, 0, &r) == 0)
        fl = r.orig_rax == SYS_clone3 ? (peek(t->tid, r.rdi, &fl, 8), fl) : r.rdi;
    c->tgid = fl & CLONE_THREAD ? task_tgid(t) : (pid_t)msg;
    log_life("spawn", c, task_tgid(t));
    if (fl & CLONE_THREAD) jb_bool("thread", 1);
    jb_int("t", now_ns()); jb_emit();
    c->announced = 1;
    if (c->early) { c->early = 0; resume(c, PTRACE_CONT, 0); }   /* it waited for this line */
}
static void on_exec(struct task *t) {
    unsigned long former = 0;
    ptrace(PTRACE_GETEVENTMSG, t->tid, 0, &former);
    struct task *old = (pid_t)former != t->tid ? task_find((pid_t)former) : NULL;
    if (old) task_del(old);                              /* a non-leader thread exec'd ... */
    if (t->in_op) log_op(t, &t->op, 0, 0, NULL);         /* ... and the leader died in a call */
    t->in_op = t->paused = 0; t->tgid = t->tid;
    log_life("exec", t, 0); jb_int("t", now_ns()); jb_emit();
}
/* A thread is gone: its unfinished op gets ret null; the main process's status is kept. */
static void on_death(pid_t tid, int st) {
    struct task *t = task_find(tid);
    if (!t) { t = task_get(tid); t->tgid = tid; }
    if (t->in_op) { log_op(t, &t->op, 0, 0, NULL); if (!t->waiting && t->op.kind == K_WRITE) wake_writer(t->op.path); }
    log_life("exit", t, 0);
    if (WIFEXITED(st)) jb_int("code", WEXITSTATUS(st)); else jb_int("signal", WTERMSIG(st));
    jb_int("t", now_ns()); jb_emit();
    if (tid == main_pid) { main_done = 1; main_status = st; }
    task_del(t);
}
static void on_stop(struct task *t, int st) {
    int sig = WSTOPSIG(st), ev = st >> 16;
    if (killed) { kill(t->tid, SIGKILL); return; }
    if (sig == (SIGTRAP | 0x80)) on_exit_stop(t);
    else if (ev == PTRACE_EVENT_SECCOMP) on_entry(t);
    else if (ev == PTRACE_EVENT_FORK || ev == PTRACE_EVENT_VFORK || ev == PTRACE_EVENT_CLONE) {
        on_spawn(t, ev); resume(t, PTRACE_CONT, 0);
    } else if (ev == PTRACE_EVENT_EXEC) { on_exec(t); resume(t, PTRACE_CONT, 0); }
    else if (ev == PTRACE_EVENT_STOP) {                  /* group-stop: LISTEN; else (new task) go */
        int group = sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
        if (group && attach_pid && t->tid == attach_pid) { attach_pid = 0; group = 0; }  /* its own wait for us */
        resume(t, group ? PTRACE_LISTEN : PTRACE_CONT, 0);
    } else resume(t, PTRACE_CONT, sig);                  /* signal-delivery-stop: re-inject */
}

/* ---- control: "release K" on control-in ---------------------------------- */
static void release(long k) {
    for (int i = 0; i < nfaults; i++) if (faults[i].action == A_PAUSE && (k < 0 || faults[i].k == k)) faults[i].released = 1;
    for (int i = 0; i < T.n; i++) {
        struct task *t = T.v[i];
        if (t->paused && (k < 0 || t->op.pause_k == k)) { t->paused = t->held = 0; resume(t, PTRACE_SYSCALL, 0); }
    }
}
static void read_control(void) {
    static char b[4096]; static size_t n;
    ssize_t r = read(ctl_in, b + n, sizeof b - 1 - n);
    if (r <= 0) { if (r < 0 && errno == EINTR) return; close(ctl_in); ctl_in = -1; release(-1); return; }
    n += r; b[n] = 0;
    char *line = b, *nl;
    while ((nl = strchr(line, '\n'))) {
        long k; *nl = 0;
        if (sscanf(line, "release %ld", &k) == 1) release(k);
        line = nl + 1;
    }
    n = strlen(line); memmove(b, line, n + 1);
    if (n == sizeof b - 1) n = 0;                        /* a line too long: dropped */
}

/* ---- the wait loop ------------------------------------------------------- */
/* Next tracee event; 0 when only control input or a timeout came; -1 when none left. */
static pid_t next_event(int *st) {
    int timed = dying && !killed;
    pid_t pid;
    if (ctl_in < 0 && !timed) {
        while ((pid = waitpid(-1, st, __WALL)) < 0 && errno == EINTR);
        return pid;
    }
    if ((pid = waitpid(-1, st, __WALL | WNOHANG)) != 0) return pid;
    struct pollfd p[2] = {{sigfd, POLLIN, 0}, {ctl_in, POLLIN, 0}};
    long long ms = timed ? (deadline - now_ns()) / 1000000 + 1 : -1;
    if (poll(p, ctl_in >= 0 ? 2 : 1, ms < 0 && timed ? 0 : (int)ms) > 0) {
        struct signalfd_siginfo si;
        while (p[0].revents && read(sigfd, &si, sizeof si) == sizeof si);
        if (ctl_in >= 0 && p[1].revents) read_control();
    }
    return 0;
}
static void loop(void) {
    for (;;) {
        if (dying && !killed && (!in_flight() || now_ns() >= deadline)) kill_all();
        if (main_done && !killed) kill_all();          /* the main program is gone: so is the rest */
        int st; pid_t pid = next_event(&st);
        if (pid < 0) return;                          /* ECHILD: every tracee reaped */
        if (pid == 0) continue;
        if (WIFEXITED(st) || WIFSIGNALED(st)) on_death(pid, st);
        else if (WIFSTOPPED(st)) on_stop(task_get(pid), st);
    }
}

/* ---- start --------------------------------------------------------------- */
/* seccomp-bpf: SECCOMP_RET_TRACE for the table's syscalls (fcntl: lock commands only). */
static unsigned traced_kinds = ~0u;  /* --ops durable: DURABLE and the kinds a fault counts */
static void install_filter(void) {
    struct sock_filter f[NSC + 16]; int n = 0, nlist = 0, list[NSC];
    for (size_t i = 0; i < NSC; i++)
        if (SC[i].nr != SYS_fcntl && (traced_kinds & (1u << SC[i].kind))) list[nlist++] = SC[i].nr;
    int allow = 3 + nlist + 2 + 5, trace = allow + 1;    /* index of the two returns */
    f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
    f[n] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, allow - n - 1); n++;
    f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
    for (int i = 0; i < nlist; i++, n++) f[n] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, list[i], trace - n - 1, 0);
    f[n] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_fcntl, 0, allow - n - 1); n++;
    f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1]));
    for (int i = 0; i < 5; i++, n++) f[n] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, LOCK_CMDS[i], trace - n - 1, 0);
    f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRACE);
    struct sock_fprog prog = {(unsigned short)n, f};
    if (print_filter) exit(fwrite(f, sizeof f[0], n, stdout) == (size_t)n && fflush(stdout) == 0 ? 0 : SETUP_FAILED);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0) {
        perror("fiskj-observe: seccomp"); _exit(SETUP_FAILED);
    }
}
/* Fork the program: it waits until we have seized it, installs the filter, execs. */
static pid_t start_program(char **argv) {
    int sync[2]; char c;
    long opts = PTRACE_O_TRACESECCOMP | PTRACE_O_TRACECLONE | PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK |
                PTRACE_O_TRACEEXEC | PTRACE_O_EXITKILL | PTRACE_O_TRACESYSGOOD;
    if (attach_pid) {  /* it stops itself (SIGSTOP) once its filter is in: on_stop lets that stop go */
        if (ptrace(PTRACE_SEIZE, attach_pid, 0, (void *)opts) < 0) {
            kill(attach_pid, SIGKILL); die("PTRACE_SEIZE: %s", strerror(errno));
        }
        return attach_pid;
    }
    if (pipe2(sync, O_CLOEXEC) < 0) die("pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0) die("fork: %s", strerror(errno));
    if (pid == 0) {
        close(sync[1]);
        if (read(sync[0], &c, 1) != 1) _exit(SETUP_FAILED);  /* the tracer died first */
        install_filter();
        execvp(argv[0], argv);
        fprintf(stderr, "fiskj-observe: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(errno == ENOENT ? 127 : 126);
    }
    close(sync[0]);
    if (ptrace(PTRACE_SEIZE, pid, 0, (void *)opts) < 0) { kill(pid, SIGKILL); die("PTRACE_SEIZE: %s", strerror(errno)); }
    if (write(sync[1], "g", 1) != 1) die("sync: %s", strerror(errno));
    close(sync[1]);
    return pid;
}
/* Signals sent to the tracer go to the program's main process (not those from the
 * terminal, SI_KERNEL: the program, in the same process group, got them too). */
static void forward(int sig, siginfo_t *si, void *uc) {
    (void)uc;
    if (si->si_code != SI_KERNEL && main_pid > 0) kill(main_pid, sig);
}
static void setup_signals(void) {
    static const int FWD[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
    struct sigaction sa; memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = forward; sa.sa_flags = SA_SIGINFO | SA_RESTART;
    for (size_t i = 0; i < sizeof FWD / sizeof FWD[0]; i++) sigaction(FWD[i], &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    sigset_t s; sigemptyset(&s); sigaddset(&s, SIGCHLD);
    sigprocmask(SIG_BLOCK, &s, NULL);
    if ((sigfd = signalfd(-1, &s, SFD_NONBLOCK | SFD_CLOEXEC)) < 0) die("signalfd: %s", strerror(errno));
}
/* Exit as the main program did: its code, or its signal (default action, no core). */
static void mirror(int st) {
    jb_begin(); jb_str("op", "end");
    if (WIFSIGNALED(st)) { jb_str("status", "signal"); jb_int("signal", WTERMSIG(st)); }
    else { jb_str("status", "exit"); jb_int("code", WEXITSTATUS(st)); }
    jb_int("t", now_ns()); jb_emit();
    close(logfd);
    if (!WIFSIGNALED(st)) exit(WEXITSTATUS(st));
    int sig = WTERMSIG(st); struct rlimit no = {0, 0}; sigset_t s;
    setrlimit(RLIMIT_CORE, &no);
    signal(sig, SIG_DFL); sigemptyset(&s); sigaddset(&s, sig); sigprocmask(SIG_UNBLOCK, &s, NULL);
    kill(getpid(), sig);
    exit(128 + sig);
}

/* ---- arguments ------------------------------------------------------------ */
static void add_root(const char *r) {
    char abs[PATH_MAX], cwd[PATH_MAX], real[PATH_MAX];
    if (nroots + 2 > MAX_ROOTS) die("too many --root");
    if (!getcwd(cwd, sizeof cwd) || join_norm(cwd, r, abs) < 0) die("bad --root %s", r);
    roots[nroots++] = strdup(abs);
    if (realpath(abs, real) && strcmp(real, abs)) roots[nroots++] = strdup(real);  /* both spellings */
}
static void add_fault(const char *arg) {
    char act[32], kinds[512] = "", s[1024]; long k; int n = 0;
    struct fault *f = &faults[nfaults];
    if (nfaults == MAX_FAULTS) die("too many --fault");
    snprintf(s, sizeof s, "%s", arg);
    char *eq = strchr(s, '=');                         /* ACTION@K[:KINDS][=GLOB] */
    f->glob = eq ? strdup(eq + 1) : NULL;
    if (eq) *eq = 0;
    if (sscanf(s, "%31[^@]@%ld%n:%511s", act, &k, &n, kinds) < 2 || k < 1 || (s[n] && s[n] != ':'))
        die("bad --fault %s: expected ACTION@K[:KINDS][=GLOB], e.g. kill-before@3:fsync", s);
    f->action = -1;
    for (int i = 0; i < NACTIONS; i++) if (!strcmp(act, ACTION[i])) f->action = i;
    if (f->action < 0) die("bad --fault %s: unknown action %s", s, act);
    f->k = k; f->kinds = kinds[0] ? 0 : DURABLE;
    for (char *w = strtok(kinds, ","); w; w = strtok(NULL, ",")) {
        int i = 0;
        while (i < NKINDS && strcmp(w, KIND[i])) i++;
        if (i == NKINDS) die("bad --fault %s: unknown op %s", s, w);
        f->kinds |= 1u << i;
    }
    nfaults++;
}
static int fd_arg(const char *s) {
    char *e; long v = strtol(s, &e, 10);
    if (*e || v < 0 || fcntl((int)v, F_GETFD) < 0) die("bad control fd %s", s);
    fcntl((int)v, F_SETFD, FD_CLOEXEC);
    return (int)v;
}
static char **parse_args(int argc, char **argv) {
    const char *log = NULL;
    int i = 1;
    for (; i < argc && strcmp(argv[i], "--"); i += 2) {
        if (!strcmp(argv[i], "--print-filter")) { print_filter = 1; i--; continue; }
        if (!strcmp(argv[i], "--announce-waits")) { announce_waits = 1; i--; continue; }
        if (i + 1 >= argc) die("%s needs a value", argv[i]);
        if (!strcmp(argv[i], "--log")) log = argv[i + 1];
        else if (!strcmp(argv[i], "--root")) add_root(argv[i + 1]);
        else if (!strcmp(argv[i], "--fault")) add_fault(argv[i + 1]);
        else if (!strcmp(argv[i], "--control-in")) ctl_in = fd_arg(argv[i + 1]);
        else if (!strcmp(argv[i], "--control-out")) ctl_out = fd_arg(argv[i + 1]);
        else if (!strcmp(argv[i], "--ops") && !strcmp(argv[i + 1], "all")) traced_kinds = ~0u;
        else if (!strcmp(argv[i], "--ops") && !strcmp(argv[i + 1], "durable")) traced_kinds = DURABLE;
        else if (!strcmp(argv[i], "--attach") && atoi(argv[i + 1]) > 0) attach_pid = atoi(argv[i + 1]);
        else die("unknown option %s %s", argv[i], argv[i + 1]);
    }
    if (traced_kinds != ~0u)                           /* a fault's kinds are always traced */
        for (int f = 0; f < nfaults; f++) traced_kinds |= faults[f].kinds;
    if (print_filter) install_filter();
    if (!log || !nroots || (i + 1 >= argc && !attach_pid))
        die("usage: fiskj-observe --log PATH --root DIR [--root DIR ...] [--fault SPEC ...] "
            "[--control-in FD --control-out FD [--announce-waits]] [--ops all|durable] (-- PROG ARGS... | --attach PID)");
    if (announce_waits && ctl_out < 0) die("--announce-waits needs --control-out");
    for (int f = 0; f < nfaults; f++) {
        if (faults[f].action != A_PAUSE) continue;
        if (ctl_in < 0 || ctl_out < 0) die("a pause fault needs --control-in and --control-out");
        for (int g = 0; g < f; g++)                    /* "release K" must name one fault */
            if (faults[g].action == A_PAUSE && faults[g].k == faults[f].k) die("two pause faults with K=%ld", faults[f].k);
    }
    if ((logfd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600)) < 0) die("cannot open log %s: %s", log, strerror(errno));
    return argv + (i < argc ? i + 1 : i);
}

int main(int argc, char **argv) {
    for (size_t i = 0; i < NSC; i++) BYNR[SC[i].nr] = &SC[i];
    char **prog = parse_args(argc, argv);
    main_pid = start_program(prog);
    setup_signals();
    struct task *t = task_get(main_pid); t->tgid = main_pid; t->announced = 1;
    jb_begin(); jb_str("op", "spawn"); jb_int("pid", main_pid); jb_int("tid", main_pid);
    jb_int("ppid", getpid()); jb_int("t", now_ns()); jb_emit();
    loop();
    mirror(main_done ? main_status : (SETUP_FAILED << 8));
    return SETUP_FAILED;
}
