"""The C programs of the scratch images, compiled with ``gcc -static`` at build time.

They are C, not Python, because each is the whole image: a static binary on an empty root
filesystem starts in a millisecond and weighs under a megabyte, which matters for the pause
image (one per pod) and keeps the test server out of the slow path of every test that uses it.
Both are PID 1 of their container, so both handle SIGTERM themselves (the kernel ignores a
signal PID 1 has no handler for, and StopContainer would wait out the grace period).
"""

from __future__ import annotations

from typing import Final

PAUSE: Final = r"""
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void leave(int sig) { (void)sig; _exit(0); }

static void reap(int sig) {
    (void)sig;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

int main(void) {
    struct sigaction on_exit = {.sa_handler = leave};
    struct sigaction on_child = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP | SA_RESTART};
    if (sigaction(SIGINT, &on_exit, NULL) < 0 || sigaction(SIGTERM, &on_exit, NULL) < 0 ||
        sigaction(SIGCHLD, &on_child, NULL) < 0) {
        return 1;
    }
    for (;;) {
        pause();
    }
}
"""

ECHOSERVER: Final = r"""
/* echoserver [--port=N]: tells an HTTP client what the server saw (PORT env, default 8080).
 *   /healthz   "ok"
 *   /hostname  the pod's hostname
 *   /clientip  the client's address and port, "ip:port" (as agnhost netexec)
 *   /echo?msg=TEXT  TEXT, percent-decoded
 *   anything else: the hostname, the client's address and port, the request line, the headers.
 * One forked child per connection; answers with Connection: close. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define REQUEST_MAX 16384
#define READ_TIMEOUT 10

static void leave(int sig) { (void)sig; _exit(0); }

static int parse_port(int argc, char **argv) {
    const char *text = getenv("PORT");
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "--port=", 7) == 0) {
            text = argv[i] + 7;
        } else if (strcmp(argv[i], "--port") == 0 && i + 1 < argc) {
            text = argv[++i];
        } else {
            fprintf(stderr, "usage: echoserver [--port=N]\n");
            exit(2);
        }
    }
    if (text == NULL) return 8080;
    char *end;
    long port = strtol(text, &end, 10);
    if (*text == '\0' || *end != '\0' || port < 1 || port > 65535) {
        fprintf(stderr, "echoserver: bad port %s\n", text);
        exit(2);
    }
    return (int)port;
}

static int listen_on(int port) {
    struct sockaddr_in6 any6 = {.sin6_family = AF_INET6, .sin6_port = htons(port)};
    struct sockaddr_in any4 = {.sin_family = AF_INET, .sin_port = htons(port)};
    int one = 1, zero = 0;
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    if (fd >= 0) {  /* dual stack; IPv4 clients arrive as ::ffff:a.b.c.d */
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, (struct sockaddr *)&any6, sizeof any6) == 0 && listen(fd, 128) == 0)
            return fd;
        close(fd);
    }
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&any4, sizeof any4) != 0 || listen(fd, 128) != 0) return -1;
    return fd;
}

static void peer_of(const struct sockaddr_storage *peer, char *ip, size_t size, int *port) {
    if (peer->ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)peer;
        *port = ntohs(in6->sin6_port);
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
            inet_ntop(AF_INET, &in6->sin6_addr.s6_addr[12], ip, size);
        else
            inet_ntop(AF_INET6, &in6->sin6_addr, ip, size);
    } else {
        const struct sockaddr_in *in4 = (const struct sockaddr_in *)peer;
        *port = ntohs(in4->sin_port);
        inet_ntop(AF_INET, &in4->sin_addr, ip, size);
    }
}

static int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static void percent_decode(char *text) {
    char *out = text;
    for (char *in = text; *in; in++) {
        if (*in == '%' && hex(in[1]) >= 0 && hex(in[2]) >= 0) {
            *out++ = (char)(hex(in[1]) * 16 + hex(in[2]));
            in += 2;
        } else {
            *out++ = *in == '+' ? ' ' : *in;
        }
    }
    *out = '\0';
}

static void send_all(int fd, const char *data, size_t size) {
    while (size > 0) {
        ssize_t sent = write(fd, data, size);
        if (sent <= 0) return;
        data += sent;
        size -= (size_t)sent;
    }
}

static void respond(int fd, int code, const char *reason, const char *body, size_t size,
                    int head) {
    char header[256];
    int length = snprintf(header, sizeof header,
                          "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
                          "Content-Length: %zu\r\nConnection: close\r\n"
                          "Server: kubelab-echoserver\r\n\r\n",
                          code, reason, size);
    send_all(fd, header, (size_t)length);
    if (!head) send_all(fd, body, size);
}

static void serve(int fd, const struct sockaddr_storage *peer) {
    char request[REQUEST_MAX + 1], ip[INET6_ADDRSTRLEN], hostname[256] = "";
    size_t used = 0;
    int port;
    peer_of(peer, ip, sizeof ip, &port);
    gethostname(hostname, sizeof hostname - 1);
    alarm(READ_TIMEOUT);
    while (used < REQUEST_MAX) {
        ssize_t got = read(fd, request + used, REQUEST_MAX - used);
        if (got <= 0) break;
        used += (size_t)got;
        request[used] = '\0';
        if (strstr(request, "\r\n\r\n") || strstr(request, "\n\n")) break;
    }
    request[used] = '\0';
    char *line_end = strpbrk(request, "\r\n");
    char method[32], target[8192], version[32];
    if (line_end == NULL ||
        sscanf(request, "%31s %8191s %31s", method, target, version) != 3) {
        static const char bad[] = "bad request\n";
        respond(fd, 400, "Bad Request", bad, sizeof bad - 1, 0);
        return;
    }
    int head = strcmp(method, "HEAD") == 0;
    char *query = strchr(target, '?');
    if (query != NULL) *query++ = '\0';
    printf("%s %s from %s:%d\n", method, target, ip, port);
    fflush(stdout);

    char *body = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&body, &size);
    if (out == NULL) return;
    if (strcmp(target, "/healthz") == 0) {
        fputs("ok\n", out);
    } else if (strcmp(target, "/hostname") == 0) {
        fprintf(out, "%s\n", hostname);
    } else if (strcmp(target, "/clientip") == 0) {
        fprintf(out, "%s:%d\n", ip, port);
    } else if (strcmp(target, "/echo") == 0) {
        const char *message = "";
        for (char *field = query ? strtok(query, "&") : NULL; field; field = strtok(NULL, "&")) {
            if (strncmp(field, "msg=", 4) == 0) message = field + 4;
        }
        char copy[8192];
        snprintf(copy, sizeof copy, "%s", message);
        percent_decode(copy);
        fprintf(out, "%s\n", copy);
    } else {
        fprintf(out, "Hostname: %s\n\nRequest:\n", hostname);
        fprintf(out, "\tclient_address=%s\n\tclient_port=%d\n", ip, port);
        fprintf(out, "\tmethod=%s\n\tpath=%s\n\tquery=%s\n\tversion=%s\n", method, target,
                query ? query : "", version);
        fputs("\nHeaders:\n", out);
        for (char *line = strtok(line_end, "\r\n"); line; line = strtok(NULL, "\r\n"))
            fprintf(out, "\t%s\n", line);
    }
    fclose(out);
    respond(fd, 200, "OK", body, size, head);
    free(body);
}

int main(int argc, char **argv) {
    int port = parse_port(argc, argv);
    struct sigaction on_exit = {.sa_handler = leave};
    struct sigaction children = {.sa_handler = SIG_IGN, .sa_flags = SA_NOCLDWAIT};
    if (sigaction(SIGINT, &on_exit, NULL) < 0 || sigaction(SIGTERM, &on_exit, NULL) < 0 ||
        sigaction(SIGCHLD, &children, NULL) < 0) {
        return 1;
    }
    int server = listen_on(port);
    if (server < 0) {
        perror("echoserver: listen");
        return 1;
    }
    printf("echoserver listening on :%d\n", port);
    fflush(stdout);
    for (;;) {
        struct sockaddr_storage peer;
        socklen_t length = sizeof peer;
        int client = accept(server, (struct sockaddr *)&peer, &length);
        if (client < 0) continue;
        pid_t child = fork();
        if (child == 0) {
            close(server);
            serve(client, &peer);
            shutdown(client, SHUT_WR);
            close(client);
            _exit(0);
        }
        close(client);
    }
}
"""
