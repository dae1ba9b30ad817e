/* The benchmark's HTTP/1.1 load generator over a Unix socket: N connections kept alive (as HTTP
 * client libraries keep them), or one connection per request with --close, for a fixed duration;
 * one thread, epoll, so it takes as little of the machine's CPU as it can. Prints one JSON line:
 *   {"requests":N,"seconds":S,"rate":R,"p50_ms":A,"p99_ms":B,"errors":E}
 * Every answer is checked: its status must be --expect (and its body must hold --contains when
 * given); an answer that is not, or a connection that fails, counts as an error, and the run
 * stops at the first one (a rate of wrong answers is no rate).
 *
 * Build: swift build -c release --product loadgen in Benchmarks/ (Benchmarks/run does it), or
 *        cc -O2 -o loadgen Benchmarks/Sources/loadgen/main.c
 * Run:   loadgen --socket PATH [--connections N] [--seconds S] [--method GET] [--path /v1/health]
 *                [--body TEXT | --bodies FILE] [--expect 200] [--contains TEXT] [--close]
 *   --bodies FILE: one request body per line, each sent once, in order; the run ends early when
 *   they are used up (payments: one token and idempotency key each). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static const char *socket_path, *method = "GET", *path = "/v1/health", *contains;
static int connections = 8, expect_status = 200, one_per_request = 0;
static double seconds = 2.0;
static char **bodies;            /* one per request (--bodies) or one shared (--body) */
static size_t body_count, next_body;
static int shared_body;

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void die(const char *what) {
    fprintf(stderr, "loadgen: %s: %s\n", what, strerror(errno));
    exit(1);
}

typedef struct {
    int fd;
    char *req;          /* the request being sent */
    size_t req_len, sent;
    char *buf;          /* the answer being read */
    size_t len, cap;
    uint64_t started;
} conn_t;

static double *lat;       /* latencies, ms */
static size_t lat_count, lat_cap;
static size_t errors;
static int epfd;

static int open_socket(void) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) die("socket");
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    strncpy(a.sun_path, socket_path, sizeof a.sun_path - 1);
    /* A blocking connect: a full accept backlog waits instead of failing. */
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) die("connect");
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

/* Builds the next request into c->req; 0 when --bodies are used up. */
static int next_request(conn_t *c) {
    const char *body = NULL;
    if (bodies) {
        if (shared_body) body = bodies[0];
        else if (next_body < body_count) body = bodies[next_body++];
        else return 0;
    }
    size_t blen = body ? strlen(body) : 0;
    free(c->req);
    c->req = malloc(blen + strlen(path) + 256);
    int n = sprintf(c->req, "%s %s HTTP/1.1\r\nHost: vault\r\n%s", method, path,
                    one_per_request ? "Connection: close\r\n" : "");
    if (body) n += sprintf(c->req + n, "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s", blen, body);
    else n += sprintf(c->req + n, "\r\n");
    c->req_len = (size_t)n;
    c->sent = 0;
    c->len = 0;
    return 1;
}

static void watch(conn_t *c, int op, uint32_t events) {
    struct epoll_event ev = {.events = events, .data.ptr = c};
    if (epoll_ctl(epfd, op, c->fd, &ev) != 0) die("epoll_ctl");
}

static int start(conn_t *c) {
    if (!next_request(c)) return 0;
    if (c->fd < 0) {
        c->fd = open_socket();
        watch(c, EPOLL_CTL_ADD, EPOLLOUT);
    } else {
        watch(c, EPOLL_CTL_MOD, EPOLLOUT);
    }
    c->started = now_ns();
    return 1;
}

static void finish_conn(conn_t *c) {
    if (c->fd >= 0) { epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd, NULL); close(c->fd); }
    c->fd = -1;
}

/* Finds a header's value in the head (case-insensitive name); NULL if absent. */
static const char *header(const char *head, size_t head_len, const char *name) {
    size_t nl = strlen(name);
    for (const char *p = head; p && p < head + head_len;) {
        const char *eol = memmem(p, (size_t)(head + head_len - p), "\r\n", 2);
        if (!eol) break;
        if ((size_t)(eol - p) > nl && strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
            const char *v = p + nl + 1;
            while (*v == ' ') v++;
            return v;
        }
        p = eol + 2;
    }
    return NULL;
}

/* 1 when c->buf holds a whole answer (sets *status, *close_after), 0 when more is needed, -1 on a
 * malformed answer. Bodies come with Content-Length or chunked. */
static int parse(conn_t *c, int *status, int *close_after, size_t *body_at, size_t *body_len) {
    char *end = memmem(c->buf, c->len, "\r\n\r\n", 4);
    if (!end) return 0;
    size_t head_len = (size_t)(end - c->buf) + 4;
    if (c->len < 12 || strncmp(c->buf, "HTTP/1.", 7) != 0) return -1;
    *status = atoi(c->buf + 9);
    const char *conn = header(c->buf, head_len, "Connection");
    *close_after = conn && strncasecmp(conn, "close", 5) == 0;
    const char *cl = header(c->buf, head_len, "Content-Length");
    *body_at = head_len;
    if (cl) {
        size_t n = strtoul(cl, NULL, 10);
        if (c->len < head_len + n) return 0;
        *body_len = n;
        return 1;
    }
    const char *te = header(c->buf, head_len, "Transfer-Encoding");
    if (te && strncasecmp(te, "chunked", 7) == 0) {
        size_t p = head_len;
        while (1) {
            char *eol = memmem(c->buf + p, c->len - p, "\r\n", 2);
            if (!eol) return 0;
            size_t n = strtoul(c->buf + p, NULL, 16);
            size_t data = (size_t)(eol - c->buf) + 2;
            if (n == 0) {
                if (c->len < data + 2) return 0;
                *body_len = c->len - head_len;
                return 1;
            }
            if (c->len < data + n + 2) return 0;
            p = data + n + 2;
        }
    }
    *body_len = 0;   /* no body (204, or a HEAD-like answer) */
    return 1;
}

static void record(double ms) {
    if (lat_count == lat_cap) {
        lat_cap = lat_cap ? lat_cap * 2 : 65536;
        lat = realloc(lat, lat_cap * sizeof *lat);
        if (!lat) die("realloc");
    }
    lat[lat_count++] = ms;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static char *read_file(const char *name) {
    FILE *f = fopen(name, "rb");
    if (!f) die(name);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *s = malloc((size_t)n + 1);
    if (fread(s, 1, (size_t)n, f) != (size_t)n) die(name);
    s[n] = 0;
    fclose(f);
    return s;
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--close")) { one_per_request = 1; continue; }
        if (!v) { fprintf(stderr, "loadgen: %s needs a value\n", a); return 2; }
        i++;
        if (!strcmp(a, "--socket")) socket_path = v;
        else if (!strcmp(a, "--connections")) connections = atoi(v);
        else if (!strcmp(a, "--seconds")) seconds = atof(v);
        else if (!strcmp(a, "--method")) method = v;
        else if (!strcmp(a, "--path")) path = v;
        else if (!strcmp(a, "--expect")) expect_status = atoi(v);
        else if (!strcmp(a, "--contains")) contains = v;
        else if (!strcmp(a, "--body")) { bodies = malloc(sizeof *bodies); bodies[0] = (char *)v; body_count = 1; shared_body = 1; }
        else if (!strcmp(a, "--bodies")) {
            char *text = read_file(v);
            size_t cap = 1024;
            bodies = malloc(cap * sizeof *bodies);
            for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
                if (body_count == cap) bodies = realloc(bodies, (cap *= 2) * sizeof *bodies);
                bodies[body_count++] = line;
            }
        } else { fprintf(stderr, "loadgen: unknown option %s\n", a); return 2; }
    }
    if (!socket_path || connections < 1 || seconds <= 0) {
        fprintf(stderr, "usage: loadgen --socket PATH [--connections N] [--seconds S] [--method M] [--path P] [--body TEXT | --bodies FILE] [--expect STATUS] [--contains TEXT] [--close]\n");
        return 2;
    }
    epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0) die("epoll_create1");
    conn_t *conns = calloc((size_t)connections, sizeof *conns);
    int active = 0;
    uint64_t t0 = now_ns(), deadline = t0 + (uint64_t)(seconds * 1e9);
    for (int i = 0; i < connections; i++) {
        conns[i].fd = -1;
        conns[i].cap = 16384;
        conns[i].buf = malloc(conns[i].cap);
        if (start(&conns[i])) active++;
    }
    struct epoll_event events[256];
    while (active > 0 && errors == 0) {
        int n = epoll_wait(epfd, events, 256, 100);
        if (n < 0) { if (errno == EINTR) continue; die("epoll_wait"); }
        for (int e = 0; e < n; e++) {
            conn_t *c = events[e].data.ptr;
            if (c->sent < c->req_len) {
                ssize_t w = write(c->fd, c->req + c->sent, c->req_len - c->sent);
                if (w < 0 && (errno == EAGAIN || errno == EINTR)) continue;
                if (w <= 0) { errors++; finish_conn(c); active--; continue; }
                c->sent += (size_t)w;
                if (c->sent == c->req_len) watch(c, EPOLL_CTL_MOD, EPOLLIN);
                continue;
            }
            if (c->len == c->cap) c->buf = realloc(c->buf, c->cap *= 2);
            ssize_t r = read(c->fd, c->buf + c->len, c->cap - c->len);
            if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
            if (r <= 0) { errors++; finish_conn(c); active--; continue; }
            c->len += (size_t)r;
            int status, close_after;
            size_t body_at, body_len;
            int done = parse(c, &status, &close_after, &body_at, &body_len);
            if (done == 0) continue;
            if (done < 0 || status != expect_status ||
                (contains && !memmem(c->buf + body_at, body_len, contains, strlen(contains)))) {
                fprintf(stderr, "loadgen: unexpected answer (status %d, expected %d)\n", done < 0 ? 0 : status, expect_status);
                errors++; finish_conn(c); active--; continue;
            }
            uint64_t t = now_ns();
            record((double)(t - c->started) / 1e6);
            if (one_per_request || close_after) finish_conn(c);
            if (t >= deadline || !start(c)) { finish_conn(c); active--; }
        }
    }
    double elapsed = (double)(now_ns() - t0) / 1e9;
    qsort(lat, lat_count, sizeof *lat, cmp);
    double p50 = lat_count ? lat[lat_count / 2] : 0, p99 = lat_count ? lat[lat_count * 99 / 100] : 0;
    printf("{\"requests\":%zu,\"seconds\":%.3f,\"rate\":%.1f,\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"errors\":%zu}\n",
           lat_count, elapsed, lat_count / elapsed, p50, p99, errors);
    return errors ? 1 : 0;
}
