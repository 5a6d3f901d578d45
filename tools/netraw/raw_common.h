/*
 * What the raw network tests (braid-ofi-raw, braid-ucx-raw) share: the command line, an
 * out-of-band TCP exchange of endpoint addresses, and the clock. Header-only: each test is
 * one program built against one library, with no braid code in it.
 *
 *   server: braid-X-raw -p PORT [options]            (waits for one client)
 *   client: braid-X-raw -c HOST -p PORT [options]
 *   options: -s BYTES message size (default 4M), -n ITERS (default 200), -w WARMUP (20),
 *            -W WINDOW messages in flight (default 8), -l ITERS of the 8-byte ping-pong
 *            (default 10000; 0 skips it), -B both ways at once (each side sends and
 *            receives -n messages, as the two directions of a ring all-reduce do)
 *
 * The client sends, the server receives (with -B, both do both); both print "size, iters,
 * GB/s" (one direction's bytes over the time) and the ping-pong's half round trip in
 * microseconds.
 */
#ifndef BRAID_TOOLS_NETRAW_RAW_COMMON_H
#define BRAID_TOOLS_NETRAW_RAW_COMMON_H

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct raw_opts {
    const char *host;     /* client: the server's host; NULL on the server */
    int port;
    size_t size;
    int iters, warmup, window, lat_iters;
    int both;             /* -B: each side sends and receives */
} raw_opts_t;

static inline double raw_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline size_t raw_parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    switch (*end) {
    case 'K': case 'k': v *= 1024; break;
    case 'M': case 'm': v *= 1024 * 1024; break;
    case 'G': case 'g': v *= 1024.0 * 1024 * 1024; break;
    default: break;
    }
    return (size_t)v;
}

static inline void raw_usage(const char *prog)
{
    fprintf(stderr, "usage: %s [-c HOST] -p PORT [-s BYTES] [-n ITERS] [-w WARMUP] "
            "[-W WINDOW] [-l LAT_ITERS] [-B]\n", prog);
    exit(2);
}

static inline void raw_parse(int argc, char **argv, raw_opts_t *o)
{
    int c;
    *o = (raw_opts_t){ .port = 0, .size = 4u << 20, .iters = 200, .warmup = 20, .window = 8,
                       .lat_iters = 10000 };
    while ((c = getopt(argc, argv, "c:p:s:n:w:W:l:Bh")) != -1) {
        switch (c) {
        case 'c': o->host = optarg; break;
        case 'p': o->port = atoi(optarg); break;
        case 's': o->size = raw_parse_size(optarg); break;
        case 'n': o->iters = atoi(optarg); break;
        case 'w': o->warmup = atoi(optarg); break;
        case 'W': o->window = atoi(optarg); break;
        case 'l': o->lat_iters = atoi(optarg); break;
        case 'B': o->both = 1; break;
        default: raw_usage(argv[0]);
        }
    }
    if (o->port <= 0 || o->port > 65535 || o->size == 0 || o->iters <= 0 || o->window <= 0 ||
        o->warmup < 0 || o->lat_iters < 0 || optind != argc)
        raw_usage(argv[0]);
}

static inline void raw_die(const char *what, const char *why)
{
    fprintf(stderr, "raw: %s: %s\n", what, why);
    exit(1);
}

/* Connect the out-of-band socket: the server accepts one client (retrying the client's
 * connect for 30 s while the server starts). Blocking socket. */
static inline int raw_oob_connect(const raw_opts_t *o)
{
    int fd, one = 1;
    if (o->host == NULL) {
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)o->port),
                                 .sin_addr.s_addr = htonl(INADDR_ANY) };
        int l = socket(AF_INET, SOCK_STREAM, 0);
        setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(l, 1) != 0)
            raw_die("listen", strerror(errno));
        fd = accept(l, NULL, NULL);
        if (fd < 0)
            raw_die("accept", strerror(errno));
        close(l);
    } else {
        struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *res;
        char port[16];
        snprintf(port, sizeof(port), "%d", o->port);
        int e = getaddrinfo(o->host, port, &hints, &res);
        if (e != 0)
            raw_die(o->host, gai_strerror(e));
        for (int tries = 0;; tries++) {
            fd = socket(AF_INET, SOCK_STREAM, 0);
            if (connect(fd, res->ai_addr, res->ai_addrlen) == 0)
                break;
            close(fd);
            if (tries >= 300)
                raw_die("connect", strerror(errno));
            usleep(100000);
        }
        freeaddrinfo(res);
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

static inline void raw_oob_xfer(int fd, void *buf, size_t len, int send_it)
{
    char *p = buf;
    while (len > 0) {
        ssize_t n = send_it ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
        if (n <= 0)
            raw_die("out-of-band exchange", n == 0 ? "peer closed" : strerror(errno));
        p += n;
        len -= (size_t)n;
    }
}

/* Swap blobs of up to `cap` bytes with the peer: ours out, theirs into `theirs`; returns
 * the length of theirs. */
static inline size_t raw_oob_swap(int fd, const void *ours, size_t len, void *theirs, size_t cap)
{
    uint32_t n = (uint32_t)len, m;
    raw_oob_xfer(fd, &n, sizeof(n), 1);
    raw_oob_xfer(fd, (void *)ours, len, 1);
    raw_oob_xfer(fd, &m, sizeof(m), 0);
    if (m > cap)
        raw_die("out-of-band exchange", "peer's address is too long");
    raw_oob_xfer(fd, theirs, m, 0);
    return m;
}

/* A barrier through the out-of-band socket. */
static inline void raw_oob_barrier(int fd)
{
    char c = 0;
    raw_oob_xfer(fd, &c, 1, 1);
    raw_oob_xfer(fd, &c, 1, 0);
}

static inline void raw_report(const char *lib, const raw_opts_t *o, double bw_seconds,
                              double lat_seconds)
{
    printf("%s: %zu-byte messages x %d, window %d%s: %.3f GB/s\n", lib, o->size, o->iters,
           o->window, o->both ? ", both ways (each way)" : "",
           (double)o->size * o->iters / bw_seconds / 1e9);
    if (o->lat_iters > 0)
        printf("%s: 8-byte ping-pong: %.2f us one way\n", lib,
               lat_seconds / o->lat_iters / 2 * 1e6);
}

#endif
