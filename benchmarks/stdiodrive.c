/* stdiodrive: a compiled stdio driver for MCP servers, so the driver's own cost
 * stays out of the figure (benchmarks/stdiobench.py builds it with `cc` on first use).
 *
 *     stdiodrive lockstep|pipelined COUNT FIRST_ID -- command [args...]
 *
 * Starts the command with its stdin and stdout on pipes, sends COUNT `tools/call`
 * echo requests with ids FIRST_ID.. (one at a time for lockstep; all at once from a
 * writer thread for pipelined, while this thread reads), and prints one JSON line:
 * {"rps": ..., "answers": ..., "errors": ...}. An answer is one output line; an error
 * is an answer carrying a JSON-RPC error or an isError result. Several runs can
 * share one server: after the command, lines "MODE COUNT FIRST_ID" on this
 * program's stdin start further runs; the server's stdin closes at EOF.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *LINE =
    "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\","
    "\"arguments\":{\"text\":\"hello\"},\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":"
    "\"2026-07-28\",\"io.modelcontextprotocol/clientCapabilities\":{}}}}\n";

static int to_server, from_server;

struct batch {
    char *data;
    size_t size;
};

static struct batch requests(long count, long first_id) {
    size_t capacity = (size_t)count * 256 + 1;
    struct batch out = {malloc(capacity), 0};
    for (long i = 0; i < count; i++)
        out.size += (size_t)snprintf(out.data + out.size, capacity - out.size, LINE, first_id + i);
    return out;
}

static void write_all(const char *data, size_t size) {
    while (size) {
        ssize_t n = write(to_server, data, size);
        if (n <= 0) {
            perror("stdiodrive: write");
            exit(2);
        }
        data += n;
        size -= (size_t)n;
    }
}

/* Reads until `count` complete lines arrived; counts the error lines among them. */
static long read_answers(long count, long *errors) {
    static char buffer[1 << 20];
    static size_t kept = 0; /* bytes of an unfinished line carried to the next read */
    long lines = 0;
    *errors = 0;
    while (lines < count) {
        ssize_t n = read(from_server, buffer + kept, sizeof buffer - kept - 1);
        if (n <= 0)
            break;
        size_t end = kept + (size_t)n, start = 0;
        buffer[end] = 0;
        for (char *newline; (newline = memchr(buffer + start, '\n', end - start)) != NULL;) {
            *newline = 0;
            if (strstr(buffer + start, "\"error\":{") || strstr(buffer + start, "\"isError\":true"))
                (*errors)++;
            lines++;
            start = (size_t)(newline - buffer) + 1;
        }
        kept = end - start;
        if (kept == sizeof buffer - 1) {
            fprintf(stderr, "stdiodrive: an answer line is longer than %zu bytes\n", kept);
            exit(2);
        }
        memmove(buffer, buffer + start, kept);
    }
    return lines;
}

static void *writer(void *arg) {
    struct batch *all = arg;
    write_all(all->data, all->size);
    return NULL;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void run(const char *mode, long count, long first_id) {
    struct batch all = requests(count, first_id);
    long answers = 0, errors = 0, some;
    double started = now();
    if (strcmp(mode, "lockstep") == 0) {
        const char *line = all.data;
        for (long i = 0; i < count; i++) {
            const char *end = memchr(line, '\n', all.size - (size_t)(line - all.data)) + 1;
            write_all(line, (size_t)(end - line));
            answers += read_answers(1, &some);
            errors += some;
            line = end;
        }
    } else {
        pthread_t thread;
        pthread_create(&thread, NULL, writer, &all);
        answers = read_answers(count, &errors);
        pthread_join(thread, NULL);
    }
    double elapsed = now() - started;
    printf("{\"rps\": %.1f, \"answers\": %ld, \"errors\": %ld}\n", answers / elapsed, answers, errors + count - answers);
    fflush(stdout);
    free(all.data);
}

int main(int argc, char **argv) {
    if (argc < 6 || strcmp(argv[4], "--") != 0) {
        fprintf(stderr, "usage: stdiodrive lockstep|pipelined COUNT FIRST_ID -- command [args...]\n");
        return 2;
    }
    int in[2], out[2];
    if (pipe(in) || pipe(out)) {
        perror("stdiodrive: pipe");
        return 2;
    }
    pid_t child = fork();
    if (child == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]), close(in[1]), close(out[0]), close(out[1]);
        execvp(argv[5], argv + 5);
        perror("stdiodrive: exec");
        _exit(127);
    }
    close(in[0]), close(out[1]);
    to_server = in[1], from_server = out[0];
    signal(SIGPIPE, SIG_IGN);
    run(argv[1], atol(argv[2]), atol(argv[3]));
    char mode[32];
    long count, first_id;
    while (scanf("%31s %ld %ld", mode, &count, &first_id) == 3)
        run(mode, count, first_id);
    close(to_server);
    int status;
    waitpid(child, &status, 0);
    return 0;
}
